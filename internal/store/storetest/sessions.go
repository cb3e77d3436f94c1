package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

func testSessions(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustWorkspace(t, s, "v")

	s1 := mustSession(t, s, "w", "s1", at(1*time.Minute))
	s2 := mustSession(t, s, "w", "s2", at(3*time.Minute))
	mustSession(t, s, "w", "s3", at(2*time.Minute))
	// Ties on updated_at: newer created_at first, then id.
	s4 := store.Session{ID: "s4", WorkspaceID: "w", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Minute)}
	require.NoError(t, s.CreateSession(bg, s4))
	s5 := store.Session{ID: "s5", WorkspaceID: "w", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Minute)}
	require.NoError(t, s.CreateSession(bg, s5))
	mustSession(t, s, "v", "other", at(time.Hour))

	err := s.CreateSession(bg, s1)
	require.ErrorIs(t, err, store.ErrExists)
	err = s.CreateSession(bg, store.Session{ID: "other", WorkspaceID: "w", CreatedAt: t0, UpdatedAt: t0})
	require.ErrorIs(t, err, store.ErrExists, "ids are unique across workspaces")
	err = s.CreateSession(bg, store.Session{ID: "x", WorkspaceID: "missing", CreatedAt: t0, UpdatedAt: t0})
	require.ErrorIs(t, err, store.ErrNotFound)

	got, err := s.GetSession(bg, "w", "s1")
	require.NoError(t, err)
	require.Equal(t, s1, got)
	require.Nil(t, s4.Config)
	got, err = s.GetSession(bg, "w", "s4")
	require.NoError(t, err)
	require.Nil(t, got.Config, "empty config stays empty")

	_, err = s.GetSession(bg, "w", "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetSession(bg, "v", "s1")
	require.ErrorIs(t, err, store.ErrNotFound, "sessions are scoped to their workspace")

	list, err := s.ListSessions(bg, "w")
	require.NoError(t, err)
	ids := []string{}
	for _, sess := range list {
		ids = append(ids, sess.ID)
	}
	require.Equal(t, []string{"s2", "s4", "s5", "s3", "s1"}, ids)
	require.Equal(t, s2, list[0])

	// Update moves s1 to the front and changes its fields, not created_at.
	s1.Title, s1.Model, s1.ReasoningEffort = "renamed", "m2", "low"
	s1.Config = json.RawMessage(`{"x":1}`)
	s1.UpdatedAt = at(time.Hour)
	s1.CreatedAt = at(time.Hour) // ignored
	require.NoError(t, s.UpdateSession(bg, s1))
	got, err = s.GetSession(bg, "w", "s1")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Title)
	require.Equal(t, "m2", got.Model)
	require.Equal(t, "low", got.ReasoningEffort)
	require.JSONEq(t, `{"x":1}`, string(got.Config))
	require.Equal(t, at(time.Hour), got.UpdatedAt)
	require.Equal(t, t0, got.CreatedAt)
	list, err = s.ListSessions(bg, "w")
	require.NoError(t, err)
	require.Equal(t, "s1", list[0].ID)

	err = s.UpdateSession(bg, store.Session{ID: "nope", WorkspaceID: "w"})
	require.ErrorIs(t, err, store.ErrNotFound)

	// Clearing the config stores it empty again.
	s1.Config = nil
	require.NoError(t, s.UpdateSession(bg, s1))
	got, err = s.GetSession(bg, "w", "s1")
	require.NoError(t, err)
	require.Nil(t, got.Config)
}

// An update naming another workspace changes nothing.
func testUpdateSessionScopedToWorkspace(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustWorkspace(t, s, "v")
	orig := mustSession(t, s, "w", "s", t0)
	changed := orig
	changed.WorkspaceID, changed.Title = "v", "hijacked"
	require.ErrorIs(t, s.UpdateSession(bg, changed), store.ErrNotFound)
	got, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, orig, got)
}

func testTouchSessionOnlyMovesForward(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "old", at(1*time.Minute))
	mustSession(t, s, "w", "new", at(2*time.Minute))

	require.NoError(t, s.TouchSession(bg, "old", at(3*time.Minute)))
	list, err := s.ListSessions(bg, "w")
	require.NoError(t, err)
	require.Equal(t, "old", list[0].ID, "touched session comes first")
	require.Equal(t, at(3*time.Minute), list[0].UpdatedAt)

	require.NoError(t, s.TouchSession(bg, "old", at(0)))
	got, err := s.GetSession(bg, "w", "old")
	require.NoError(t, err)
	require.Equal(t, at(3*time.Minute), got.UpdatedAt, "never lowered")

	require.ErrorIs(t, s.TouchSession(bg, "missing", at(0)), store.ErrNotFound)
}

func testMessages(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)

	m1, m2, m3 := msg("m1", "s", "one"), msg("m2", "s", "two"), msg("m3", "s", "three")
	for _, m := range []proto.Message{m1, m2, m3, msg("x", "other", "x")} {
		require.NoError(t, s.PutMessage(bg, m))
	}

	// Replacing m1 keeps it first.
	m1.Parts = append(m1.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishEndTurn})
	m1.UpdatedAt = proto.Time{Time: at(time.Minute)}
	require.NoError(t, s.PutMessage(bg, m1))

	got, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m1, m2, m3}, got)

	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, sess.MessageCount)
	list, err := s.ListSessions(bg, "w")
	require.NoError(t, err)
	require.Equal(t, 3, list[0].MessageCount)

	bad := msg("bad", "s", "")
	bad.Parts = []proto.Part{{Type: "bogus"}}
	require.ErrorContains(t, s.PutMessage(bg, bad), "put message bad")
	require.Equal(t, []string{"m1", "m2", "m3"}, messageIDs(t, s, "s"))
}

// A message stays in the session it was first put in, which is what keeps
// the sessions' message counts exact.
func testMessageKeepsItsFirstSession(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "a", t0)
	mustSession(t, s, "w", "b", t0)
	m := msg("m", "a", "first")
	require.NoError(t, s.PutMessage(bg, m))
	moved := msg("m", "b", "second")
	require.NoError(t, s.PutMessage(bg, moved))
	require.Empty(t, messageIDs(t, s, "b"))
	got, err := s.ListMessages(bg, "a")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "second", got[0].Parts[0].Text, "the data is replaced")
	for sid, n := range map[string]int{"a": 1, "b": 0} {
		sess, err := s.GetSession(bg, "w", sid)
		require.NoError(t, err)
		require.Equal(t, n, sess.MessageCount, sid)
	}
}
