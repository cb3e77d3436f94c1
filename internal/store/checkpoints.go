package store

import (
	"context"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// Checkpoint is the record of a checkpoint (contract section 11): the
// files themselves are in the workspace's shadow repository, named by
// Commit; the store keeps which session and run it belongs to.
type Checkpoint struct {
	ID          string
	WorkspaceID string
	SessionID   string
	RunID       string
	// MessageID is the run's user message.
	MessageID string
	// Commit is the shadow repository's commit of the files before the run.
	Commit string
	// End is the commit of the files as the run left them ("" while it
	// runs, or when it never ended); a rewind sets it on the checkpoint it
	// keeps last to the files it left.
	End       string
	CreatedAt time.Time
}

// Rewinds is the store's role for checkpoints and rewound history. It is
// a role of its own, not part of Store, so a store without it still
// serves everything else.
type Rewinds interface {
	// PutCheckpoint inserts c, or replaces the one with its ID; ErrNotFound
	// when c's session is not (or no longer) stored.
	PutCheckpoint(ctx context.Context, c Checkpoint) error
	// ListCheckpoints returns the session's checkpoints, oldest first.
	ListCheckpoints(ctx context.Context, sessionID string) ([]Checkpoint, error)
	// AllMessages is ListMessages with the rewound messages too, marked
	// Rewound.
	AllMessages(ctx context.Context, sessionID string) ([]proto.Message, error)
	// Rewind marks the session's messages from fromMessageID on (in their
	// order; "" for none) rewound, deletes its checkpoints created after
	// keep's, and sets keep's End to end, all in one transaction. It
	// returns how many messages it marked. ListMessages leaves rewound
	// messages out.
	Rewind(ctx context.Context, sessionID, fromMessageID string, keep Checkpoint) (removed int, err error)
}
