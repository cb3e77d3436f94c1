package pending

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/internal/workspace/workspacetest"
	"github.com/tandem-dev/tandem/proto"
)

// newBroker returns a broker over a real store, with an open workspace.
func newBroker(tb testing.TB) (*Broker, *workspace.Workspace, store.Store) {
	tb.Helper()
	ws, _, db := workspacetest.Open(tb)
	return New(db, nil, nil), ws, db
}

// askCanceled asks for a permission on behalf of a run that is canceled
// while it waits: the request is made, announced, resolved as canceled and
// settled, all before it returns.
func askCanceled(tb testing.TB, b *Broker, ref Ref) Answer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ref.Suspend = func() bool { return false }
	ans, suspended := b.AskPermission(ctx, ref, "bash", "run ls", nil)
	require.False(tb, suspended)
	return ans
}

// A settled request is no longer pending work, yet it is still the
// request of its tool call: a late answer learns it was resolved, and the
// run asking again for the same call (as a revived run replaying its step
// does) gets the recorded answer instead of a new request.
func TestSettledRequestIsKeptButNotWork(t *testing.T) {
	b, ws, st := newBroker(t)
	ref := Ref{Workspace: ws, SessionID: uuid.NewString(), RunID: uuid.NewString(), ToolCallID: "call_1", ToolName: "bash"}
	require.Equal(t, proto.ResultCanceled, askCanceled(t, b, ref).Result)

	ctx := context.Background()
	rows, err := st.RunPending(ctx, ref.RunID)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Settled)

	work, err := b.Pending(ctx, ws.ID, "")
	require.NoError(t, err)
	require.Empty(t, work.Permissions)
	runs, err := b.UnfinishedRuns(ctx, ws.ID, ref.SessionID)
	require.NoError(t, err)
	require.Empty(t, runs)

	_, err = b.AnswerPermission(ctx, ws, rows[0].RequestID, proto.PermissionAnswer{ClientID: uuid.NewString(), Decision: proto.DecisionApproveOnce})
	require.Equal(t, proto.CodeAlreadyResolved, apierr.ErrorCode(err))

	// Asking again must not park: a new request would wait for an answer.
	again, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ans, suspended := b.AskPermission(again, ref, "bash", "run ls", nil)
	require.False(t, suspended, "asked anew instead of finding the settled request")
	require.Equal(t, proto.ResultCanceled, ans.Result)
	rows, err = st.RunPending(ctx, ref.RunID)
	require.NoError(t, err)
	require.Len(t, rows, 1)
}

// BenchmarkAskWithHistory asks for a permission (and settles it) in a
// workspace that already holds many settled requests, then lists the
// workspace's pending work as GET .../permissions does. Each operation
// should cost the same whatever the history.
func BenchmarkAskWithHistory(b *testing.B) {
	for _, settled := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("settled=%d", settled), func(b *testing.B) {
			br, ws, st := newBroker(b)
			ctx := context.Background()
			for i := range settled {
				rec := record{
					Permission: &proto.PermissionRequest{RequestID: uuid.NewString(), ToolCallID: fmt.Sprintf("old_%d", i), Kind: "bash", Summary: "run ls"},
					Resolved:   true, Applied: true, Answer: Answer{Result: proto.ResultApproved},
				}
				data, err := json.Marshal(rec)
				require.NoError(b, err)
				require.NoError(b, st.PutPending(ctx, store.Pending{
					RequestID: rec.Permission.RequestID, WorkspaceID: ws.ID, SessionID: "old", RunID: uuid.NewString(),
					Kind: KindPermission, Data: data, CreatedAt: time.Now(), Settled: true, Resolved: true,
				}))
			}
			sid := uuid.NewString()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				askCanceled(b, br, Ref{Workspace: ws, SessionID: sid, RunID: uuid.NewString(), ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "bash"})
				if _, err := br.Pending(ctx, ws.ID, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
