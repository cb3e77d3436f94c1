package storetest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// The workspace log: seqs unique per workspace, ranges and limits, the
// session history holding only InHistory events.
func testEvents(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustWorkspace(t, s, "v")

	maxSeq, err := s.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.Zero(t, maxSeq)

	for seq := int64(1); seq <= 10; seq++ {
		sid := "s1"
		switch {
		case seq%3 == 0:
			sid = "" // workspace-level
		case seq%2 == 0:
			sid = "s2"
		}
		require.NoError(t, s.AppendEvent(bg, ev("w", sid, seq, seq != 5)))
	}
	require.NoError(t, s.AppendEvent(bg, ev("v", "sv", 1, true)), "seqs are per workspace")
	require.NoError(t, s.AppendEvent(bg, ev("v", "sv", 100, true)))

	err = s.AppendEvent(bg, ev("w", "s1", 4, true))
	require.ErrorIs(t, err, store.ErrExists)
	require.ErrorContains(t, err, "append event w/4")
	err = s.AppendEvents(bg, []store.Event{ev("w", "s1", 11, true), ev("w", "s1", 11, true)})
	require.ErrorIs(t, err, store.ErrExists, "a seq twice in one call")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, allSeqs(t, s, "w"))

	all, err := s.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seqs(all))
	require.Equal(t, ev("w", "s1", 1, true), all[0])
	require.Equal(t, ev("w", "s1", 5, false), all[4])
	require.Equal(t, ev("w", "", 3, true), all[2])

	got, err := s.WorkspaceEvents(bg, "w", 3, 7, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6, 7}, seqs(got))
	got, err = s.WorkspaceEvents(bg, "w", 3, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, seqs(got))
	got, err = s.WorkspaceEvents(bg, "w", 3, -1, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6, 7, 8, 9, 10}, seqs(got))
	got, err = s.WorkspaceEvents(bg, "w", 3, 7, -3)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5, 6, 7}, seqs(got), "a negative limit is no limit")
	got, err = s.WorkspaceEvents(bg, "w", 10, 0, 0)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = s.WorkspaceEvents(bg, "w", 7, 3, 0)
	require.NoError(t, err)
	require.Empty(t, got, "an empty range")
	got, err = s.WorkspaceEvents(bg, "v", 1, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{100}, seqs(got), "gaps are skipped")

	// Paging through the log, as the hub's backlog does, meets every event once.
	var paged []int64
	for after := int64(0); ; {
		page, err := s.WorkspaceEvents(bg, "w", after, 9, 4)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, seqs(page)...)
		after = page[len(page)-1].Seq
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, paged)

	// s1 holds 1, 5, 7; 5 is not in history.
	got, err = s.SessionEvents(bg, "s1", 0, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 7}, seqs(got))
	got, err = s.SessionEvents(bg, "s2", 2, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(got))
	got, err = s.SessionEvents(bg, "s2", 0, -5)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4, 8, 10}, seqs(got))
	got, err = s.SessionEvents(bg, "s2", 10, 0)
	require.NoError(t, err)
	require.Empty(t, got)

	maxSeq, err = s.MaxSeq(bg, "w")
	require.NoError(t, err)
	require.EqualValues(t, 10, maxSeq)
	maxSeq, err = s.MaxSeq(bg, "v")
	require.NoError(t, err)
	require.EqualValues(t, 100, maxSeq)
}

func testEventEmptyEnvelope(t *testing.T, h Harness) {
	s := h.Open(t)
	require.NoError(t, s.AppendEvent(bg, store.Event{WorkspaceID: "w", Seq: 1, Type: "t"}))
	got, err := s.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, got[0].Envelope)
}

// The envelope is what the stream sent: any bytes come back as they went
// in, however large.
func testEventEnvelopeBytesExact(t *testing.T, h Harness) {
	s := h.Open(t)
	odd := []byte("{\"data\":\"\\u0000 é \x00 \xff\"}\n")
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	require.NoError(t, s.AppendEvents(bg, []store.Event{
		{WorkspaceID: "w", Seq: 1, Type: "t", Envelope: odd},
		{WorkspaceID: "w", Seq: 2, Type: "t", Envelope: big},
	}))
	got, err := s.WorkspaceEvents(bg, "w", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, odd, got[0].Envelope)
	require.Equal(t, big, got[1].Envelope)
}

func testAppendEventsEmpty(t *testing.T, h Harness) {
	s := h.Open(t)
	require.NoError(t, s.AppendEvents(bg, nil))
	require.NoError(t, s.AppendEvents(bg, []store.Event{}))
	require.Empty(t, allSeqs(t, s, "w"))
}

// Events appended together, with the messages and the touch they carry, are
// written all or none: one bad event leaves no trace of the others.
func testAppendEventsAllOrNone(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 2, true)))

	withMessage := func(seq int64, m proto.Message) store.Event {
		e := ev("w", "s", seq, true)
		e.Message = &m
		e.Touch = at(time.Hour)
		return e
	}
	m1, m2 := msg("m1", "s", "one"), msg("m2", "s", "two")
	err := s.AppendEvents(bg, []store.Event{withMessage(1, m1), withMessage(2, m2)})
	require.ErrorIs(t, err, store.ErrExists, "seq 2 is taken")
	msgs, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Equal(t, []int64{2}, allSeqs(t, s, "w"))
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, t0, sess.UpdatedAt)
	require.Zero(t, sess.MessageCount)

	m1.Parts = m1.Parts[:1]
	require.NoError(t, s.AppendEvents(bg, []store.Event{withMessage(3, m1), withMessage(4, m2)}))
	msgs, err = s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m1, m2}, msgs)
	require.Equal(t, []int64{2, 3, 4}, allSeqs(t, s, "w"))
	sess, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, at(time.Hour), sess.UpdatedAt)
	require.Equal(t, 2, sess.MessageCount)

	// A touch with the events never lowers updated_at either.
	e := ev("w", "s", 5, true)
	e.Touch = at(time.Minute)
	require.NoError(t, s.AppendEvents(bg, []store.Event{e}))
	sess, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, at(time.Hour), sess.UpdatedAt)
}

// An event that carries a session record writes it with the event, or
// neither when the event cannot be written.
func testAppendEventsWritesTheSessionItAnnounces(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	orig := mustSession(t, s, "w", "s", t0)
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 1, true)))

	changed := orig
	changed.Title, changed.Model, changed.UpdatedAt = "renamed", "openai/gpt-4.1", at(time.Hour)
	dup := ev("w", "s", 1, true)
	dup.Session = &changed
	require.ErrorIs(t, s.AppendEvents(bg, []store.Event{dup}), store.ErrExists)
	got, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, "title s", got.Title, "no event, no change")

	e := ev("w", "s", 2, true)
	e.Session = &changed
	require.NoError(t, s.AppendEvents(bg, []store.Event{e}))
	got, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Title)
	require.Equal(t, "openai/gpt-4.1", got.Model)
	require.Equal(t, at(time.Hour), got.UpdatedAt)
	require.Equal(t, []int64{1, 2}, allSeqs(t, s, "w"))
}

// A message put several times in one AppendEvents ends with its last
// version, in the place its first put gave it.
func testAppendEventsKeepsLastVersionFirstPlace(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	withMessage := func(seq int64, m proto.Message) store.Event {
		e := ev("w", "s", seq, true)
		e.Message = &m
		return e
	}
	u, a1, b := msg("u", "s", "question"), msg("a", "s", ""), msg("b", "s", "aside")
	a2 := msg("a", "s", "answer")
	require.NoError(t, s.AppendEvents(bg, []store.Event{withMessage(1, u), withMessage(2, a1), withMessage(3, b), withMessage(4, a2)}))
	msgs, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{u, a2, b}, msgs)
	require.Equal(t, []int64{1, 2, 3, 4}, allSeqs(t, s, "w"), "every event is kept")
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, 3, sess.MessageCount)
}

// MessageJSON, when given, is the message as stored: the store does not
// encode it again.
func testAppendEventsUsesMessageJSON(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	m := msg("m", "s", "as given")
	data, err := json.Marshal(m)
	require.NoError(t, err)
	e := ev("w", "s", 1, true)
	stale := msg("m", "s", "not encoded again")
	e.Message, e.MessageJSON = &stale, data
	require.NoError(t, s.AppendEvents(bg, []store.Event{e}))
	got, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Equal(t, []proto.Message{m}, got)
}
