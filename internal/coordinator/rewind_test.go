package coordinator

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/checkpoint"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// The memStore's checkpoints: store.Rewinds over memory.
func (s *memStore) PutCheckpoint(_ context.Context, c store.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.checkpoints
	if i := slices.IndexFunc(list, func(x store.Checkpoint) bool { return x.ID == c.ID }); i >= 0 {
		list[i] = c
		return nil
	}
	s.checkpoints = append(list, c)
	return nil
}

func (s *memStore) ListCheckpoints(_ context.Context, sessionID string) ([]store.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Checkpoint
	for _, c := range s.checkpoints {
		if c.SessionID == sessionID {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *memStore) AllMessages(context.Context, string) ([]proto.Message, error) { return nil, nil }

func (s *memStore) Rewind(_ context.Context, sessionID, _ string, keep store.Checkpoint) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Checkpoint
	after := false
	for _, c := range s.checkpoints {
		if c.SessionID == sessionID && after {
			continue
		}
		if c.ID == keep.ID {
			c, after = keep, true
		}
		out = append(out, c)
	}
	s.checkpoints = out
	return 0, nil
}

func (s *memStore) ListPending(_ context.Context, wsID string) ([]store.Pending, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Pending
	for _, p := range s.pending {
		if p.WorkspaceID == wsID {
			out = append(out, p)
		}
	}
	return out, nil
}

// rewindHarness is a harness keeping checkpoints, with files in its
// workspace.
func rewindHarness(t *testing.T, files map[string]string) (*harness, string) {
	h := newHarness(t)
	h.checkpointsDir = filepath.Join(t.TempDir(), "checkpoints")
	h.checkpoints = checkpoint.NewManager(h.checkpointsDir)
	h.stop()
	h.start()
	for rel, content := range files {
		write(t, h.ws.Path, rel, content)
	}
	return h, h.session()
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// checkpointRun records a checkpoint of the files now for a run of the
// session, runs change (the run's work), and records its end unless
// ended is false.
func checkpointRun(t *testing.T, h *harness, sid string, change func(), ended bool) store.Checkpoint {
	t.Helper()
	repo, err := h.checkpoints.Repo(h.ws.ID, h.ws.Path)
	require.NoError(t, err)
	commit, err := repo.Snapshot(bg)
	require.NoError(t, err)
	ck := store.Checkpoint{ID: uuid.NewString(), WorkspaceID: h.ws.ID, SessionID: sid, RunID: uuid.NewString(), Commit: commit, CreatedAt: time.Now()}
	change()
	if ended {
		ck.End, err = repo.Snapshot(bg, commit)
		require.NoError(t, err)
	}
	require.NoError(t, h.db.PutCheckpoint(bg, ck))
	return ck
}

func code(err error) string { return apierr.ErrorCode(err) }

// The rewind's decisions on fakes: a hand edit after the run's end is a
// conflict until forced; files the checkpoint did not look at are kept;
// a plan that cannot be carried out changes nothing.
func TestRewindDecisions(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{".gitignore": ".env\n", ".env": "S=1\n", "a.txt": "a\n"})
	ck := checkpointRun(t, h, sid, func() {
		write(t, h.ws.Path, ".gitignore", "dist/\n")
		write(t, h.ws.Path, "a.txt", "A by the run\n")
		write(t, h.ws.Path, "new.txt", "new\n")
	}, true)

	d, err := h.c.CheckpointDiff(bg, h.ws.ID, sid, ck.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{".env"}, d.Kept)
	assert.Len(t, d.Files, 3)

	write(t, h.ws.Path, "a.txt", "a hand edit\n")
	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	require.Error(t, err)
	assert.Equal(t, proto.CodeRewindConflict, code(err))
	assert.Contains(t, err.Error(), "a.txt")

	res, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID, Force: true})
	require.NoError(t, err)
	assert.Equal(t, []string{".env"}, res.Kept)
	got, _ := os.ReadFile(filepath.Join(h.ws.Path, ".env"))
	assert.Equal(t, "S=1\n", string(got), "never recorded, so never removed")
	assert.NoFileExists(t, filepath.Join(h.ws.Path, "new.txt"))

	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{})
	assert.Equal(t, proto.CodeInvalidArgument, code(err))
	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: "nope"})
	assert.Equal(t, proto.CodeCheckpointNotFound, code(err))
}

// A run whose end was never recorded makes every change since it started
// a conflict: who made it is unknown. (Item 6b, the check's side.)
func TestRewindConflictWhenTheEndIsUnknown(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"a.txt": "a\n"})
	ck := checkpointRun(t, h, sid, func() { write(t, h.ws.Path, "a.txt", "A\n") }, false)
	_, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	require.Error(t, err)
	assert.Equal(t, proto.CodeRewindConflict, code(err))
	assert.Contains(t, err.Error(), "never recorded its end")
	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID, Force: true})
	require.NoError(t, err)
}

// A rewind that would go through a symlink changes nothing and says so.
// (Item 7.)
func TestRewindBlockedChangesNothing(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"a.txt": "a\n", "build/out.txt": "o\n"})
	outside := t.TempDir()
	ck := checkpointRun(t, h, sid, func() {
		write(t, h.ws.Path, "a.txt", "A\n")
		write(t, h.ws.Path, ".gitignore", "build\n")
	}, true)
	require.NoError(t, os.RemoveAll(filepath.Join(h.ws.Path, "build")))
	require.NoError(t, os.Symlink(outside, filepath.Join(h.ws.Path, "build")))
	_, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID, Force: true})
	require.Error(t, err)
	assert.Equal(t, proto.CodeRewindConflict, code(err))
	assert.Contains(t, err.Error(), "nothing was changed")
	got, _ := os.ReadFile(filepath.Join(h.ws.Path, "a.txt"))
	assert.Equal(t, "A\n", string(got))
}

// A run lost in a crash after its checkpoint has its end recorded by
// recovery, before its run.completed: a later hand edit is then a
// conflict. (Item 6b.)
func TestRecoverRecordsTheEndOfALostCheckpointedRun(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"a.txt": "a\n"})
	acc := h.accept(sid, "running")
	h.began(acc.RunID)
	repo, err := h.checkpoints.Repo(h.ws.ID, h.ws.Path)
	require.NoError(t, err)
	commit, err := repo.Snapshot(bg)
	require.NoError(t, err)
	ck := store.Checkpoint{ID: uuid.NewString(), WorkspaceID: h.ws.ID, SessionID: sid, RunID: acc.RunID, Commit: commit, CreatedAt: time.Now()}
	require.NoError(t, h.db.PutCheckpoint(bg, ck))
	write(t, h.ws.Path, "a.txt", "A by the run\n")
	h.restart(true)
	requireEnded(t, h, proto.OutcomeInterrupted, acc.RunID)
	list, err := h.db.ListCheckpoints(bg, sid)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotEmpty(t, list[0].End, "recovery records the lost run's end")

	write(t, h.ws.Path, "a.txt", "a hand edit\n")
	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	require.Error(t, err)
	assert.Equal(t, proto.CodeRewindConflict, code(err))
	assert.Contains(t, err.Error(), "not by it")
}

// What no checkpoint reaches is collected at start; a store whose
// workspace is gone is dropped. (Item 8.)
func TestCollectCheckpointsAtStart(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"log.txt": "0\n"})
	ck := checkpointRun(t, h, sid, func() { write(t, h.ws.Path, "log.txt", "1\n") }, true)
	repo, err := h.checkpoints.Repo(h.ws.ID, h.ws.Path)
	require.NoError(t, err)
	for _, s := range []string{"2\n", "3\n"} {
		write(t, h.ws.Path, "log.txt", s)
		_, err := repo.Snapshot(bg)
		require.NoError(t, err)
	}
	count := func() int { return objectCount(h) }
	before := count()
	h.checkpoints = checkpoint.NewManager(h.checkpointsDir) // as after a restart: nothing is fresh
	h.restart(false)
	assert.Less(t, count(), before, "unreached objects collected")
	_, err = h.c.CheckpointDiff(bg, h.ws.ID, sid, ck.ID)
	require.NoError(t, err, "a live checkpoint keeps its files")
}

// objectCount counts the loose objects of the harness's workspace's store.
func objectCount(h *harness) int {
	n := 0
	_ = filepath.WalkDir(filepath.Join(h.checkpointsDir, h.ws.ID+".git", "objects"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && len(d.Name()) == 38 {
			n++
		}
		return nil
	})
	return n
}

// A deleted session's checkpoints take the files only they held with
// them; another session's stay. (Item 8.)
func TestDeletingASessionCollectsItsCheckpoints(t *testing.T) {
	h, gone := rewindHarness(t, map[string]string{"log.txt": "0\n", "same.txt": "same\n"})
	checkpointRun(t, h, gone, func() { write(t, h.ws.Path, "log.txt", "only the deleted session's\n") }, true)
	kept := h.session()
	write(t, h.ws.Path, "log.txt", "the other's\n")
	ck := checkpointRun(t, h, kept, func() {}, true)
	h.checkpoints = checkpoint.NewManager(h.checkpointsDir) // nothing fresh, as after a restart
	h.stop()
	h.start()
	before := objectCount(h)
	require.NoError(t, h.sessions.Delete(bg, h.ws.ID, gone))
	assert.Less(t, objectCount(h), before, "the deleted session's objects are collected")
	d, err := h.c.CheckpointDiff(bg, h.ws.ID, kept, ck.ID)
	require.NoError(t, err, "another session's checkpoint keeps its files")
	assert.Empty(t, d.Files)
}

// A rewind while the session has a run active, queued, or parked on an
// answer (suspended, not in memory) is refused: the run would go on from
// a history the rewind took away. Nothing changes. (The busy decision.)
func TestRewindRefusedWhileBusy(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"a.txt": "a\n"})
	ck := checkpointRun(t, h, sid, func() { write(t, h.ws.Path, "a.txt", "A\n") }, true)
	acc := h.accept(sid, "running")
	h.began(acc.RunID)
	h.accept(sid, "queued")
	_, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	assert.Equal(t, proto.CodeSessionBusy, code(err), "%v", err)
	require.NoError(t, h.settle(sid))

	h.db.mu.Lock()
	h.db.pending = append(h.db.pending, store.Pending{RequestID: "req-1", WorkspaceID: h.ws.ID, SessionID: sid, RunID: acc.RunID})
	h.db.mu.Unlock()
	_, err = h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	assert.Equal(t, proto.CodeSessionBusy, code(err), "%v", err)
	assert.Contains(t, err.Error(), "req-1")
	got, _ := os.ReadFile(filepath.Join(h.ws.Path, "a.txt"))
	assert.Equal(t, "A\n", string(got), "a refused rewind changes nothing")

	h.db.mu.Lock()
	h.db.pending = nil
	h.db.mu.Unlock()
	res, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: ck.ID})
	require.NoError(t, err)
	assert.Equal(t, []proto.FileChange{{Path: "a.txt", Change: proto.ChangeModified}}, res.Files)
}

// A run's first file-changing tool call takes its checkpoint (once), and
// its end records the files as it left them, before its run.completed; a
// run that never called one has none.
func TestRunTakesItsCheckpointAndRecordsItsEnd(t *testing.T) {
	h, sid := rewindHarness(t, map[string]string{"a.txt": "a\n"})
	acc := h.accept(sid, "running")
	h.began(acc.RunID)
	h.tools.mu.Lock()
	rc := h.tools.configs[acc.RunID]
	h.tools.mu.Unlock()
	require.NotNil(t, rc.BeforeChange, "a server keeping checkpoints hooks the tool calls")
	rc.BeforeChange(bg)
	rc.BeforeChange(bg) // the run's next call: no second checkpoint
	write(t, h.ws.Path, "a.txt", "A by the run\n")
	require.NoError(t, h.settle(sid))

	list, err := h.c.Checkpoints(bg, h.ws.ID, sid)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, acc.RunID, list[0].RunID)
	stored, err := h.db.ListCheckpoints(bg, sid)
	require.NoError(t, err)
	require.NotEmpty(t, stored[0].End, "the run's end is recorded")
	d, err := h.c.CheckpointDiff(bg, h.ws.ID, sid, list[0].ID)
	require.NoError(t, err)
	assert.Equal(t, []proto.FileChange{{Path: "a.txt", Change: proto.ChangeModified}}, d.Files)
	assert.Contains(t, d.Diff, "+A by the run")

	// Unforced: the files are as the run left them.
	res, err := h.c.Rewind(bg, h.ws.ID, sid, proto.RewindRequest{CheckpointID: list[0].ID})
	require.NoError(t, err)
	assert.Equal(t, d.Files, res.Files)
	got, _ := os.ReadFile(filepath.Join(h.ws.Path, "a.txt"))
	assert.Equal(t, "a\n", string(got))

	other := h.accept(sid, "running")
	h.began(other.RunID)
	require.NoError(t, h.settle(sid))
	list, err = h.c.Checkpoints(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Len(t, list, 1, "a run that changed nothing has no checkpoint")
}
