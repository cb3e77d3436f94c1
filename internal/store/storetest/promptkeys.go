package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

func keyed(ws, sid, runID string, seq int64, key string, at time.Time) store.Event {
	e := accepted(ws, sid, runID, seq, nil)
	e.PromptKey = &store.PromptKey{Key: key, At: at}
	return e
}

// A prompt's idempotency key names its run in its session, across a
// restart, for PromptKeyTTL: written with its run.accepted (all or none),
// never seen from another session, replaced when reused past its time, and
// gone with its session.
func testPromptKeys(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	mustSession(t, s, "w", "other", t0)
	_, err := s.PromptByKey(bg, "s", "k1", t0.Add(-time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, s.AppendEvents(bg, []store.Event{keyed("w", "s", "r1", 1, "k1", t0), accepted("w", "s", "r2", 2, nil)}))
	// A failed accept (its seq taken) keeps no key.
	require.ErrorIs(t, s.AppendEvent(bg, keyed("w", "s", "r3", 2, "k3", t0)), store.ErrExists)

	s = h.Reopen(t, s)
	got, err := s.PromptByKey(bg, "s", "k1", t0.Add(-store.PromptKeyTTL))
	require.NoError(t, err)
	assert.Equal(t, "r1", got)
	_, err = s.PromptByKey(bg, "s", "k1", t0.Add(time.Millisecond))
	require.ErrorIs(t, err, store.ErrNotFound, "accepted before since")
	_, err = s.PromptByKey(bg, "other", "k1", t0.Add(-time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "a key is its session's")
	_, err = s.PromptByKey(bg, "s", "k3", t0.Add(-time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "no key without its event")

	// Reused a day later: the key names the new run.
	later := t0.Add(store.PromptKeyTTL + time.Minute)
	require.NoError(t, s.AppendEvent(bg, keyed("w", "s", "r4", 3, "k1", later)))
	got, err = s.PromptByKey(bg, "s", "k1", later.Add(-store.PromptKeyTTL))
	require.NoError(t, err)
	assert.Equal(t, "r4", got)

	require.NoError(t, s.DeleteSession(bg, "w", "s"))
	_, err = s.PromptByKey(bg, "s", "k1", t0.Add(-time.Hour))
	require.ErrorIs(t, err, store.ErrNotFound, "gone with its session")
}
