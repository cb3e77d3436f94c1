package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Fences is the store of a cluster node: the database, with every write
// about a workspace checked, in its transaction, against the lease this
// node holds on that workspace (Fenced). A node that does not
// hold the workspace's lease, or lost it (expired while the process was
// paused, taken over by another node), writes nothing for it: the write
// fails with ErrLeaseLost, which the API answers as 503
// workspace_unavailable.
//
// Writes that name no workspace (a message put on its own, a session
// touched, an approval for the session) go unfenced; the event log, where
// every state change of a run is recorded, always names its workspace.
type Fences struct {
	*DB

	mu     sync.RWMutex
	fenced map[string]FencedStore
}

var (
	_ store.Store   = (*Fences)(nil)
	_ store.Rewinds = (*Fences)(nil)
)

// NewFences wraps db; it holds no lease yet.
func NewFences(db *DB) *Fences {
	return &Fences{DB: db, fenced: map[string]FencedStore{}}
}

// Hold fences the workspace's writes on l, from now on.
func (f *Fences) Hold(l Lease) {
	f.mu.Lock()
	f.fenced[l.WorkspaceID] = f.DB.Fenced(l)
	f.mu.Unlock()
}

// Drop refuses the workspace's writes, from now on.
func (f *Fences) Drop(workspaceID string) {
	f.mu.Lock()
	delete(f.fenced, workspaceID)
	f.mu.Unlock()
}

// notOwner is the error of a write for a workspace this node does not own.
type notOwner struct{ workspaceID string }

func (e *notOwner) Error() string {
	return fmt.Sprintf("workspace %s: this node does not hold its lease", e.workspaceID)
}

func (e *notOwner) Unwrap() []error {
	return []error{ErrLeaseLost, apierr.Errorf(proto.CodeWorkspaceUnavailable,
		"workspace %s is changing owner; try again", e.workspaceID)}
}

func (f *Fences) of(workspaceID string) (FencedStore, error) {
	f.mu.RLock()
	s := f.fenced[workspaceID]
	f.mu.RUnlock()
	if s == nil {
		return nil, &notOwner{workspaceID}
	}
	return s, nil
}

// fenced runs a write on the workspace's fenced store and gives a lost
// lease the contract's meaning.
func (f *Fences) fenced1(workspaceID string, write func(s FencedStore) error) error {
	s, err := f.of(workspaceID)
	if err != nil {
		return err
	}
	if err := write(s); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			if f.lapsed(s.Lease()) {
				// Not lost: run out while the database was away, and
				// nobody took it since. Its owner takes it back at its
				// next renewal (cluster.Node), and the write may pass then.
				return fmt.Errorf("%w: the lease of workspace %s ran out while the database was away; its owner is renewing it (%v)",
					store.ErrUnavailable, workspaceID, err)
			}
			return fmt.Errorf("%w (%w)", &notOwner{workspaceID}, err)
		}
		return err
	}
	return nil
}

// lapsed reports whether l expired but is still l, unreleased and taken
// by nobody since: renewing it takes it back.
func (f *Fences) lapsed(l Lease) bool {
	cur, err := f.DB.GetLease(context.Background(), l.WorkspaceID)
	return err == nil && cur.Owner == l.Owner && cur.Epoch == l.Epoch && !cur.Expires.IsZero()
}

// DeleteWorkspace implements store.Store: fenced when this node holds
// the workspace's lease; else only while no other node holds it (the
// cluster routes a forget to the owner, and does it here when there is
// none).
func (f *Fences) DeleteWorkspace(ctx context.Context, id string) error {
	if _, err := f.of(id); err == nil {
		return f.fenced1(id, func(s FencedStore) error { return s.DeleteWorkspace(ctx, id) })
	}
	l, err := f.DB.GetLease(ctx, id)
	if err == nil && !l.Expires.IsZero() && time.Now().Before(l.Expires) {
		return &notOwner{id}
	}
	return f.DB.DeleteWorkspace(ctx, id)
}

// ReserveSeq implements store.Store, fenced.
func (f *Fences) ReserveSeq(ctx context.Context, workspaceID string, upTo int64) error {
	return f.fenced1(workspaceID, func(s FencedStore) error { return s.ReserveSeq(ctx, workspaceID, upTo) })
}

// SetRecoveredThrough implements store.Store, fenced.
func (f *Fences) SetRecoveredThrough(ctx context.Context, workspaceID string, seq int64) error {
	return f.fenced1(workspaceID, func(s FencedStore) error { return s.SetRecoveredThrough(ctx, workspaceID, seq) })
}

// CreateSession implements store.Store, fenced.
func (f *Fences) CreateSession(ctx context.Context, sess store.Session) error {
	return f.fenced1(sess.WorkspaceID, func(s FencedStore) error { return s.CreateSession(ctx, sess) })
}

// UpdateSession implements store.Store, fenced.
func (f *Fences) UpdateSession(ctx context.Context, sess store.Session) error {
	return f.fenced1(sess.WorkspaceID, func(s FencedStore) error { return s.UpdateSession(ctx, sess) })
}

// DeleteSession implements store.Store, fenced.
func (f *Fences) DeleteSession(ctx context.Context, workspaceID, id string) error {
	return f.fenced1(workspaceID, func(s FencedStore) error { return s.DeleteSession(ctx, workspaceID, id) })
}

// AppendEvent implements store.Store, fenced.
func (f *Fences) AppendEvent(ctx context.Context, e store.Event) error {
	return f.fenced1(e.WorkspaceID, func(s FencedStore) error { return s.AppendEvent(ctx, e) })
}

// AppendEvents implements store.Store, fenced; a batch is of one workspace.
func (f *Fences) AppendEvents(ctx context.Context, es []store.Event) error {
	if len(es) == 0 {
		return nil
	}
	return f.fenced1(es[0].WorkspaceID, func(s FencedStore) error { return s.AppendEvents(ctx, es) })
}

// PutPending implements store.Store, fenced.
func (f *Fences) PutPending(ctx context.Context, p store.Pending) error {
	return f.fenced1(p.WorkspaceID, func(s FencedStore) error { return s.PutPending(ctx, p) })
}

// ResolvePending implements store.Store, fenced: of answers racing on
// several nodes, only the owner's can win.
func (f *Fences) ResolvePending(ctx context.Context, workspaceID, requestID string, data json.RawMessage) (won bool, err error) {
	err = f.fenced1(workspaceID, func(s FencedStore) error {
		won, err = s.ResolvePending(ctx, workspaceID, requestID, data)
		return err
	})
	return won, err
}

// SettlePending implements store.Store, fenced.
func (f *Fences) SettlePending(ctx context.Context, workspaceID, requestID string) error {
	return f.fenced1(workspaceID, func(s FencedStore) error { return s.SettlePending(ctx, workspaceID, requestID) })
}

// DeletePending implements store.Store, fenced on the request's workspace.
func (f *Fences) DeletePending(ctx context.Context, requestID string) error {
	p, err := f.DB.GetPending(ctx, requestID)
	if err != nil {
		return err
	}
	return f.fenced1(p.WorkspaceID, func(s FencedStore) error { return s.DeletePending(ctx, requestID) })
}

// PutCheckpoint implements store.Rewinds, fenced.
func (f *Fences) PutCheckpoint(ctx context.Context, c store.Checkpoint) error {
	return f.fenced1(c.WorkspaceID, func(s FencedStore) error { return s.(store.Rewinds).PutCheckpoint(ctx, c) })
}

// Rewind implements store.Rewinds, fenced on the checkpoint's workspace.
func (f *Fences) Rewind(ctx context.Context, sessionID, fromMessageID string, keep store.Checkpoint) (removed int, err error) {
	err = f.fenced1(keep.WorkspaceID, func(s FencedStore) error {
		removed, err = s.(store.Rewinds).Rewind(ctx, sessionID, fromMessageID, keep)
		return err
	})
	return removed, err
}
