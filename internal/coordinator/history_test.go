package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/proto"
)

// idleWith makes an idle session whose history holds a message of n bytes.
func idleWith(t *testing.T, i, n int) *sessionRuns {
	h := &agent.History{}
	m := proto.Message{ID: fmt.Sprint("m", i), Role: proto.RoleUser, Parts: []proto.Part{{Type: proto.PartText, Text: strings.Repeat("x", n)}}}
	require.NoError(t, h.Record(m, func(proto.Message) error { return nil }))
	return &sessionRuns{id: fmt.Sprint("s", i), history: h}
}

func kept(srs []*sessionRuns) (n int, bytes int64) {
	for _, sr := range srs {
		if sr.history != nil {
			n++
			bytes += sr.history.Size()
		}
	}
	return n, bytes
}

// TestIdleHistoriesEvictAtTheirBounds: idle sessions keep their histories
// up to a number and up to a size in all, the least recently idle dropped
// first; a history that grew with more runs counts at its new size.
func TestIdleHistoriesEvictAtTheirBounds(t *testing.T) {
	var h histories
	var small []*sessionRuns
	for i := range maxIdleHistories + 50 {
		sr := idleWith(t, i, 100)
		small = append(small, sr)
		h.went(sr)
	}
	n, _ := kept(small)
	require.Equal(t, maxIdleHistories, n)
	require.Nil(t, small[0].history, "the least recently idle kept its history")
	require.NotNil(t, small[len(small)-1].history)

	var big []*sessionRuns
	for i := range 20 {
		sr := idleWith(t, 1000+i, maxIdleHistoryBytes/8)
		big = append(big, sr)
		h.went(sr)
		_, bytes := kept(append(slices.Clone(small), big...))
		require.LessOrEqual(t, bytes, int64(maxIdleHistoryBytes), "after %d large histories", i+1)
	}
	n, _ = kept(big)
	require.Equal(t, 7, n, "large histories kept")
	require.NotNil(t, big[len(big)-1].history)

	// A session that ran again goes idle with its history's new size.
	last := big[len(big)-1]
	require.NoError(t, last.history.Record(proto.Message{ID: "more", Role: proto.RoleAssistant,
		Parts: []proto.Part{{Type: proto.PartText, Text: strings.Repeat("y", maxIdleHistoryBytes/2)}}},
		func(proto.Message) error { return nil }))
	h.went(last)
	_, bytes := kept(append(slices.Clone(small), big...))
	require.LessOrEqual(t, bytes, int64(maxIdleHistoryBytes))
	require.NotNil(t, last.history)
	h.mu.Lock()
	defer h.mu.Unlock()
	var sum int64
	for _, e := range h.idle {
		sum += e.size
	}
	require.Equal(t, sum, h.bytes)
}

// TestSweepDropsHistoriesIdleSinceThePreviousSweep: a sweep drops the
// histories of the sessions that were already idle at the sweep before and
// have not run since; one that ran in between, or is running, keeps its.
func TestSweepDropsHistoriesIdleSinceThePreviousSweep(t *testing.T) {
	var h histories
	quiet, ranAgain, busy := idleWith(t, 1, 100), idleWith(t, 2, 100), idleWith(t, 3, 100)
	for _, sr := range []*sessionRuns{quiet, ranAgain, busy} {
		h.went(sr)
	}
	h.sweep()
	n, _ := kept([]*sessionRuns{quiet, ranAgain, busy})
	require.Equal(t, 3, n, "a first sweep only notes who is idle")

	h.went(ranAgain) // it ran, and went idle again
	busy.idle = make(chan struct{})
	late := idleWith(t, 4, 100)
	h.went(late) // idle since the first sweep only
	h.sweep()
	require.Nil(t, quiet.history, "idle across two sweeps")
	require.NotNil(t, ranAgain.history)
	require.NotNil(t, busy.history, "a running session keeps its history")
	require.NotNil(t, late.history)

	busy.idle = nil
	h.went(busy)
	h.sweep()
	h.sweep()
	n, _ = kept([]*sessionRuns{quiet, ranAgain, busy, late})
	require.Zero(t, n, "once the load is gone, every history goes")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.idle)
	require.Zero(t, h.bytes)
}

// TestSweepDropsSessionsWithNothingInMemory: once a session's history is
// swept, its state machine leaves the coordinator's map too, so the map
// does not keep every session ever prompted; busy sessions and sessions
// being deleted stay.
func TestSweepDropsSessionsWithNothingInMemory(t *testing.T) {
	c := New(Config{})
	quiet, busy, deleting := idleWith(t, 1, 100), idleWith(t, 2, 100), idleWith(t, 3, 100)
	for _, sr := range []*sessionRuns{quiet, busy, deleting} {
		c.sessions[sr.id] = sr
		c.hist.went(sr)
	}
	busy.idle = make(chan struct{})
	deleting.deleting = 1
	c.SweepIdle()
	require.Len(t, c.sessions, 3, "a first sweep only notes who is idle")
	c.SweepIdle()
	require.Nil(t, c.existing(quiet.id))
	require.True(t, quiet.dropped, "whoever holds it looks the session up again")
	require.Same(t, busy, c.existing(busy.id))
	require.Same(t, deleting, c.existing(deleting.id))
}
