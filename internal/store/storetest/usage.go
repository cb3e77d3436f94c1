package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// A run's usage is added to its session with the event that carries it, or
// not at all when that event cannot be written; the cost stays unknown
// until a run has one, then sums the known ones; a context size of 0
// keeps the last one; an update of the session's settings never touches
// the totals; they survive a restart.
func testSessionUsageAddsUpWithItsEvents(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	orig := mustSession(t, s, "w", "s", t0)
	mustSession(t, s, "w", "other", t0)
	require.NoError(t, s.AppendEvent(bg, ev("w", "s", 1, true)))

	withUsage := func(sid string, seq int64, u proto.Usage, context int64) store.Event {
		e := ev("w", sid, seq, true)
		e.Usage = &store.SessionUsage{Add: u, ContextTokens: context}
		return e
	}
	cost := func(v float64) *float64 { return &v }

	got, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{}, got.Usage)
	require.Zero(t, got.ContextTokens)

	// Refused with its event (seq 1 is taken): nothing is added.
	require.ErrorIs(t, s.AppendEvents(bg, []store.Event{withUsage("s", 1, proto.Usage{InputTokens: 5}, 9)}), store.ErrExists)
	got, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{}, got.Usage)
	require.Zero(t, got.ContextTokens)

	// No price known: the counts add up, the cost stays absent.
	require.NoError(t, s.AppendEvents(bg, []store.Event{withUsage("s", 2, proto.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5}, 120)}))
	got, err = s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, proto.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5}, got.Usage)
	require.EqualValues(t, 120, got.ContextTokens)

	// Priced runs add their costs; a context of 0 keeps the last one; one
	// session's usage is not another's.
	require.NoError(t, s.AppendEvents(bg, []store.Event{
		withUsage("s", 3, proto.Usage{InputTokens: 1, CostUSD: cost(0.25)}, 0),
		withUsage("other", 4, proto.Usage{InputTokens: 1000, CostUSD: cost(9)}, 7),
		withUsage("s", 5, proto.Usage{OutputTokens: 2, CostUSD: cost(0.5)}, 0),
		withUsage("s", 6, proto.Usage{OutputTokens: 3}, 0),
	}))
	// Settings changes write the record but not the totals.
	changed := orig
	changed.Title, changed.UpdatedAt = "renamed", at(time.Hour)
	require.NoError(t, s.UpdateSession(bg, changed))
	e7 := ev("w", "s", 7, true)
	e7.Session = &changed
	require.NoError(t, s.AppendEvents(bg, []store.Event{e7}))

	want := proto.Usage{InputTokens: 101, OutputTokens: 25, CacheReadTokens: 40, CacheWriteTokens: 10, ReasoningTokens: 5, CostUSD: cost(0.75)}
	check := func(s store.Store) {
		t.Helper()
		got, err := s.GetSession(bg, "w", "s")
		require.NoError(t, err)
		require.Equal(t, want, got.Usage)
		require.EqualValues(t, 120, got.ContextTokens)
		require.Equal(t, "renamed", got.Title)
		list, err := s.ListSessions(bg, "w")
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, got, list[0])
		require.Equal(t, proto.Usage{InputTokens: 1000, CostUSD: cost(9)}, list[1].Usage)
		require.EqualValues(t, 7, list[1].ContextTokens)
	}
	check(s)
	check(h.Reopen(t, s))
}

// A message's usage and a compaction's summary part come back as they
// were put, whether put alone or carried by an event.
func testMessageUsageAndSummaryRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	cost := 0.0125
	asst := msg("a", "s", "answer")
	asst.Usage = &proto.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 1000, CacheWriteTokens: 3, ReasoningTokens: 9, CostUSD: &cost}
	require.NoError(t, s.PutMessage(bg, asst))
	sum := proto.Message{
		ID: "sum", SessionID: "s", RunID: "r2", Role: proto.RoleAssistant, Model: "m",
		Parts:     []proto.Part{{Type: proto.PartSummary, Text: "what was said", ThroughMessageID: "a"}},
		Usage:     &proto.Usage{InputTokens: 1300, OutputTokens: 40},
		CreatedAt: proto.Time{Time: at(time.Second)}, UpdatedAt: proto.Time{Time: at(time.Second)},
	}
	e := ev("w", "s", 1, true)
	e.Message = &sum
	require.NoError(t, s.AppendEvents(bg, []store.Event{e}))
	check := func(s store.Store) {
		t.Helper()
		ms, err := s.ListMessages(bg, "s")
		require.NoError(t, err)
		require.Equal(t, []proto.Message{asst, sum}, ms)
	}
	check(s)
	check(h.Reopen(t, s))
}
