// Package event holds the one type that the event log, the bus between
// nodes and the streams to clients all pass along: an event encoded for
// the wire. It is a leaf, so that none of them imports another for it.
package event

// Event is one event ready for the wire.
type Event struct {
	Seq       int64  // > 0, strictly increasing per workspace
	Type      string // SSE "event:" name
	SessionID string // "" for workspace-level events
	Kept      bool   // persisted; only kept events are replayed on resume
	Data      []byte // the JSON envelope, one line, no newline
}
