package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/checkpoint"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// rewinds is the store's role for checkpoints, nil when the store has
// none (then no checkpoints are taken).
func (c *Coordinator) rewinds() store.Rewinds {
	if c.cfg.Checkpoints == nil {
		return nil
	}
	rw, _ := c.cfg.Store.(store.Rewinds)
	return rw
}

// runCheckpoint takes a run's checkpoint before its first file-changing
// tool call, and records the files as the run left them when it ends.
type runCheckpoint struct {
	c   *Coordinator
	rw  store.Rewinds
	ws  *workspace.Workspace
	sid string
	ar  *agent.Run

	mu    sync.Mutex
	taken *store.Checkpoint
	// warned is set once the session was told the checkpoint is missing.
	warned bool
	// missing is set once the run's checkpoint could not be saved: it is
	// listed as missing, and not tried again at each call.
	missing bool
}

// checkpointer returns the hooks of a run's checkpoint; nil when the
// server keeps none.
func (c *Coordinator) checkpointer(ws *workspace.Workspace, sessionID string, ar *agent.Run) *runCheckpoint {
	rw := c.rewinds()
	if rw == nil {
		return nil
	}
	return &runCheckpoint{c: c, rw: rw, ws: ws, sid: sessionID, ar: ar}
}

// before takes the checkpoint, once per run; the tool calls of a step
// wait for it. A failure is logged and the call goes on: a checkpoint is a
// way back, not a condition for working.
func (rc *runCheckpoint) before(ctx context.Context) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.taken != nil || rc.missing {
		return
	}
	ctx = context.WithoutCancel(ctx)
	log := rc.c.log.With("run_id", rc.ar.ID, "session_id", rc.sid)
	// A revived run took its checkpoint before it was suspended.
	list, err := rc.rw.ListCheckpoints(ctx, rc.sid)
	if err != nil {
		log.Warn("checkpoint not taken", "err", err)
		rc.warnLocked(ctx, err)
		return
	}
	for i := range list {
		if list[i].RunID == rc.ar.ID {
			if list[i].Commit == "" {
				rc.missing = true // it could not be saved before it was suspended
			} else {
				rc.taken = &list[i]
			}
			return
		}
	}
	repo, err := rc.c.cfg.Checkpoints.Repo(rc.ws.ID, rc.ws.Path)
	if err == nil {
		var commit string
		if commit, err = repo.Snapshot(ctx); err == nil {
			ck := store.Checkpoint{
				ID: uuid.NewString(), WorkspaceID: rc.ws.ID, SessionID: rc.sid, RunID: rc.ar.ID,
				MessageID: rc.ar.UserMessageID, Commit: commit, CreatedAt: time.Now().UTC(),
			}
			if err = rc.rw.PutCheckpoint(ctx, ck); err == nil {
				rc.taken = &ck
			}
		}
	}
	if err != nil {
		log.Warn("checkpoint not taken", "err", err)
		rc.warnLocked(ctx, err)
		// Listed as missing, where the store can still say so (a cluster's
		// database is not on the full disk): a client choosing where to go
		// back to sees the gap, not a silently shorter list.
		rc.missing = true
		ck := store.Checkpoint{ID: uuid.NewString(), WorkspaceID: rc.ws.ID, SessionID: rc.sid, RunID: rc.ar.ID,
			MessageID: rc.ar.UserMessageID, CreatedAt: time.Now().UTC()}
		if err := rc.rw.PutCheckpoint(ctx, ck); err != nil {
			log.Warn("missing checkpoint not listed", "err", err)
		}
	}
}

// warnLocked tells the session's clients, once per run, that the run
// changes files with no checkpoint before it (a full data disk, say): no
// rewind to before it will be possible, and nobody would know otherwise.
// The reason stays in the server's log; the clients get its kind only.
func (rc *runCheckpoint) warnLocked(ctx context.Context, err error) {
	if rc.warned {
		return
	}
	rc.warned = true
	why := "the server could not save it (its log says why)"
	if errors.Is(err, syscall.ENOSPC) {
		why = "the server's data disk is full"
	}
	if _, err := rc.ws.Emit(ctx, workspace.Draft{
		Type: proto.EventSessionLog, SessionID: rc.sid, RunID: rc.ar.ID,
		Data: proto.SessionLog{Level: "warning", Message: fmt.Sprintf(
			"no checkpoint was taken before run %s changed files: %s; a rewind to before this run will not be possible", rc.ar.ID, why)},
	}); err != nil {
		rc.c.log.Warn("tell the session its checkpoint is missing", "run_id", rc.ar.ID, "err", err)
	}
}

// endLost is the Ending of a run a crash left behind (Recover): the files
// as the crash left them are the run's outcome, recorded before its
// run.completed like any run's end; were they not, a later hand edit
// would go unnoticed by the conflict check.
func (rc *runCheckpoint) endLost() {
	list, err := rc.rw.ListCheckpoints(context.Background(), rc.sid)
	if err != nil {
		rc.c.log.Warn("end of checkpointed run not recorded", "run_id", rc.ar.ID, "session_id", rc.sid, "err", err)
		return
	}
	for i := range list {
		if list[i].RunID == rc.ar.ID && list[i].Commit != "" {
			rc.mu.Lock()
			rc.taken = &list[i]
			rc.mu.Unlock()
			rc.end()
			return
		}
	}
}

// end records the files as the run left them, before its run.completed:
// what changes after that is someone else's doing (rewind_conflict).
func (rc *runCheckpoint) end() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.taken == nil {
		return
	}
	ctx := context.Background()
	repo, err := rc.c.cfg.Checkpoints.Repo(rc.ws.ID, rc.ws.Path)
	if err == nil {
		var commit string
		// With the files the checkpoint recorded that the walk does not
		// see now (a .gitignore the run changed): a later edit of one is
		// someone else's too.
		if commit, err = repo.Snapshot(ctx, rc.taken.Commit); err == nil {
			ck := *rc.taken
			ck.End = commit
			err = rc.rw.PutCheckpoint(ctx, ck)
		}
	}
	if err != nil {
		rc.c.log.Warn("end of checkpointed run not recorded", "run_id", rc.ar.ID, "session_id", rc.sid, "err", err)
	}
}

// Checkpoints lists the session's checkpoints, oldest first.
func (c *Coordinator) Checkpoints(ctx context.Context, wsID, sessionID string) ([]proto.Checkpoint, error) {
	_, rec, err := c.cfg.Sessions.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return nil, err
	}
	out := []proto.Checkpoint{}
	rw := c.rewinds()
	if rw == nil {
		return out, nil
	}
	list, err := rw.ListCheckpoints(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", rec.ID, err)
	}
	for _, ck := range list {
		out = append(out, proto.Checkpoint{ID: ck.ID, RunID: ck.RunID, MessageID: ck.MessageID, CreatedAt: proto.Time{Time: ck.CreatedAt}, Missing: ck.Commit == ""})
	}
	return out, nil
}

// checkpoint finds one of the session's checkpoints, with the list it is in.
func (c *Coordinator) checkpoint(ctx context.Context, sessionID, id string) (store.Checkpoint, []store.Checkpoint, error) {
	notFound := apierr.Errorf(proto.CodeCheckpointNotFound, "checkpoint %q not found in session %s", id, sessionID)
	rw := c.rewinds()
	if rw == nil {
		return store.Checkpoint{}, nil, notFound
	}
	list, err := rw.ListCheckpoints(ctx, sessionID)
	if err != nil {
		return store.Checkpoint{}, nil, fmt.Errorf("list checkpoints of %s: %w", sessionID, err)
	}
	// A checkpoint that could not be saved is listed, and is no way back.
	saved := make([]store.Checkpoint, 0, len(list))
	for _, ck := range list {
		switch {
		case ck.Commit != "":
			saved = append(saved, ck)
		case ck.ID == id:
			notFound = apierr.Errorf(proto.CodeCheckpointNotFound, "checkpoint %q of session %s could not be saved when its run changed files (see the run's session.log warning): there is no way back to it", id, sessionID)
		}
	}
	for _, ck := range saved {
		if ck.ID == id {
			return ck, saved, nil
		}
	}
	return store.Checkpoint{}, nil, notFound
}

// CheckpointDiff is what a rewind to the checkpoint would undo: the
// changes from it to the files now.
func (c *Coordinator) CheckpointDiff(ctx context.Context, wsID, sessionID, checkpointID string) (proto.CheckpointDiff, error) {
	ws, rec, err := c.cfg.Sessions.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.CheckpointDiff{}, err
	}
	ck, _, err := c.checkpoint(ctx, rec.ID, checkpointID)
	if err != nil {
		return proto.CheckpointDiff{}, err
	}
	if !c.cfg.Checkpoints.Has(ws.ID) {
		// Taken on another node (a cluster's former owner): a read makes
		// no repository here.
		return proto.CheckpointDiff{}, notHere(ck, checkpoint.ErrNotHere)
	}
	repo, err := c.cfg.Checkpoints.Repo(ws.ID, ws.Path)
	if err != nil {
		return proto.CheckpointDiff{}, err
	}
	// A read: the files now are hashed, not stored.
	plan, diff, err := repo.DiffNow(ctx, ck.Commit)
	if err != nil {
		return proto.CheckpointDiff{}, notHere(ck, err)
	}
	return proto.CheckpointDiff{Files: plan.Changes, Diff: diff, Kept: plan.Kept}, nil
}

// maxConflictNames bounds the files a rewind_conflict names.
const maxConflictNames = 20

// Rewind takes the session back to a checkpoint: its files (unless
// req.Files is false) and its history (unless req.History is false). It
// holds the session's lock throughout, so a prompt accepted meanwhile
// waits for it and then runs on the rewound session, and a rewind that
// finds a run accepted first is refused: one of them wins, whole.
func (c *Coordinator) Rewind(ctx context.Context, wsID, sessionID string, req proto.RewindRequest) (proto.RewindResult, error) {
	ws, rec, err := c.cfg.Sessions.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.RewindResult{}, err
	}
	if req.CheckpointID == "" {
		return proto.RewindResult{}, apierr.Invalid("checkpoint_id is required")
	}
	files, history := req.Files == nil || *req.Files, req.History == nil || *req.History
	// Once decided, a rewind is finished even if its client goes away:
	// half the files back would help nobody.
	ctx = context.WithoutCancel(ctx)
	deletes := c.deletes.Load()
	sr := c.settleLocked(ws, c.lockSession(ws, rec.ID))
	defer sr.mu.Unlock()
	if err := c.admitLocked(ctx, sr, deletes); err != nil {
		return proto.RewindResult{}, err
	}
	if active, queued := sr.current(); active != nil || len(queued) > 0 || sr.idle != nil {
		return proto.RewindResult{}, apierr.Errorf(proto.CodeSessionBusy, "session %s has a run active or queued; cancel it or wait for it to end before rewinding", rec.ID)
	}
	// A run parked on a permission or a client's tool, suspended (not in
	// memory), is a run of the session too: it would go on from a history
	// the rewind took away.
	pend, err := c.cfg.Store.ListPending(ctx, ws.ID)
	if err != nil {
		return proto.RewindResult{}, fmt.Errorf("list pending work of %s: %w", ws.ID, err)
	}
	for _, p := range pend {
		if p.SessionID == rec.ID {
			return proto.RewindResult{}, apierr.Errorf(proto.CodeSessionBusy, "session %s has a run waiting on an answer (request %s); answer or cancel it before rewinding", rec.ID, p.RequestID)
		}
	}
	ck, list, err := c.checkpoint(ctx, rec.ID, req.CheckpointID)
	if err != nil {
		return proto.RewindResult{}, err
	}
	repo, err := c.cfg.Checkpoints.Repo(ws.ID, ws.Path)
	if err != nil {
		return proto.RewindResult{}, err
	}
	last := list[len(list)-1]
	// Stored, with what the checkpoints recorded that the walk does not
	// see now: a failure part way puts these back.
	now, err := repo.Snapshot(ctx, ck.Commit, last.Commit, last.End)
	if err != nil {
		return proto.RewindResult{}, notHere(ck, err)
	}
	res := proto.RewindResult{Files: []proto.FileChange{}}
	if files {
		plan, err := repo.Plan(ck.Commit, now)
		if err != nil {
			return proto.RewindResult{}, notHere(ck, err)
		}
		if !req.Force {
			edited, err := repo.Edited(last.Commit, last.End, now, ck.Commit)
			if err != nil {
				return proto.RewindResult{}, notHere(last, err)
			}
			if len(edited) > 0 {
				return proto.RewindResult{}, conflict(edited, last.End == "")
			}
		}
		if err := repo.Apply(ctx, plan); err != nil {
			return proto.RewindResult{}, applyError(rec.ID, err)
		}
		res.Files, res.Kept = plan.Changes, plan.Kept
		if now, err = repo.Snapshot(ctx, ck.Commit); err != nil {
			return proto.RewindResult{}, err
		}
	}
	// The files as the rewind left them are the session's own from now
	// on: only a change after this is someone else's.
	keep, from := last, ""
	if history {
		keep = ck
		if from, err = c.runMessage(ctx, rec.ID, ck); err != nil {
			return proto.RewindResult{}, err
		}
	}
	keep.End = now
	if res.RemovedMessages, err = c.rewinds().Rewind(ctx, rec.ID, from, keep); err != nil {
		return proto.RewindResult{}, fmt.Errorf("rewind history of session %s: %w", rec.ID, err)
	}
	if history {
		// Read again from the store at the next run, without what left.
		sr.history = nil
		if len(list) > 0 && list[len(list)-1].ID != ck.ID {
			// Later checkpoints are gone: so are the files only they held.
			c.collect(ctx, ws.ID)
		}
	}
	if _, err := ws.Emit(ctx, workspace.Draft{
		Type: proto.EventSessionRewound, SessionID: rec.ID,
		Data: proto.SessionRewound{CheckpointID: ck.ID, Files: res.Files, RemovedMessages: res.RemovedMessages},
	}); err != nil {
		return proto.RewindResult{}, err
	}
	return res, nil
}

// runMessage is the first message of the checkpoint's run: its user
// message, or, when that was not known as the checkpoint was taken, the
// first message with its run id.
func (c *Coordinator) runMessage(ctx context.Context, sessionID string, ck store.Checkpoint) (string, error) {
	if ck.MessageID != "" {
		return ck.MessageID, nil
	}
	msgs, err := c.rewinds().AllMessages(ctx, sessionID)
	if err != nil {
		return "", err
	}
	for _, m := range msgs {
		if m.RunID == ck.RunID && !m.Rewound {
			return m.ID, nil
		}
	}
	return "", nil
}

// notHere turns the error of a checkpoint recorded on another node (in a
// cluster, before this one took the workspace over) into a 404 saying so.
func notHere(ck store.Checkpoint, err error) error {
	if errors.Is(err, checkpoint.ErrNotHere) {
		return apierr.Errorf(proto.CodeCheckpointNotFound, "checkpoint %s was recorded on another node, which owned the workspace then; its files are not here", ck.ID)
	}
	return err
}

// applyError is the answer to a rewind whose files could not be put back:
// either nothing was changed (the plan did not hold against the files) or
// what was changed was put back.
func applyError(sessionID string, err error) error {
	switch {
	case errors.Is(err, checkpoint.ErrBlocked):
		return apierr.Errorf(proto.CodeRewindConflict, "the files of session %s cannot be rewound as they are now: %v; nothing was changed", sessionID, err)
	case errors.Is(err, checkpoint.ErrUndone):
		return apierr.Errorf(proto.CodeInternal, "rewinding the files of session %s failed: %v; nothing was rewound", sessionID, err)
	}
	return fmt.Errorf("rewind files of session %s: %w", sessionID, err)
}

// collect removes from the workspace's checkpoint store what no checkpoint
// of its sessions reaches any more. A failure is logged: what stays is
// collected next time.
func (c *Coordinator) collect(ctx context.Context, wsID string) {
	if err := c.collectWorkspace(ctx, wsID); err != nil {
		c.log.Warn("checkpoint store not collected", "workspace_id", wsID, "err", err)
	}
}

func (c *Coordinator) collectWorkspace(ctx context.Context, wsID string) error {
	rw := c.rewinds()
	if rw == nil || !c.cfg.Checkpoints.Has(wsID) {
		return nil
	}
	w, err := c.cfg.Store.GetWorkspace(ctx, wsID)
	if errors.Is(err, store.ErrNotFound) {
		return c.cfg.Checkpoints.Drop(wsID)
	}
	if err != nil {
		return err
	}
	sessions, err := c.cfg.Store.ListSessions(ctx, wsID)
	if err != nil {
		return err
	}
	var live []string
	for _, s := range sessions {
		list, err := rw.ListCheckpoints(ctx, s.ID)
		if err != nil {
			return err
		}
		for _, ck := range list {
			if ck.Commit != "" {
				live = append(live, ck.Commit, ck.End)
			}
		}
	}
	repo, err := c.cfg.Checkpoints.Repo(wsID, w.Path)
	if err != nil {
		return err
	}
	n, err := repo.Collect(live)
	if n > 0 {
		c.log.Info("checkpoint store collected", "workspace_id", wsID, "objects_removed", n)
	}
	return err
}

// CollectCheckpoints collects the checkpoint store of every workspace
// that has one (at start, before the server serves): the objects of the
// sessions deleted meanwhile, and the stores of workspaces gone.
func (c *Coordinator) CollectCheckpoints(ctx context.Context) {
	if c.rewinds() == nil {
		return
	}
	ids, err := c.cfg.Checkpoints.Stored()
	if err != nil {
		c.log.Warn("checkpoint stores not collected", "err", err)
		return
	}
	for _, id := range ids {
		c.collect(ctx, id)
	}
}

// conflict is the refusal of a rewind over files someone else changed;
// unended when the last run's end was never recorded (a crash), so every
// change since it started may be someone else's.
func conflict(edited []proto.FileChange, unended bool) error {
	if unended {
		return apierr.Errorf(proto.CodeRewindConflict,
			"the session's last run never recorded its end, so who changed these files since it started is unknown: %s; rewind with force to overwrite them", conflictNames(edited))
	}
	return apierr.Errorf(proto.CodeRewindConflict,
		"files changed since the session's last run ended, not by it: %s; rewind with force to overwrite them", conflictNames(edited))
}

func conflictNames(edited []proto.FileChange) string {
	names := make([]string, 0, min(len(edited), maxConflictNames))
	for i, f := range edited {
		if i == maxConflictNames {
			names = append(names, fmt.Sprintf("and %d more", len(edited)-maxConflictNames))
			break
		}
		names = append(names, f.Path)
	}
	return strings.Join(names, ", ")
}
