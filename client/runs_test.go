package client

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

func TestEchoRunThroughTheSDK(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{})
	opened := next(t, stream)
	require.Equal(t, proto.EventStreamOpened, opened.Type)
	o, err := DecodeData[proto.StreamOpened](opened)
	require.NoError(t, err)
	assert.Equal(t, e.c.ClientID(), o.ClientID)
	assert.Equal(t, ws.ID, o.WorkspaceID)
	assert.Zero(t, opened.Seq, "control frames have no seq")

	s := e.session(ws.ID)
	acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "hello"})
	require.NoError(t, err)
	assert.Equal(t, s.ID, acc.SessionID)
	assert.NotEmpty(t, acc.RunID)

	var text strings.Builder
	var types []string
	var accepted proto.RunAccepted
	done, err := WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) {
		if ev.RunID == acc.RunID {
			types = append(types, ev.Type)
		}
		switch ev.Type {
		case proto.EventMessageDelta:
			d, err := DecodeData[proto.MessageDelta](ev)
			assert.NoError(t, err)
			text.WriteString(d.Text)
		case proto.EventRunAccepted:
			accepted, _ = DecodeData[proto.RunAccepted](ev)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
	assert.Equal(t, acc.RunID, done.RunID)
	assert.Nil(t, done.Error)
	assert.Equal(t, "echo: hello", text.String())
	assert.Equal(t, e.c.ClientID(), accepted.ClientID, "Prompt sends the client's id")
	require.NotEmpty(t, types)
	assert.Equal(t, proto.EventRunAccepted, types[0])
	assert.Equal(t, proto.EventRunCompleted, types[len(types)-1])
	assert.Contains(t, types, proto.EventMessageDelta)
	assert.Equal(t, done.MessageID, lastAssistant(t, e, ws.ID, s.ID).ID)

	msgs, err := e.c.Messages(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, proto.RoleUser, msgs[0].Role)
	assert.Equal(t, "hello", msgs[0].Parts[0].Text)
	assert.Equal(t, proto.RoleAssistant, msgs[1].Role)
	assert.Equal(t, acc.RunID, msgs[1].RunID)
	parts := msgs[1].Parts
	require.NotEmpty(t, parts)
	assert.Equal(t, "echo: hello", parts[0].Text)
	assert.Equal(t, proto.PartFinish, parts[len(parts)-1].Type)
	assert.Equal(t, proto.FinishEndTurn, parts[len(parts)-1].Reason)

	// The session is busy until session.idle, which follows run.completed.
	until(t, stream, proto.EventSessionIdle)
	st, err := e.c.AgentStatus(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.False(t, st.Busy)
	assert.Positive(t, stream.LastSeq())
}

func lastAssistant(t *testing.T, e *env, wsID, sid string) proto.Message {
	t.Helper()
	msgs, err := e.c.Messages(ctxT(t), wsID, sid)
	require.NoError(t, err)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == proto.RoleAssistant {
			return msgs[i]
		}
	}
	t.Fatal("no assistant message")
	return proto.Message{}
}

func TestCancelASlowRun(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{})
	s := e.session(ws.ID)

	acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "/slow 1000 10"})
	require.NoError(t, err)
	for {
		ev := next(t, stream)
		if ev.Type == proto.EventMessageDelta && ev.RunID == acc.RunID {
			break
		}
	}
	st, err := e.c.AgentStatus(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.True(t, st.Busy)
	require.NotNil(t, st.ActiveRunID)
	assert.Equal(t, acc.RunID, *st.ActiveRunID)

	canceled, err := e.c.Cancel(ctx, ws.ID, s.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{acc.RunID}, canceled)

	done, err := WaitRun(ctx, stream, acc.RunID)
	require.NoError(t, err)
	assert.Equal(t, proto.OutcomeCanceled, done.Outcome)
	parts := lastAssistant(t, e, ws.ID, s.ID).Parts
	require.NotEmpty(t, parts)
	assert.Equal(t, proto.FinishCanceled, parts[len(parts)-1].Reason)
}

// TestReconnectMidRunLosesNothing cuts the stream's connections again and
// again while a run streams, from either side, and checks that the reader
// got exactly the run's kept events: none missing, none twice, in order.
func TestReconnectMidRunLosesNothing(t *testing.T) {
	cases := []struct {
		name       string
		filter     bool
		serverSide bool
	}{
		{name: "client side cut"},
		{name: "client side cut, session filter", filter: true},
		{name: "server side cut", serverSide: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startServer(t)
			ctx := ctxT(t)
			ws := e.workspace()
			s := e.session(ws.ID)

			k := &killer{}
			sc := New(e.ts.URL, testToken, WithHTTPClient(k.client()))
			t.Cleanup(sc.CloseIdleConnections)
			opts := EventsOptions{}
			if tc.filter {
				opts.SessionID = s.ID
			}
			stream := openStream(t, sc, ws.ID, opts)
			first := next(t, stream)
			require.Equal(t, proto.EventStreamOpened, first.Type)
			o, err := DecodeData[proto.StreamOpened](first)
			require.NoError(t, err)

			acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: s.ID, Prompt: "/slow 40 15"})
			require.NoError(t, err)

			// Cut every 40ms while the run goes on.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			cuts := 0
			wg.Go(func() {
				tick := time.NewTicker(40 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					n := 1
					if tc.serverSide {
						e.accepted.cut()
					} else {
						n = k.kill()
					}
					mu.Lock()
					cuts += n
					mu.Unlock()
				}
			})
			var got []proto.Event
			done, err := WaitRunFunc(ctx, stream, acc.RunID, func(ev proto.Event) { got = append(got, ev) })
			close(stop)
			wg.Wait()
			require.NoError(t, err)
			assert.Equal(t, proto.OutcomeEndTurn, done.Outcome)
			// The server side cuts may have killed e.c's idle connections too.
			e.c.CloseIdleConnections()

			reopened := 0
			var seqs, kept []int64
			for _, ev := range got {
				if ev.Type == proto.EventStreamOpened {
					reopened++
				}
				require.NotEqual(t, proto.EventStreamReset, ev.Type, "a resume in range never resets")
				if ev.Seq == 0 {
					continue
				}
				seqs = append(seqs, ev.Seq)
				if tc.filter {
					assert.True(t, ev.SessionID == s.ID || proto.IsWorkspaceLevel(ev.Type), "filtered stream got %+v", ev)
				}
				if ev.SessionID == s.ID && !ev.Ephemeral && proto.InSessionHistory(ev.Type) {
					kept = append(kept, ev.Seq)
				}
			}
			mu.Lock()
			t.Logf("%d cuts, %d reconnects, %d events with a seq", cuts, reopened, len(seqs))
			mu.Unlock()
			require.Positive(t, reopened, "the stream was never cut: the test proves nothing")
			for i := 1; i < len(seqs); i++ {
				require.Less(t, seqs[i-1], seqs[i], "seqs must strictly increase: no duplicate, in order")
			}

			history, err := e.c.SessionEvents(ctx, ws.ID, s.ID, o.HeadSeq, 0)
			require.NoError(t, err)
			var want []int64
			for _, ev := range history {
				want = append(want, ev.Seq)
			}
			assert.Equal(t, want, kept, "the reader got exactly the kept events of the session")
		})
	}
}

func TestResumeFromLastEventID(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	s := e.session(ws.ID)
	var seqs []int64
	for _, m := range []string{"one", "two", "three"} {
		seq, err := e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: proto.LogLevelInfo, Message: m})
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}

	stream := openStream(t, e.c, ws.ID, EventsOptions{SessionID: s.ID, LastEventID: seqs[0]})
	assert.Equal(t, seqs[0], stream.LastSeq())
	require.Equal(t, proto.EventStreamOpened, next(t, stream).Type)
	for _, want := range seqs[1:] {
		ev := next(t, stream)
		assert.Equal(t, proto.EventSessionLog, ev.Type)
		assert.Equal(t, want, ev.Seq)
		assert.Equal(t, want, stream.LastSeq())
	}

	// LastSeq carries over to a later stream, which picks up after it.
	later := stream.LastSeq()
	require.NoError(t, stream.Close())
	seq, err := e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: proto.LogLevelInfo, Message: "four"})
	require.NoError(t, err)
	again := openStream(t, e.c, ws.ID, EventsOptions{SessionID: s.ID, LastEventID: later})
	ev, _ := until(t, again, proto.EventSessionLog)
	assert.Equal(t, seq, ev.Seq)
}

func TestResetIsSurfacedAndTheStreamGoesOnLive(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	s := e.session(ws.ID)

	// A seq this server never issued cannot be served: reset.
	stream := openStream(t, e.c, ws.ID, EventsOptions{LastEventID: 1 << 40})
	require.Equal(t, proto.EventStreamOpened, next(t, stream).Type)
	reset := next(t, stream)
	require.Equal(t, proto.EventStreamReset, reset.Type)
	r, err := DecodeData[proto.StreamReset](reset)
	require.NoError(t, err)
	assert.Less(t, r.HeadSeq, int64(1<<40))
	assert.Equal(t, r.HeadSeq, stream.LastSeq(), "the reset moves the stream's position back")

	// Live events, below the old position, still arrive.
	seq, err := e.c.Log(ctx, ws.ID, s.ID, proto.LogRequest{Level: proto.LogLevelInfo, Message: "after reset"})
	require.NoError(t, err)
	ev, _ := until(t, stream, proto.EventSessionLog)
	assert.Equal(t, seq, ev.Seq)

	// WaitRun says a reset may have hidden the completion.
	stream2 := openStream(t, e.c, ws.ID, EventsOptions{LastEventID: 1 << 40})
	_, err = WaitRun(ctx, stream2, "some-run")
	assert.ErrorIs(t, err, ErrStreamReset)
}

func TestDeletedWorkspaceEndsTheStream(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{})

	require.NoError(t, e.c.DeleteWorkspace(ctx, ws.ID))
	ev, _ := until(t, stream, proto.EventWorkspaceClosing)
	wc, err := DecodeData[proto.WorkspaceClosing](ev)
	require.NoError(t, err)
	assert.Equal(t, "deleted", wc.Reason)
	for {
		_, err := stream.Next(ctx)
		if err != nil {
			assert.ErrorIs(t, err, ErrWorkspaceDeleted)
			break
		}
	}
	got, err := e.c.GetWorkspace(ctx, ws.ID)
	require.NoError(t, err)
	assert.False(t, got.Open, "the stream did not reconnect and reopen the workspace")
}

func TestCloseAndContextEndTheStream(t *testing.T) {
	e := startServer(t)
	ws := e.workspace()

	stream := openStream(t, e.c, ws.ID, EventsOptions{})
	require.NoError(t, stream.Close())
	require.NoError(t, stream.Close(), "Close twice is fine")
	_, err := stream.Next(context.Background())
	assert.ErrorIs(t, err, ErrStreamClosed)

	ctx, cancel := context.WithCancel(context.Background())
	s2, err := e.c.Events(ctx, ws.ID, EventsOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	cancel()
	for {
		_, err := s2.Next(context.Background())
		if err != nil {
			assert.ErrorIs(t, err, context.Canceled)
			break
		}
	}

	// Next's own ctx bounds only the wait, not the stream.
	s3 := openStream(t, e.c, ws.ID, EventsOptions{})
	require.Equal(t, proto.EventStreamOpened, next(t, s3).Type)
	for {
		short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = s3.Next(short)
		cancelShort()
		if err != nil {
			break // presence events came first; now the stream is quiet
		}
	}
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	e.session(ws.ID)
	until(t, s3, proto.EventSessionCreated) // the stream still works after a Next timed out

	// All ends with the error that ended the stream.
	go func() { time.Sleep(20 * time.Millisecond); _ = s3.Close() }()
	var last error
	for _, err := range s3.All(context.Background()) {
		last = err
	}
	assert.ErrorIs(t, last, ErrStreamClosed)
}

func TestHeartbeatsKeepAQuietStreamOnOneConnection(t *testing.T) {
	// The idle watchdog counts heartbeats as life: a quiet stream whose
	// heartbeats come faster than its timeout is never reopened.
	e := startServer(t, func(c *server.Config) { c.Heartbeat = 20 * time.Millisecond })
	ws := e.workspace()
	stream := openStream(t, e.c, ws.ID, EventsOptions{IdleTimeout: 200 * time.Millisecond})
	require.Equal(t, proto.EventStreamOpened, next(t, stream).Type)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	for {
		ev, err := stream.Next(ctx)
		if err != nil {
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			break
		}
		assert.NotEqual(t, proto.EventStreamOpened, ev.Type, "heartbeats keep the connection alive")
	}
}
