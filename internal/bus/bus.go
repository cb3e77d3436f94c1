// Package bus is the seam between a workspace's event log and the streams
// that send its events: the log publishes each event once it (and every
// kept event before it) is committed, and whoever streams the workspace
// subscribes by workspace.
//
// A single node uses Local, an in-process bus: Publish calls the
// subscribers directly, on the publisher's goroutine, with the event as it
// is (no copy, no goroutine per event, no allocation). A cluster uses the
// NATS bus of package natsbus, which carries the same events between
// nodes.
//
// Whatever the bus, a subscriber may join while events flow, and a bus
// between nodes may lose events (a slow consumer, a reconnect). Follower
// turns a subscription into what a stream needs: every kept event after a
// given seq, replayed from the store, then the live ones, in seq order,
// with no gap among kept events and no duplicate. It subscribes first,
// then asks where the log ends, replays up to there from the store and
// drops the live events already sent; a live event that skips seqs makes
// it read the skipped ones from the store. Ephemeral events (deltas) are
// live only.
package bus

import (
	"github.com/tandem-dev/tandem/internal/event"

	"context"
)

// Event is one event ready for the wire: its seq, type, session, whether
// it is kept, and its encoded envelope. Subscribers share it: none may
// change its Data.
type Event = event.Event

// Bus carries the events of workspaces from their owner to their
// subscribers.
type Bus interface {
	// Publisher makes this node the one that publishes the workspace's
	// events (its owner) until the Publisher is closed. head is the seq of
	// the last event numbered before it took over: everything kept up to
	// head is committed.
	Publisher(workspaceID string, head int64) (Publisher, error)
	// Subscribe calls fn with each event of the workspace published from
	// now on, in seq order; calls for one workspace do not overlap while
	// one node publishes it. fn must not block: it runs on the publisher's
	// goroutine (Local) or the bus's receiver. lost, when not nil, is
	// called when the bus may have dropped events for the workspace (a
	// slow consumer, a reconnect): the subscriber should catch up from the
	// store. cancel stops the subscription; a Publish already under way
	// may still call fn once.
	Subscribe(workspaceID string, fn func(Event), lost func()) (cancel func(), err error)
	// Head returns the seq of the last event the workspace's publisher
	// published (every kept event up to it is committed), and false when
	// no node publishes the workspace.
	Head(ctx context.Context, workspaceID string) (seq int64, ok bool, err error)
}

// Publisher publishes one workspace's events.
type Publisher interface {
	// Publish hands e to the workspace's subscribers on every node. Call it
	// in seq order, from one goroutine at a time, once e and every kept
	// event before it are committed. It never waits for a subscriber.
	Publish(e Event)
	// Close gives up publishing: Head no longer reports this node.
	Close()
}
