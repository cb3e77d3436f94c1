// Package store defines how Tandem persists its state. The interface lives here;
// the SQLite implementation lives in the sqlite subpackage, and all SQL stays there.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// ErrNotFound is returned when the asked-for row does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a row with the same key already exists.
var ErrExists = errors.New("already exists")

// ErrUnavailable is wrapped by errors of the storage itself rather than of
// the request: a full disk, an I/O error, a database locked past its
// timeout. They pass when the storage recovers; the same request may then
// succeed.
var ErrUnavailable = errors.New("storage unavailable")

// Workspace is a persisted workspace.
type Workspace struct {
	ID        string
	Path      string // resolved absolute path, unique
	CreatedAt time.Time
	// SeqReserved is the highest event seq that may have been handed out for this
	// workspace. After a restart numbering resumes above it, so seqs keep growing
	// even though ephemeral events never reach the disk.
	SeqReserved int64
	// RecoveredThrough is a seq of the workspace's log at or below which
	// every run accepted has completed: finding the runs a crash left
	// unfinished needs only the events above it.
	RecoveredThrough int64
}

// Session is a persisted session. Runtime fields (busy, queued, attached clients)
// are not stored.
type Session struct {
	ID              string
	WorkspaceID     string
	Title           string
	Model           string
	ReasoningEffort string
	// Config is the session's settings as JSON (system message, tool filters,
	// permission mode, provider without its key...). The store does not look inside.
	Config       json.RawMessage
	CreatedAt    time.Time
	UpdatedAt    time.Time
	MessageCount int // computed on read; ignored on write
	// Usage is the sum of the usage of the session's runs that have
	// ended, and ContextTokens the size of its conversation as its last
	// run left it (0: never set). Only events change them (Event.Usage);
	// CreateSession and UpdateSession ignore them.
	Usage         proto.Usage
	ContextTokens int64
}

// SessionUsage is what a run adds to its session's usage when it ends.
type SessionUsage struct {
	// Add is added to the session's Usage: each count, and the cost when
	// Add has one (a session's cost is absent until a run had one).
	Add proto.Usage
	// ContextTokens, when above 0, replaces the session's ContextTokens.
	ContextTokens int64
}

// Event is a persisted event of the workspace log.
type Event struct {
	Seq         int64
	WorkspaceID string
	SessionID   string // "" for workspace-level events
	RunID       string
	Type        string
	// InHistory is true when the event belongs to its session's history
	// (GET .../sessions/{sid}/events); see proto.InSessionHistory.
	InHistory bool
	// Envelope is the encoded proto.Event, exactly as sent on the stream.
	Envelope []byte

	// Message, when set, is the message the event announces. It is put (as
	// by PutMessage) in the event's transaction, so the event is never on
	// disk without it. Not read back.
	Message *proto.Message
	// MessageJSON, when set, is Message already encoded, so it is not
	// encoded twice.
	MessageJSON []byte
	// Touch, when set, raises the session's UpdatedAt to it (as by
	// TouchSession) in the event's transaction. Not read back.
	Touch time.Time
	// Session, when set, is the session record the event announces. It is
	// written (as by UpdateSession) in the event's transaction, so a change
	// is never on disk without its event, nor the event without the change.
	// Not read back.
	Session *Session
	// Usage, when set, is added to the session's usage (see SessionUsage)
	// in the event's transaction, so a run's usage is counted exactly once
	// with its end. Not read back.
	Usage *SessionUsage
	// Attachments, when set, are the attachments of the prompt the event
	// accepts (a run.accepted), kept for the event's run in the event's
	// transaction: a prompt is never on disk without them. They stay until
	// the run's run.completed, whose transaction deletes them. Not read back
	// with the event: see Events.RunAttachments.
	Attachments *Attachments
	// PromptKey, when set, is the idempotency key the prompt the event
	// accepts (a run.accepted, steered or not) came with: kept for the
	// event's session and run in the event's transaction, so that a retry
	// finds the run on any node, after any restart (Events.PromptByKey).
	// The session's keys older than PromptKeyTTL go in the same
	// transaction. Not read back with the event.
	PromptKey *PromptKey
}

// PromptKeyTTL is how long an accepted prompt's idempotency key names its
// run (the contract's 24 hours).
const PromptKeyTTL = 24 * time.Hour

// PromptKey is a prompt's idempotency key and when it was accepted.
type PromptKey struct {
	Key string
	At  time.Time
}

// Attachments are an accepted prompt's attachments, kept for its run until
// it ends (Event.Attachments): a run queued when its server died runs with
// them on the next start or owner.
type Attachments struct {
	// MessageID is empty for the run's own prompt, else the message id of a
	// prompt steered into the run.
	MessageID string
	// Data is the attachments as read at accept time, in their writer's
	// encoding; the store does not look inside.
	Data []byte
}

// Pending is a request a parked run waits on (a permission or a client tool call).
type Pending struct {
	RequestID   string
	WorkspaceID string
	SessionID   string
	RunID       string
	Kind        string          // "permission" or "tool_call"
	Data        json.RawMessage // the request as sent to clients plus what reviving the run needs
	CreatedAt   time.Time
	// Settled marks a request whose answer reached its run, or whose run gave
	// it up. It is kept (a late answer is told it was resolved) but is no
	// longer listed as the workspace's pending work.
	Settled bool
	// Resolved marks a request that has its answer (see
	// PendingWork.ResolvePending); it is set once and never cleared.
	Resolved bool
}

// Store is everything Tandem keeps on disk, by role (Workspaces, Sessions,
// Events, PendingWork): a package that needs one role takes only it.
// Implementations (SQLite, PostgreSQL) are safe for concurrent use and pass
// one conformance suite (storetest). Every write is durable (committed)
// when the call returns.
type Store interface {
	Workspaces
	Sessions
	Events
	PendingWork

	// Close flushes and closes the database.
	Close() error
}

// Workspaces is the store's role for workspaces and the numbering of
// their events.
type Workspaces interface {
	// EnsureWorkspace returns the workspace whose Path is w.Path, inserting w when
	// there is none; created reports whether w was inserted.
	EnsureWorkspace(ctx context.Context, w Workspace) (ws Workspace, created bool, err error)
	GetWorkspace(ctx context.Context, id string) (Workspace, error)
	ListWorkspaces(ctx context.Context) ([]Workspace, error) // oldest first
	// DeleteWorkspace removes the workspace with everything it holds: its
	// sessions with their messages, events, pending requests, approvals,
	// attachments, prompt keys and checkpoint records, and its own log.
	// ErrNotFound when there is no such workspace.
	DeleteWorkspace(ctx context.Context, id string) error
	// ReserveSeq raises the workspace's SeqReserved to upTo (never lowers it).
	ReserveSeq(ctx context.Context, workspaceID string, upTo int64) error
	// SetRecoveredThrough raises the workspace's RecoveredThrough to seq
	// (never lowers it).
	SetRecoveredThrough(ctx context.Context, workspaceID string, seq int64) error
}

// Sessions is the store's role for sessions and their messages.
type Sessions interface {
	CreateSession(ctx context.Context, s Session) error // ErrExists when the id is taken
	GetSession(ctx context.Context, workspaceID, id string) (Session, error)
	// ListSessions returns the workspace's sessions, most recently updated first.
	ListSessions(ctx context.Context, workspaceID string) ([]Session, error)
	UpdateSession(ctx context.Context, s Session) error
	// TouchSession raises the session's UpdatedAt to at (never lowers it), so
	// activity reorders the session list without a read-modify-write.
	TouchSession(ctx context.Context, id string, at time.Time) error
	// DeleteSession removes the session with its messages, events, pending
	// requests and approvals.
	DeleteSession(ctx context.Context, workspaceID, id string) error

	// PutMessage inserts or replaces a message by id; the created order is kept.
	PutMessage(ctx context.Context, m proto.Message) error
	ListMessages(ctx context.Context, sessionID string) ([]proto.Message, error) // oldest first
}

// Events is the store's role for the workspace log, where every stream
// replays from.
type Events interface {
	AppendEvent(ctx context.Context, e Event) error
	// AppendEvents appends the events in one transaction: all or none.
	AppendEvents(ctx context.Context, es []Event) error
	// WorkspaceEvents returns the workspace log's events with afterSeq < seq <= upToSeq
	// (upToSeq <= 0: no upper bound), oldest first, at most limit (<= 0: no limit).
	WorkspaceEvents(ctx context.Context, workspaceID string, afterSeq, upToSeq int64, limit int) ([]Event, error)
	// SessionEvents returns the session's history events (InHistory) with seq > afterSeq,
	// oldest first, at most limit (<= 0: no limit).
	SessionEvents(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]Event, error)
	// MaxSeq is the highest persisted seq of the workspace, 0 when none.
	MaxSeq(ctx context.Context, workspaceID string) (int64, error)
	// RunAttachments returns the attachments kept for the run
	// (Event.Attachments) in the order their events were appended; none
	// once the run completed, or when it had none.
	RunAttachments(ctx context.Context, runID string) ([]Attachments, error)
	// PromptByKey returns the run whose prompt was accepted in the session
	// with the idempotency key (Event.PromptKey) at or after since;
	// ErrNotFound when there is none.
	PromptByKey(ctx context.Context, sessionID, key string, since time.Time) (runID string, err error)
}

// PendingWork is the store's role for parked work: pending permission
// and tool call requests, and the kinds of permission a session approved.
type PendingWork interface {
	PutPending(ctx context.Context, p Pending) error
	DeletePending(ctx context.Context, requestID string) error // ErrNotFound when absent
	GetPending(ctx context.Context, requestID string) (Pending, error)
	// ListPending returns the workspace's requests that are not settled, oldest first.
	ListPending(ctx context.Context, workspaceID string) ([]Pending, error)
	// RunPending returns every request of the run, settled or not, oldest first.
	RunPending(ctx context.Context, runID string) ([]Pending, error)
	// ResolvePending records the answer of the workspace's request: it
	// replaces the row's Data with data and sets Resolved, only if the row
	// was not resolved yet. Of callers racing to resolve one request, on
	// one node or on many, exactly one gets true; the others get false and
	// change nothing. ErrNotFound when the workspace has no such request.
	ResolvePending(ctx context.Context, workspaceID, requestID string, data json.RawMessage) (resolved bool, err error)
	// SettlePending sets the request's Settled; settling it again does
	// nothing. ErrNotFound when the workspace has no such request.
	SettlePending(ctx context.Context, workspaceID, requestID string) error

	// ApproveForSession records that the session approved the kind of
	// permission for the rest of its life; recording it again does nothing.
	ApproveForSession(ctx context.Context, sessionID, kind string) error
	// SessionApprovals returns the kinds the session approved, in no order.
	SessionApprovals(ctx context.Context, sessionID string) ([]string, error)
}

// MessageWriter is a store's role for writing many messages at once (a
// fork's or an import's copy): a few large commits instead of one per
// message, which for a long session took seconds and grew SQLite's WAL by
// gigabytes. A store without it gets PutMessage for each.
type MessageWriter interface {
	// PutMessages puts the messages, in order, as PutMessage does each. A
	// failure may leave some of them written.
	PutMessages(ctx context.Context, msgs []proto.Message) error
}

// MessagesToWrite says, for each event of one all-or-none flush, the
// message to write with it: a flush often carries a message twice (opened,
// then finished), and only its last version can ever be read, so it is
// written once, with the event of its first version, which is what gives
// the message its place in the session. nil where there is none.
func MessagesToWrite(es []Event) []*Event {
	last := make(map[string]int)
	for i, e := range es {
		if e.Message != nil {
			last[e.Message.ID] = i
		}
	}
	out := make([]*Event, len(es))
	for i, e := range es {
		if e.Message == nil {
			continue
		}
		if l, ok := last[e.Message.ID]; ok {
			out[i] = &es[l]
			delete(last, e.Message.ID)
		}
	}
	return out
}

// MessageData is the JSON of e's message: MessageJSON when its writer
// encoded it already.
func MessageData(e *Event) ([]byte, error) {
	if e.MessageJSON != nil {
		return e.MessageJSON, nil
	}
	return json.Marshal(e.Message)
}
