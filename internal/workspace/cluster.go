package workspace

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/proto"
)

// In a cluster (Config.Follower set) a workspace is loaded on every node
// that serves it, but only its owner, the node holding its lease, numbers
// and writes its events. Elsewhere the workspace is a follower: its
// streams are fed from the bus (replayed from the store, then live), and
// it emits nothing. Own and Disown switch between the two; the cluster
// package decides when.

// clustered reports whether the workspace belongs to a cluster.
func (w *Workspace) clustered() bool { return w.m.cfg.Follower != nil }

// emitting reports whether this node may emit the workspace's events:
// always on a single node, only while it owns the workspace in a cluster.
func (w *Workspace) emitting() bool { return !w.clustered() || w.owned.Load() }

// errNotOwner is what an emit on a node that does not own the workspace
// gets: the owner is being replaced (or this node just lost it).
func (w *Workspace) errNotOwner() error {
	return apierr.Errorf(proto.CodeWorkspaceUnavailable, "workspace %s is not owned by this node now; try again", w.ID)
}

// follow starts feeding the workspace's streams from the bus, from the
// last seq its topic published. Call without an owner.
func (w *Workspace) follow() {
	f := w.m.cfg.Follower
	// A feed that cannot catch up (the store out of reach) would leave
	// the streams here in silence: they end instead, and their clients
	// resume (Last-Event-ID) from a node that can serve them.
	feed, err := f.FollowOr(w.ID, w.topic.Head(), w.followed, w.topic.Disconnect)
	if err != nil {
		// The bus refuses only when closed (shutdown): streams then get
		// nothing more, as on a stopping single node.
		w.m.log.Warn("follow workspace events", "workspace_id", w.ID, "err", err)
		return
	}
	w.feedMu.Lock()
	w.feed = feed
	w.feedMu.Unlock()
}

// followed publishes an event of the owner to this node's streams. When
// the owner closes the workspace (DELETE, or its last claim gone), the
// streams here end too, once they have the closing event, as the owner's
// own do.
func (w *Workspace) followed(e bus.Event) {
	closing := e.Type == proto.EventWorkspaceClosing
	if closing && closingReason(e.Data) == ReasonForgotten {
		// Its owner forgot it: this node's copy goes too (before its
		// streams hear of it), and its feed stops, off the feed's own
		// callback.
		w.m.unload(w)
		w.m.background(w.unfollow)
	}
	w.log.mu.Lock()
	w.log.local.Publish(e)
	w.log.mu.Unlock()
	if closing {
		w.topic.Disconnect()
	}
}

// closingReason is the reason a workspace.closing envelope gives.
func closingReason(envelope []byte) string {
	var ev struct {
		Data proto.WorkspaceClosing `json:"data"`
	}
	if json.Unmarshal(envelope, &ev) != nil {
		return ""
	}
	return ev.Data.Reason
}

func (w *Workspace) unfollow() {
	w.feedMu.Lock()
	feed := w.feed
	w.feed = nil
	w.feedMu.Unlock()
	if feed != nil {
		feed.Close()
	}
}

// Owned reports whether this node owns the workspace (always true on a
// single node).
func (w *Workspace) Owned() bool { return w.emitting() }

// Own makes this node the workspace's owner: its events are numbered from
// head + 1 on (head covers every seq any earlier owner may have used) and
// published after commit to this node's streams and to pub, the other
// nodes', which Own takes over. The bus feed of its streams stops first,
// so the local ones get each event once.
func (w *Workspace) Own(pub bus.Publisher, head int64) {
	w.unfollow()
	l := &w.log
	l.mu.Lock()
	l.seq, l.reserved, l.published = head, head, head
	clear(l.waiting)
	l.remote = pub
	l.mu.Unlock()
	w.owned.Store(true)
}

// Disown ends this node's ownership: nothing more is emitted, the
// workspace closes here (its runs end without writing: the store refuses
// them), its publisher closes and its streams go on from the bus. Streams
// stay connected. The cluster releases the other nodes' claims after.
func (w *Workspace) Disown(reason string) {
	if !w.owned.Swap(false) {
		return
	}
	w.close(reason, false)
	l := &w.log
	l.mu.Lock()
	pub := l.remote
	l.remote = nil
	l.mu.Unlock()
	if pub != nil {
		pub.Close()
	}
	if !w.m.isStopping() {
		w.follow()
	}
}

// HoldOpen opens the workspace for the create grace, as POST
// /v1/workspaces does: a new owner uses it so the runs it takes over have
// an open workspace to run in.
func (w *Workspace) HoldOpen() error { return w.holdOpen() }

// waitHead waits, bounded, until the topic of a follower has published
// seq, so a stream resuming here from an event another node already sent
// is served, not reset.
func (w *Workspace) waitHead(ctx context.Context, seq int64) {
	if !w.clustered() || w.owned.Load() {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for w.topic.Head() < seq && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// closeFollower stops the feed at shutdown.
func (w *Workspace) closeFollower() {
	if w.clustered() {
		w.unfollow()
	}
}

// streamsChanged tells the cluster that this node's streams of a
// workspace it does not own changed (the owner's own count directly).
func (w *Workspace) streamsChanged() {
	if !w.clustered() || w.owned.Load() {
		return
	}
	if h := w.m.currentHooks().StreamsChanged; h != nil {
		h(w)
	}
}

// StreamCounts returns this node's open streams of the workspace, per
// client: what a follower reports to the owner as its claims.
func (w *Workspace) StreamCounts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.streams) == 0 {
		return nil
	}
	out := make(map[string]int, len(w.streams))
	for id, n := range w.streams {
		out[id] = n
	}
	return out
}

// Claim counts one more stream of clientID, open on another node, as a
// claim on the workspace, like a stream here: it keeps the workspace open
// and the client's first is announced. The cluster keeps the other nodes'
// reports and calls it on the owner.
func (w *Workspace) Claim(clientID string) error {
	first, err := w.attach(clientID, "")
	if err != nil {
		return err
	}
	if first {
		w.announcePresence(proto.EventClientAttached, clientID)
	}
	return nil
}

// Unclaim ends a claim Claim made.
func (w *Workspace) Unclaim(clientID string) { w.release(clientID) }
