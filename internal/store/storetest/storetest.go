// Package storetest is the conformance suite of store.Store: the behaviour
// the rest of Tandem relies on, whatever database keeps it. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., Reopen: ..., Break: ...})
//	}
//
// The suite reads the doc comments of store.Store as its specification:
// errors (store.ErrNotFound, store.ErrExists, store.ErrUnavailable), the
// marks that never go down, AppendEvents' all-or-none with the writes it
// carries, paging and order of every list, the group commit's promise that
// one bad write never fails its neighbours, and durability on return.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Harness is what the suite needs from an implementation. Every field is
// required: a backend that cannot reopen or fail is not a Tandem store.
type Harness struct {
	// Open returns a new store on an empty database of its own. The
	// harness closes it when the test ends (closing twice must be safe:
	// tests close stores themselves too).
	Open func(t testing.TB) store.Store
	// Reopen closes s and opens its database again, as a restart would.
	Reopen func(t testing.TB, s store.Store) store.Store
	// Break makes the storage behind s fail (a full disk, a database that
	// went away) until heal is called. Writes meanwhile must fail with an
	// error wrapping store.ErrUnavailable.
	Break func(t *testing.T, s store.Store) (heal func())
}

// Run runs the whole suite, one subtest per behaviour, each on a store of
// its own. Subtests run one after the other: Break may act on the whole
// process (SQLite's full disk is a file size limit).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil || h.Reopen == nil || h.Break == nil {
		t.Fatal("storetest: the harness must give Open, Reopen and Break")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

// tests is the suite, in the order it runs.
var tests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"Workspaces", testWorkspaces},
	{"ListsEmptyNotNil", testListsEmptyNotNil},
	{"TimeRoundTrip", testTimeRoundTrip},
	{"EnsureWorkspaceConcurrent", testEnsureWorkspaceConcurrent},
	{"WorkspaceMarksOnlyRise", testWorkspaceMarksOnlyRise},
	{"DeleteWorkspaceCascade", testDeleteWorkspaceCascade},
	{"Sessions", testSessions},
	{"UpdateSessionScopedToWorkspace", testUpdateSessionScopedToWorkspace},
	{"TouchSessionOnlyMovesForward", testTouchSessionOnlyMovesForward},
	{"SessionUsageAddsUpWithItsEvents", testSessionUsageAddsUpWithItsEvents},
	{"Messages", testMessages},
	{"MessageKeepsItsFirstSession", testMessageKeepsItsFirstSession},
	{"MessageUsageAndSummaryRoundTrip", testMessageUsageAndSummaryRoundTrip},
	{"Events", testEvents},
	{"EventEmptyEnvelope", testEventEmptyEnvelope},
	{"EventEnvelopeBytesExact", testEventEnvelopeBytesExact},
	{"AppendEventsEmpty", testAppendEventsEmpty},
	{"AppendEventsAllOrNone", testAppendEventsAllOrNone},
	{"AppendEventsWritesTheSessionItAnnounces", testAppendEventsWritesTheSessionItAnnounces},
	{"AppendEventsKeepsEachMessagesLastVersionInItsFirstPlace", testAppendEventsKeepsLastVersionFirstPlace},
	{"AppendEventsUsesMessageJSON", testAppendEventsUsesMessageJSON},
	{"RunAttachmentsLiveUntilTheRunCompletes", testRunAttachmentsLiveUntilTheRunCompletes},
	{"RunAttachmentsAllOrNoneWithTheirEvent", testRunAttachmentsAllOrNoneWithTheirEvent},
	{"RunAttachmentsGoWithTheirSession", testRunAttachmentsGoWithTheirSession},
	{"PromptKeys", testPromptKeys},
	{"Pending", testPending},
	{"PendingPutKeepsPlace", testPendingPutKeepsPlace},
	{"PendingSettled", testPendingSettled},
	{"PendingResolveOnce", testPendingResolveOnce},
	{"PendingConcurrentAnswersOneWins", testPendingConcurrentAnswersOneWins},
	{"SessionApprovals", testSessionApprovals},
	{"DeleteSessionCascade", testDeleteSessionCascade},
	{"Rewinds", testRewinds},
	{"PutMessages", testPutMessages},
	{"ReopenPersists", testReopenPersists},
	{"CanceledContext", testCanceledContext},
	{"CanceledWritesAreAllOrNothing", testCanceledWritesAreAllOrNothing},
	{"GroupCommitIsolatesFailures", testGroupCommitIsolatesFailures},
	{"ConcurrentStress", testConcurrentStress},
	{"SeqUniqueUnderConcurrency", testSeqUniqueUnderConcurrency},
	{"UnavailableWhileBroken", testUnavailableWhileBroken},
	{"WritesAfterCloseFail", testWritesAfterCloseFail},
	{"Tokens", testTokens},
	{"Audit", testAudit},
}

// t0 carries sub-second digits so the tests notice truncation or time-zone
// drift in the round trip.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

var bg = context.Background()

func mustWorkspace(t testing.TB, s store.Store, id string) store.Workspace {
	t.Helper()
	w, created, err := s.EnsureWorkspace(bg, store.Workspace{ID: id, Path: "/src/" + id, CreatedAt: t0})
	require.NoError(t, err)
	require.True(t, created)
	return w
}

func mustSession(t testing.TB, s store.Store, ws, id string, updated time.Time) store.Session {
	t.Helper()
	sess := store.Session{
		ID: id, WorkspaceID: ws, Title: "title " + id, Model: "m", ReasoningEffort: "high",
		Config: json.RawMessage(`{"permission_mode":"ask"}`), CreatedAt: t0, UpdatedAt: updated,
	}
	require.NoError(t, s.CreateSession(bg, sess))
	return sess
}

func msg(id, sid, text string) proto.Message {
	return proto.Message{
		ID: id, SessionID: sid, RunID: "r1", Role: proto.RoleAssistant,
		Parts: []proto.Part{
			{Type: proto.PartText, Text: text},
			{Type: proto.PartToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"cmd":"ls"}`)},
		},
		Model:     "m",
		CreatedAt: proto.Time{Time: t0},
		UpdatedAt: proto.Time{Time: t0},
	}
}

func ev(ws, sid string, seq int64, inHistory bool) store.Event {
	return store.Event{
		Seq: seq, WorkspaceID: ws, SessionID: sid, RunID: "run", Type: "message.delta",
		InHistory: inHistory, Envelope: fmt.Appendf(nil, `{"seq":%d}`, seq),
	}
}

func seqs(es []store.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func allSeqs(t testing.TB, s store.Store, ws string) []int64 {
	t.Helper()
	es, err := s.WorkspaceEvents(bg, ws, 0, 0, 0)
	require.NoError(t, err)
	return seqs(es)
}

func messageIDs(t testing.TB, s store.Store, sid string) []string {
	t.Helper()
	ms, err := s.ListMessages(bg, sid)
	require.NoError(t, err)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// requireListed checks the workspace's unsettled requests, oldest first.
func requireListed(t testing.TB, s store.Store, ws string, want ...store.Pending) {
	t.Helper()
	list, err := s.ListPending(bg, ws)
	require.NoError(t, err)
	if want == nil {
		want = []store.Pending{}
	}
	require.Equal(t, want, list)
}

func mustPutPending(t testing.TB, s store.Store, ps ...store.Pending) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, s.PutPending(bg, p))
	}
}

func requireApprovals(t testing.TB, s store.Store, sessionID string, want ...string) {
	t.Helper()
	got, err := s.SessionApprovals(bg, sessionID)
	require.NoError(t, err)
	require.ElementsMatch(t, want, got)
}
