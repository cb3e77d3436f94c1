package hub

import (
	"github.com/tandem-dev/tandem/internal/event"

	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/httpapi/sse"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// wait bounds every blocking step of the tests; they synchronize on events,
// the deadline only turns a bug into a failure instead of a hang.
const wait = 10 * time.Second

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// frame is one parsed SSE frame, or a comment line.
type frame struct {
	ID      string
	HasID   bool
	Event   string
	Data    string
	Comment string // set for comment lines (": ping"), which carry nothing else
}

func (f frame) seq(t testing.TB) int64 {
	t.Helper()
	require.True(t, f.HasID, "frame %+v has no id", f)
	n, err := strconv.ParseInt(f.ID, 10, 64)
	require.NoError(t, err)
	return n
}

// parseSSE reads frames from r until it fails, calling emit for each one.
// It implements the parts of the SSE format the hub produces.
func parseSSE(r io.Reader, emit func(frame)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var cur frame
	var fields bool
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if fields {
				cur.Data = strings.Join(data, "\n")
				emit(cur)
			}
			cur, fields, data = frame{}, false, nil
		case strings.HasPrefix(line, ":"):
			emit(frame{Comment: strings.TrimSpace(line[1:])})
		default:
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			fields = true
			switch name {
			case "id":
				cur.ID, cur.HasID = value, true
			case "event":
				cur.Event = value
			case "data":
				data = append(data, value)
			}
		}
	}
}

// harness is an httptest server whose handler serves one topic.
type harness struct {
	t      *testing.T
	hub    *Hub
	topic  *Topic
	srv    *httptest.Server
	tr     *http.Transport
	client *http.Client

	mu   sync.Mutex
	ends map[string]chan error // client_id -> Serve's result

	onSubscribed func(clientID string) // guarded by mu
	closeOnce    sync.Once
}

func newHarness(t *testing.T, cfg Config, head int64, backlog Backlog) *harness {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	h := &harness{t: t, hub: New(cfg), ends: make(map[string]chan error)}
	h.topic = h.hub.Topic("ws", head, backlog)
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	h.tr = &http.Transport{}
	h.client = &http.Client{Transport: h.tr}
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	h.closeOnce.Do(func() {
		h.srv.CloseClientConnections()
		h.srv.Close()
		h.hub.Close()
		h.tr.CloseIdleConnections()
	})
}

func (h *harness) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := ServeOptions{
		ClientID:    q.Get("client_id"),
		WorkspaceID: "ws",
		SessionID:   q.Get("session_id"),
	}
	last := r.Header.Get("Last-Event-ID")
	if v := q.Get("last_event_id"); v != "" {
		last = v
	}
	if last != "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil {
			http.Error(w, "bad last event id", http.StatusBadRequest)
			return
		}
		opts.LastEventID, opts.Resume = n, true
	}
	subscribed := false
	opts.OnSubscribed = func() {
		subscribed = true
		h.mu.Lock()
		fn := h.onSubscribed
		h.mu.Unlock()
		if fn != nil {
			fn(opts.ClientID)
		}
	}
	topic := h.topic
	if name := q.Get("topic"); name != "" {
		topic = h.hub.Topic(name, 0, nil)
	}
	err := topic.Serve(r.Context(), sse.NewWriter(w), &opts)
	if !subscribed && errors.Is(err, ErrClosed) {
		http.Error(w, "closed", http.StatusServiceUnavailable)
	}
	select {
	case h.endChan(opts.ClientID) <- err:
	default: // nobody is looking at this one
	}
}

func (h *harness) setOnSubscribed(fn func(clientID string)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onSubscribed = fn
}

func (h *harness) endChan(clientID string) chan error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.ends[clientID]
	if !ok {
		c = make(chan error, 16)
		h.ends[clientID] = c
	}
	return c
}

// ended waits for the Serve call of clientID to return.
func (h *harness) ended(clientID string) error {
	h.t.Helper()
	select {
	case err := <-h.endChan(clientID):
		return err
	case <-time.After(wait):
		h.t.Fatalf("Serve for %s did not return", clientID)
		return nil
	}
}

// waitSubscribers waits until the topic has n subscribers.
func waitSubscribers(t *testing.T, tp *Topic, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return tp.subscribers() == n }, wait, time.Millisecond,
		"want %d subscribers, have %d", n, tp.subscribers())
}

// sseStream is one client stream read by parseSSE in a goroutine.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
	done   chan struct{}
	err    error // parse error, valid after done
}

func (h *harness) open(clientID string, params url.Values, hdr http.Header) *sseStream {
	h.t.Helper()
	s, err := h.tryOpen(clientID, params, hdr)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, s.resp.StatusCode)
	return s
}

func (h *harness) tryOpen(clientID string, params url.Values, hdr http.Header) (*sseStream, error) {
	if params == nil {
		params = url.Values{}
	}
	params.Set("client_id", clientID)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+"/events?"+params.Encode(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &sseStream{t: h.t, resp: resp, frames: make(chan frame, 1<<16), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(s.frames)
		s.err = parseSSE(resp.Body, func(f frame) { s.frames <- f })
	}()
	h.t.Cleanup(s.close)
	return s, nil
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next returns the next frame that is not a comment.
func (s *sseStream) next() frame {
	s.t.Helper()
	for {
		f := s.nextAny()
		if f.Comment == "" {
			return f
		}
	}
}

func (s *sseStream) nextAny() frame {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		require.True(s.t, ok, "stream ended: %v", s.err)
		return f
	case <-time.After(wait):
		s.t.Fatal("no frame in time")
		return frame{}
	}
}

// eof waits for the stream to end after the remaining frames, which it returns.
func (s *sseStream) eof() []frame {
	s.t.Helper()
	var rest []frame
	deadline := time.After(wait)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return rest
			}
			if f.Comment == "" {
				rest = append(rest, f)
			}
		case <-deadline:
			s.t.Fatal("stream did not end")
		}
	}
}

// opened reads the first frame and checks it is stream.opened.
func (s *sseStream) opened() frame {
	s.t.Helper()
	f := s.next()
	require.Equal(s.t, "stream.opened", f.Event)
	require.False(s.t, f.HasID, "stream.opened must not carry an id")
	return f
}

// store is a fake event log: the workspace persists kept events, then publishes.
type store struct {
	mu     sync.Mutex
	events []event.Event
	calls  [][3]int64 // after, upTo, limit
	fail   error
}

func (st *store) add(e event.Event) {
	if !e.Kept {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.events = append(st.events, e)
}

func (st *store) backlog(ctx context.Context, after, upTo int64, limit int) ([]event.Event, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.calls = append(st.calls, [3]int64{after, upTo, int64(limit)})
	if st.fail != nil {
		return nil, st.fail
	}
	var out []event.Event
	i := sort.Search(len(st.events), func(i int) bool { return st.events[i].Seq > after })
	for ; i < len(st.events) && st.events[i].Seq <= upTo && len(out) < limit; i++ {
		out = append(out, st.events[i])
	}
	return out, nil
}

func (st *store) numCalls() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.calls)
}

// ev builds a test event whose data names its seq.
func ev(seq int64, typ, session string, kept bool) event.Event {
	return event.Event{Seq: seq, Type: typ, SessionID: session, Kept: kept,
		Data: fmt.Appendf(nil, `{"seq":%d,"type":%q}`, seq, typ)}
}

// memWriter is an in-memory ResponseWriter for tests that need no network.
type memWriter struct {
	hdr  http.Header
	code int
	buf  bytes.Buffer
}

func newMemWriter() *memWriter { return &memWriter{hdr: http.Header{}} }

func (m *memWriter) Header() http.Header         { return m.hdr }
func (m *memWriter) WriteHeader(code int)        { m.code = code }
func (m *memWriter) Write(p []byte) (int, error) { return m.buf.Write(p) }
func (m *memWriter) Flush()                      {}

func (m *memWriter) frames() ([]frame, error) {
	var out []frame
	err := parseSSE(bytes.NewReader(m.buf.Bytes()), func(f frame) { out = append(out, f) })
	if !errors.Is(err, io.EOF) {
		return nil, err
	}
	return out, nil
}
