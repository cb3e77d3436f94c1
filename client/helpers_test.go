package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testToken = "sdk-test-token-4f1c9a"

// wait bounds anything the server should do promptly.
const wait = 10 * time.Second

// env is the real server on httptest and an SDK client of it.
type env struct {
	t   *testing.T
	srv *server.Server
	ts  *httptest.Server
	c   *Client
	dir string // a directory to use as workspace
	// accepted are the server's connections, for cuts from its side
	// (httptest's CloseClientConnections does not see streams, which take
	// their connections over from net/http).
	accepted *accepted
}

// accepted is a listener that keeps the connections it accepted.
type accepted struct {
	net.Listener
	conns
}

func (l *accepted) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.add(c)
	}
	return c, err
}

// conns are connections a test can cut, as a failed network would.
type conns struct {
	mu   sync.Mutex
	list []net.Conn
}

func (cs *conns) add(c net.Conn) {
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()
}

// cut closes every connection added so far and reports how many there were.
func (cs *conns) cut() int {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for _, c := range list {
		_ = c.Close()
	}
	return len(list)
}

func startServer(t *testing.T, opts ...func(*server.Config)) *env {
	t.Helper()
	cfg := server.Config{DataDir: t.TempDir(), Token: testToken}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(srv.Handler())
	e := &env{t: t, srv: srv, ts: ts, accepted: &accepted{Listener: ts.Listener}, dir: t.TempDir()}
	ts.Listener = e.accepted
	ts.Start()
	e.c = New(e.ts.URL, testToken)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		assert.NoError(t, srv.Shutdown(ctx))
		e.ts.Close()
		e.c.CloseIdleConnections()
	})
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) workspace() proto.Workspace {
	e.t.Helper()
	ws, created, err := e.c.CreateWorkspace(ctxT(e.t), e.dir)
	require.NoError(e.t, err)
	require.True(e.t, created)
	return ws
}

func (e *env) session(wsID string) proto.Session {
	e.t.Helper()
	s, err := e.c.CreateSession(ctxT(e.t), wsID, proto.CreateSessionRequest{Title: "test"})
	require.NoError(e.t, err)
	return s
}

// stream opens an event stream of c that the test closes at its end.
func openStream(t *testing.T, c *Client, wsID string, opts EventsOptions) *EventStream {
	t.Helper()
	s, err := c.Events(context.Background(), wsID, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// next reads one event or fails the test after wait.
func next(t *testing.T, s *EventStream) proto.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ev, err := s.Next(ctx)
	require.NoError(t, err)
	return ev
}

// until reads up to the first event of type typ and returns it with the
// events before it.
func until(t *testing.T, s *EventStream, typ string) (proto.Event, []proto.Event) {
	t.Helper()
	var seen []proto.Event
	for {
		ev := next(t, s)
		if ev.Type == typ {
			return ev, seen
		}
		seen = append(seen, ev)
	}
}

// killer is a dialer whose connections a test can cut from the client side,
// as a flaky network would.
type killer struct{ conns }

func (k *killer) client() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				k.add(c)
			}
			return c, err
		},
	}}
}

// kill closes every connection dialed so far and reports how many there were.
func (k *killer) kill() int { return k.cut() }
