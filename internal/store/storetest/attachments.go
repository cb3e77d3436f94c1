package storetest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

func accepted(ws, sid, runID string, seq int64, a *store.Attachments) store.Event {
	e := ev(ws, sid, seq, true)
	e.RunID, e.Type, e.Attachments = runID, proto.EventRunAccepted, a
	return e
}

// A run's attachments are kept with its run.accepted (and its steered
// prompts'), exactly, in order, across a restart, until its run.completed
// deletes them; other runs' stay.
func testRunAttachmentsLiveUntilTheRunCompletes(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	none, err := s.RunAttachments(bg, "r1")
	require.NoError(t, err)
	assert.Empty(t, none)

	big := bytes.Repeat([]byte{0, 1, 2, 0xff}, 3<<20/4) // binary, 3 MiB
	require.NoError(t, s.AppendEvents(bg, []store.Event{
		accepted("w", "s", "r1", 1, &store.Attachments{Data: big}),
		accepted("w", "s", "r2", 2, &store.Attachments{Data: []byte("r2's")}),
	}))
	require.NoError(t, s.AppendEvent(bg, accepted("w", "s", "r1", 3, &store.Attachments{MessageID: "m-steered", Data: []byte{}})))
	require.NoError(t, s.AppendEvent(bg, accepted("w", "s", "r3", 4, nil)))

	s = h.Reopen(t, s)
	got, err := s.RunAttachments(bg, "r1")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Empty(t, got[0].MessageID)
	assert.True(t, bytes.Equal(big, got[0].Data), "kept byte for byte")
	assert.Equal(t, "m-steered", got[1].MessageID)
	assert.Empty(t, got[1].Data)
	got, err = s.RunAttachments(bg, "r3")
	require.NoError(t, err)
	assert.Empty(t, got, "a prompt without attachments keeps none")

	done := ev("w", "s", 5, true)
	done.RunID, done.Type = "r1", proto.EventRunCompleted
	require.NoError(t, s.AppendEvent(bg, done))
	got, err = s.RunAttachments(bg, "r1")
	require.NoError(t, err)
	assert.Empty(t, got, "run.completed deletes them")
	got, err = s.RunAttachments(bg, "r2")
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "r2's", string(got[0].Data))
}

// Attachments are written all or none with their event: a run.accepted
// that fails (its seq taken) leaves none behind.
func testRunAttachmentsAllOrNoneWithTheirEvent(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 1, true)))
	err := s.AppendEvent(bg, accepted("w", "s", "r1", 1, &store.Attachments{Data: []byte("lost")}))
	require.ErrorIs(t, err, store.ErrExists)
	got, err := s.RunAttachments(bg, "r1")
	require.NoError(t, err)
	assert.Empty(t, got)
}

// Deleting a session deletes its runs' attachments.
func testRunAttachmentsGoWithTheirSession(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	mustSession(t, s, "w", "other", t0)
	require.NoError(t, s.AppendEvents(bg, []store.Event{
		accepted("w", "s", "r1", 1, &store.Attachments{Data: []byte("a")}),
		accepted("w", "other", "r2", 2, &store.Attachments{Data: []byte("b")}),
	}))
	require.NoError(t, s.DeleteSession(bg, "w", "s"))
	got, err := s.RunAttachments(bg, "r1")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = s.RunAttachments(bg, "r2")
	require.NoError(t, err)
	assert.Len(t, got, 1, "another session's stay")
}
