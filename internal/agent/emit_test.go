package agent

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"

	"github.com/tandem-dev/tandem/internal/httpapi/sse"
)

// The tests run in synctest bubbles: time stands still until every
// goroutine of the bubble is blocked, so a delta that waited for a timer
// (the 5 ms linger the run's progress may wait) would not be on the stream
// when synctest.Wait returns.

const deadline = 10 * time.Second

// A delta of a quiet stream reaches the streams while the model is still
// streaming, without any timer firing.
func TestQuietDeltaLeavesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEmitEnv(t)
		release := make(chan struct{})
		model := providerFunc(func(ctx context.Context, _ provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
			onDelta(provider.Delta{Kind: provider.DeltaText, Text: "first"})
			<-release
			return provider.Response{FinishReason: provider.FinishEndTurn}, nil
		})
		start := time.Now()
		done := env.execute(model)
		synctest.Wait()
		f, ok := env.stream.next(proto.EventMessageDelta)
		require.True(t, ok, "the delta waited")
		require.Contains(t, f, `"text":"first"`)
		require.Zero(t, time.Since(start), "a timer fired")
		close(release)
		require.Equal(t, proto.OutcomeEndTurn, (<-done).Outcome)
		env.waitFor(t, proto.EventRunCompleted)
	})
}

// A burst of deltas that arrives while a commit is in flight neither holds
// the model's stream up nor leaves one flush per delta: the deltas wait for
// that commit and go out together in the flush that follows it at once.
func TestBurstCoalescesBehindCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEmitEnv(t)
		env.store.gate = make(chan struct{})
		const burst = 100
		streamed := make(chan struct{})
		model := providerFunc(func(_ context.Context, _ provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
			onDelta(provider.Delta{Kind: provider.DeltaText, Text: "first"})
			// The first delta sends the run's progress to the store at
			// once, where it is held; the rest of the burst streams
			// meanwhile.
			<-env.store.entered
			for i := range burst - 1 {
				onDelta(provider.Delta{Kind: provider.DeltaText, Text: strings.Repeat("x", i%7+1)})
			}
			close(streamed)
			return provider.Response{FinishReason: provider.FinishEndTurn}, nil
		})
		start := time.Now()
		done := env.execute(model)
		<-streamed
		close(env.store.gate)
		require.Equal(t, proto.OutcomeEndTurn, (<-done).Outcome)
		env.waitFor(t, proto.EventRunCompleted)
		require.Zero(t, time.Since(start), "a timer fired")

		deltas := 0
		for _, f := range env.stream.all() {
			if strings.Contains(f, "event: "+proto.EventMessageDelta+"\n") {
				deltas++
			}
		}
		require.Equal(t, burst, deltas)
		// A fast model's whole step costs two or three commits, not one per
		// delta: the progress with the first delta, then the burst and the
		// step's end with run.completed. Once the held commit returns, the
		// flush of the burst and the step's end race for the next commit:
		// either one takes both, or the burst goes first and the end after.
		require.LessOrEqual(t, env.store.commits(), 3)
		require.GreaterOrEqual(t, env.store.commits(), 2)
	})
}

// A run nobody watches keeps its deltas for the commit that ends its step:
// they would reach nobody, and sending them at once would cost the run a
// commit more. The run happens in a synctest bubble, so the test can wait
// until everything is blocked on the model and see that nothing committed.
func TestUnwatchedRunCommitsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newEmitEnv(t)
		env.stream.stop()
		env.store.reset()
		release := make(chan struct{})
		model := providerFunc(func(_ context.Context, _ provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
			onDelta(provider.Delta{Kind: provider.DeltaText, Text: "word "})
			<-release
			return provider.Response{FinishReason: provider.FinishEndTurn}, nil
		})
		done := env.execute(model)
		synctest.Wait()
		require.Zero(t, env.store.commits(), "the delta of an unwatched run was sent at once")
		close(release)
		require.Equal(t, proto.OutcomeEndTurn, (<-done).Outcome)
		require.Equal(t, 1, env.store.commits())
	})
}

type providerFunc func(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error)

func (f providerFunc) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
	return f(ctx, req, onDelta)
}

type noTools struct{}

func (noTools) Offer(context.Context, *Run) ([]provider.Tool, []string) { return nil, nil }
func (noTools) Call(context.Context, *Run, provider.ToolCall) ToolResult {
	return ToolResult{Content: "no tools", IsError: true}
}
func (noTools) Interrupt(context.Context, *Run) error { return nil }

// gatedStore counts the commits of event batches and, while gate is set
// and open, holds the first one until it closes.
type gatedStore struct {
	store.Store
	gate    chan struct{}
	entered chan struct{}

	mu    sync.Mutex
	count int
	held  bool
}

func (s *gatedStore) AppendEvents(ctx context.Context, es []store.Event) error {
	s.mu.Lock()
	s.count++
	hold := s.gate != nil && !s.held
	s.held = s.held || hold
	s.mu.Unlock()
	if hold {
		s.entered <- struct{}{}
		<-s.gate
	}
	return s.Store.AppendEvents(ctx, es)
}

func (s *gatedStore) commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

func (s *gatedStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count = 0
}

type emitEnv struct {
	store  *gatedStore
	ws     *workspace.Workspace
	sid    string
	runner *Runner
	stream *frameWriter
}

func newEmitEnv(t *testing.T) *emitEnv {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "tandem.db"))
	require.NoError(t, err)
	st := &gatedStore{Store: db, entered: make(chan struct{}, 1)}
	h := hub.New(hub.Config{})
	m := workspace.NewManager(workspace.Config{Store: st, Hub: h, CreateGrace: time.Minute, DetachGrace: time.Minute})
	ws, _, err := m.Open(ctx, t.TempDir())
	require.NoError(t, err)
	sid := uuid.NewString()
	now := time.Now().UTC()
	require.NoError(t, db.CreateSession(ctx, store.Session{ID: sid, WorkspaceID: ws.ID, CreatedAt: now, UpdatedAt: now}))

	fw := newFrameWriter()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	var once sync.Once
	fw.stop = func() { once.Do(func() { stop(); <-served }) }
	go func() {
		defer close(served)
		_ = ws.Stream(sctx, sse.NewWriter(fw), &workspace.StreamOptions{ClientID: uuid.NewString()})
	}()
	env := &emitEnv{store: st, ws: ws, sid: sid, stream: fw,
		runner: &Runner{Store: st, Tools: noTools{}}}
	env.waitFor(t, proto.EventStreamOpened)
	st.reset()
	t.Cleanup(func() {
		fw.stop()
		m.Shutdown(ctx)
		h.Close()
		require.NoError(t, db.Close())
	})
	return env
}

func (e *emitEnv) execute(model provider.Provider) <-chan Result {
	done := make(chan Result, 1)
	run := &Run{ID: uuid.NewString(), SessionID: e.sid, Workspace: e.ws, Prompt: "hi",
		Model: "fake/model", ModelName: "model", Provider: model}
	go func() { done <- e.runner.Execute(context.Background(), run) }()
	return done
}

// waitFor waits for the stream's first frame of event type typ not yet
// waited for, and returns it.
func (e *emitEnv) waitFor(t *testing.T, typ string) string {
	t.Helper()
	timeout := time.After(deadline)
	for {
		if f, ok := e.stream.next(typ); ok {
			return f
		}
		select {
		case <-e.stream.wrote:
		case <-timeout:
			t.Fatalf("no %s on the stream", typ)
		}
	}
}

// frameWriter is a stream's ResponseWriter that keeps the frames written.
type frameWriter struct {
	hdr   http.Header
	wrote chan struct{}
	stop  func() // ends the stream and waits for it (idempotent)

	mu     sync.Mutex
	buf    bytes.Buffer
	frames []string
	seen   int // frames already returned by next
}

func newFrameWriter() *frameWriter {
	return &frameWriter{hdr: http.Header{}, wrote: make(chan struct{}, 1)}
}

func (w *frameWriter) Header() http.Header { return w.hdr }
func (w *frameWriter) WriteHeader(int)     {}
func (w *frameWriter) Flush()              {}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(p)
	for {
		i := bytes.Index(w.buf.Bytes(), []byte("\n\n"))
		if i < 0 {
			break
		}
		w.frames = append(w.frames, string(w.buf.Next(i+2)))
	}
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *frameWriter) next(typ string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := w.seen; i < len(w.frames); i++ {
		if strings.Contains(w.frames[i], "event: "+typ+"\n") {
			w.seen = i + 1
			return w.frames[i], true
		}
	}
	return "", false
}

func (w *frameWriter) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.frames...)
}
