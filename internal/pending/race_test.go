package pending

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// The stress tests below race answers with each other and with what else
// ends a request (a cancel, the session's delete, a restart's interrupt),
// and check what clients and the run rely on: exactly one answer wins, the
// others learn the request was resolved (or is gone), the run gets exactly
// the answer that won, and exactly one resolution is announced. Run them
// with -race -count=20.

const racers = 16

// raceWorld is a broker over a store that tells when a request is on
// disk and counts the resolutions announced, with the runs it revived.
type raceWorld struct {
	b       *Broker
	ws      *workspace.Workspace
	st      *slowStore
	revived chan string
}

func newRaceWorld(t *testing.T) *raceWorld {
	wss, st := openSlow(t, 1, 0)
	st.puts = make(chan store.Pending, 4)
	st.resolved = make(map[string]int)
	w := &raceWorld{ws: wss[0], st: st, revived: make(chan string, 64)}
	w.b = New(st, func(_ *workspace.Workspace, _, runID string) { w.revived <- runID }, nil)
	return w
}

func (w *raceWorld) ref() Ref {
	return Ref{Workspace: w.ws, SessionID: uuid.NewString(), RunID: uuid.NewString(), ToolCallID: "call_1", ToolName: "bash"}
}

// asked waits for the next request to be on disk.
func (w *raceWorld) asked(t *testing.T) store.Pending {
	t.Helper()
	select {
	case p := <-w.st.puts:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no request was made")
		return store.Pending{}
	}
}

// suspended makes a request for ref's run and suspends the run (its
// workspace closing), and returns the request, left open.
func (w *raceWorld) suspended(t *testing.T, ref Ref) store.Pending {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() {
		_, suspended := w.b.AskPermission(ctx, ref, "bash", "run ls", nil)
		done <- suspended
	}()
	p := w.asked(t)
	cancel()
	require.True(t, receive(t, done, "the run to suspend"))
	return p
}

type outcome struct {
	result string
	err    error
}

// answerAll sends n answers to the permission request at once (after
// also starting each of others), one client each, and returns what each
// answer got with the clients.
func (w *raceWorld) answerAll(requestID string, n int, others ...func()) ([]outcome, []string) {
	decisions := []string{proto.DecisionApproveOnce, proto.DecisionReject, proto.DecisionApproveSession, proto.DecisionUserNotAvailable}
	out := make([]outcome, n)
	clients := make([]string, n)
	for i := range clients {
		clients[i] = uuid.NewString()
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i].result, out[i].err = w.b.AnswerPermission(context.Background(), w.ws, requestID,
				proto.PermissionAnswer{ClientID: clients[i], Decision: decisions[i%len(decisions)]})
		})
	}
	for _, f := range others {
		wg.Go(func() { <-start; f() })
	}
	close(start)
	wg.Wait()
	return out, clients
}

// winner returns the index of the one answer that won, -1 when none did;
// every other answer must have been told why it lost, with a code in ok.
func winner(t *testing.T, out []outcome, ok ...string) int {
	t.Helper()
	won := -1
	for i, o := range out {
		if o.err == nil {
			require.Equal(t, -1, won, "answers %d and %d both won", won, i)
			won = i
			continue
		}
		require.Contains(t, ok, apierr.ErrorCode(o.err), "answer %d: %v", i, o.err)
	}
	return won
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// Many clients answer one permission request at once.
func TestConcurrentAnswersOneWins(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	got := make(chan Answer, 1)
	go func() {
		ans, _ := w.b.AskPermission(context.Background(), ref, "bash", "run ls", nil)
		got <- ans
	}()
	p := w.asked(t)

	out, clients := w.answerAll(p.RequestID, racers)
	won := winner(t, out, proto.CodeAlreadyResolved)
	require.NotEqual(t, -1, won, "no answer won")
	ans := receive(t, got, "the run's answer")
	require.Equal(t, clients[won], ans.ResolvedBy, "the run got another answer than the one that won")
	require.Equal(t, out[won].result, ans.Result)
	require.Equal(t, 1, w.st.resolutions(p.RequestID))

	row, err := w.st.GetPending(context.Background(), p.RequestID)
	require.NoError(t, err)
	require.True(t, row.Resolved)
	require.True(t, row.Settled, "the answer reached the run")
}

// Many clients answer one client tool call at once.
func TestConcurrentToolAnswersOneWins(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	got := make(chan Answer, 1)
	go func() {
		ans, _ := w.b.CallClientTool(context.Background(), ref, []byte(`{}`), nil)
		got <- ans
	}()
	p := w.asked(t)

	errs := make([]outcome, racers)
	clients := make([]string, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		clients[i] = uuid.NewString()
		wg.Go(func() {
			<-start
			result := clients[i]
			errs[i].err = w.b.AnswerToolCall(context.Background(), w.ws, p.RequestID, proto.ToolCallAnswer{ClientID: clients[i], Result: &result})
		})
	}
	close(start)
	wg.Wait()
	won := winner(t, errs, proto.CodeAlreadyResolved)
	require.NotEqual(t, -1, won, "no answer won")
	ans := receive(t, got, "the run's answer")
	require.Equal(t, clients[won], ans.ResolvedBy)
	require.Equal(t, clients[won], ans.Content)
	require.Equal(t, 1, w.st.resolutions(p.RequestID))
}

// Answers race the run's cancel: either one answer wins and the run uses
// it, or the cancel wins and every answer is told the request was
// resolved; one resolution either way.
func TestAnswersRaceCancel(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	ref.Suspend = func() bool { return false } // an explicit cancel
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Answer, 1)
	go func() {
		ans, suspended := w.b.AskPermission(ctx, ref, "bash", "run ls", nil)
		if suspended {
			ans = Answer{Result: "suspended"}
		}
		got <- ans
	}()
	p := w.asked(t)

	out, clients := w.answerAll(p.RequestID, racers, cancel)
	won := winner(t, out, proto.CodeAlreadyResolved)
	ans := receive(t, got, "the run's answer")
	if won == -1 {
		require.Equal(t, proto.ResultCanceled, ans.Result, "no answer won, yet the run was not canceled")
	} else {
		require.Equal(t, clients[won], ans.ResolvedBy)
	}
	require.Equal(t, 1, w.st.resolutions(p.RequestID))
	row, err := w.st.GetPending(context.Background(), p.RequestID)
	require.NoError(t, err)
	require.True(t, row.Settled)
}

// Answers race the session's delete (its requests canceled, then its rows
// gone): an answer wins, loses, or finds nothing; the run gets one answer,
// and one resolution is announced.
func TestAnswersRaceSessionDelete(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	require.NoError(t, w.st.CreateSession(context.Background(), store.Session{ID: ref.SessionID, WorkspaceID: w.ws.ID, Title: "t", Model: "m"}))
	got := make(chan Answer, 1)
	go func() {
		ans, _ := w.b.AskPermission(context.Background(), ref, "bash", "run ls", nil)
		got <- ans
	}()
	p := w.asked(t)

	out, clients := w.answerAll(p.RequestID, racers, func() {
		w.b.CancelSession(context.Background(), w.ws, ref.SessionID)
		if err := w.st.DeleteSession(context.Background(), w.ws.ID, ref.SessionID); err != nil {
			t.Error(err)
		}
	})
	won := winner(t, out, proto.CodeAlreadyResolved, proto.CodeRequestNotFound)
	ans := receive(t, got, "the run's answer")
	if won == -1 {
		require.Equal(t, proto.ResultCanceled, ans.Result)
	} else {
		require.Equal(t, clients[won], ans.ResolvedBy)
	}
	require.Equal(t, 1, w.st.resolutions(p.RequestID))
	_, err := w.st.GetPending(context.Background(), p.RequestID)
	require.ErrorIs(t, err, store.ErrNotFound, "the request went with its session")
}

// Answers to a suspended run's request race the restart's interrupt of
// that run: an answer wins and revives the run once, or the interrupt wins
// and every answer is told the request was resolved.
func TestAnswersRaceInterrupt(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	id := w.suspended(t, ref).RequestID
	runs, err := w.b.UnfinishedRuns(context.Background(), w.ws.ID, ref.SessionID)
	require.NoError(t, err)
	require.Equal(t, []string{ref.RunID}, runs)

	var interruptErr error
	out, _ := w.answerAll(id, racers, func() { interruptErr = w.b.Interrupt(context.Background(), w.ws, ref.RunID) })
	require.NoError(t, interruptErr)
	won := winner(t, out, proto.CodeAlreadyResolved)
	require.Equal(t, 1, w.st.resolutions(id))
	if won != -1 {
		require.Equal(t, ref.RunID, receive(t, w.revived, "the revival"))
	}
	require.Empty(t, w.revived, "revived more than once")
	row, err := w.st.GetPending(context.Background(), id)
	require.NoError(t, err)
	require.True(t, row.Resolved)
	require.True(t, row.Settled)
}

// Answers to a suspended run's request: one wins and revives the run
// once, and the revived run, asking again, gets that answer.
func TestConcurrentAnswersToSuspendedRun(t *testing.T) {
	w := newRaceWorld(t)
	ref := w.ref()
	p := w.suspended(t, ref)

	out, clients := w.answerAll(p.RequestID, racers)
	won := winner(t, out, proto.CodeAlreadyResolved)
	require.NotEqual(t, -1, won)
	require.Equal(t, ref.RunID, receive(t, w.revived, "the revival"))
	require.Empty(t, w.revived, "revived more than once")
	require.Equal(t, 1, w.st.resolutions(p.RequestID))

	ans, suspended := w.b.AskPermission(context.Background(), ref, "bash", "run ls", nil)
	require.False(t, suspended)
	require.Equal(t, clients[won], ans.ResolvedBy)
	row, err := w.st.GetPending(context.Background(), p.RequestID)
	require.NoError(t, err)
	require.True(t, row.Settled)
}
