package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// nopBackend is a Backend that knows no session; the dispatch tests need
// only the methods that do not reach Tandem.
type nopBackend struct{ Backend }

func (nopBackend) Workspaces(context.Context) ([]proto.Workspace, error) { return nil, nil }
func (nopBackend) Close()                                                {}

// rpcClient speaks the protocol's framing over one end of a pipe.
type rpcClient struct {
	t  *testing.T
	nc net.Conn
	fr *frameReader
}

func dial(t *testing.T, s *Server) *rpcClient {
	t.Helper()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.ServeConn(ctx, b)
	}()
	t.Cleanup(func() {
		cancel()
		a.Close()
		<-done
	})
	return &rpcClient{t: t, nc: a, fr: newFrameReader(a, 0)}
}

func (c *rpcClient) write(raw []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(appendFrame(nil, raw)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rpcClient) call(id int, method string, params any) map[string]any {
	c.t.Helper()
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	c.write(raw)
	return c.read()
}

func (c *rpcClient) read() map[string]any {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := c.fr.Read()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		c.t.Fatalf("answer %q is not JSON: %v", body, err)
	}
	return m
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	f, _ := e["code"].(float64)
	return int(f)
}

// newTestServer serves connections that must connect with token, or, with
// token "", connections that act as the process (stdio).
func newTestServer(token string) *Server {
	return NewServer(testConfig(token))
}

func testConfig(token string) Config {
	cfg := Config{Connect: func(string) (Backend, error) { return nopBackend{}, nil }}
	if token != "" {
		cfg.Connect = func(string) (Backend, error) {
			return nil, errors.New("a TCP connection acts as its token, never as the process")
		}
		cfg.Authenticate = func(_ context.Context, _, got string) (Backend, error) {
			if got != token {
				return nil, errors.New("not a Tandem token")
			}
			return nopBackend{}, nil
		}
	}
	return cfg
}

// whoBackend is a Backend that lists one workspace, named for the token it
// acts as.
type whoBackend struct {
	nopBackend
	who string
}

func (b whoBackend) Workspaces(context.Context) ([]proto.Workspace, error) {
	return []proto.Workspace{{ID: b.who, Path: "/" + b.who}}, nil
}

func (b whoBackend) Sessions(_ context.Context, wsID string) ([]proto.Session, error) {
	return []proto.Session{{ID: "session-of-" + b.who, WorkspaceID: wsID}}, nil
}

// Over TCP nothing is answered before connect, ping included, and a
// connection acts as the Tandem token it connected with: two connections
// with two tokens are two people.
func TestEveryRequestBeforeConnectIsRefusedAndTheTokenIsWhoActs(t *testing.T) {
	s := NewServer(Config{
		Connect: func(string) (Backend, error) { return whoBackend{who: "process-owner"}, nil },
		Authenticate: func(_ context.Context, _, token string) (Backend, error) {
			switch token {
			case "alice-secret":
				return whoBackend{who: "alice"}, nil
			case "bob-secret":
				return whoBackend{who: "bob"}, nil
			}
			return nil, errors.New("not a Tandem token")
		},
	})
	stranger := dial(t, s)
	for i, m := range []string{"session.list", "session.create", "ping", "session.getLastId", "session.send"} {
		if got := errorCode(stranger.call(i, m, map[string]any{})); got != codeInvalidRequest {
			t.Fatalf("%s before connect got code %d, want %d", m, got, codeInvalidRequest)
		}
	}
	for i, tok := range []any{"", "nope", nil, 7} {
		if got := errorCode(stranger.call(10+i, "connect", map[string]any{"token": tok})); got == 0 {
			t.Fatalf("connect with token %v succeeded", tok)
		}
	}
	if got := errorCode(stranger.call(20, "session.list", nil)); got != codeInvalidRequest {
		t.Fatalf("session.list after a failed connect got code %d", got)
	}
	for _, who := range []string{"alice", "bob"} {
		c := dial(t, s)
		if res := c.call(1, "connect", map[string]any{"token": who + "-secret"}); res["error"] != nil {
			t.Fatalf("connect as %s = %v", who, res)
		}
		res := c.call(2, "session.list", nil)
		raw, _ := json.Marshal(res["result"])
		if !strings.Contains(string(raw), "session-of-"+who) || strings.Contains(string(raw), "process-owner") {
			t.Fatalf("session.list of %s's connection = %s, want it to act as %s", who, raw, who)
		}
	}
}

func TestConnectHandshake(t *testing.T) {
	c := dial(t, newTestServer("secret"))
	if got := errorCode(c.call(1, "session.list", nil)); got != codeInvalidRequest {
		t.Fatalf("a call before connect got code %d, want %d", got, codeInvalidRequest)
	}
	if got := errorCode(c.call(2, "connect", map[string]any{"token": "wrong"})); got != codeInvalidRequest {
		t.Fatalf("connect with a wrong token got code %d, want %d", got, codeInvalidRequest)
	}
	res := c.call(3, "connect", map[string]any{"token": "secret"})
	r, _ := res["result"].(map[string]any)
	if r["ok"] != true || r["protocolVersion"] != float64(ProtocolVersion) {
		t.Fatalf("connect = %v, want ok and protocol version %d", res, ProtocolVersion)
	}
	if res["id"] != float64(3) {
		t.Fatalf("connect answered id %v, want 3", res["id"])
	}
	res = c.call(4, "session.list", nil)
	if res["error"] != nil {
		t.Fatalf("session.list after connect = %v", res)
	}
}

func TestUnknownMethodAndBadJSON(t *testing.T) {
	c := dial(t, newTestServer(""))
	if got := errorCode(c.call(1, "session.fleet.start", nil)); got != codeMethodNotFound {
		t.Fatalf("unknown method got code %d, want %d", got, codeMethodNotFound)
	}
	c.write([]byte(`{"jsonrpc":"2.0","id":2,`))
	if got := errorCode(c.read()); got != codeParse {
		t.Fatalf("invalid JSON got code %d, want %d", got, codeParse)
	}
	// A response to nothing is dropped; the connection still serves.
	c.write([]byte(`{"jsonrpc":"2.0","id":77,"result":{}}`))
	if res := c.call(3, "ping", map[string]any{"message": "hi"}); res["error"] != nil || res["id"] != float64(3) {
		t.Fatalf("ping after junk = %v", res)
	}
	if got := errorCode(c.call(4, "session.getMessages", map[string]any{"sessionId": "nope"})); got != codeInternal {
		t.Fatalf("getMessages of an unknown session got code %d, want %d", got, codeInternal)
	}
}

func TestBadFrameEndsOnlyItsConnection(t *testing.T) {
	s := newTestServer("")
	bad, good := dial(t, s), dial(t, s)
	_ = bad.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := bad.nc.Write([]byte("Content-Length: 999999999999\r\n\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := errorCode(bad.read()); got != codeParse {
		t.Fatalf("bad frame got code %d, want %d", got, codeParse)
	}
	if res := good.call(1, "ping", nil); res["error"] != nil {
		t.Fatalf("the other connection's ping = %v", res)
	}
}

// A client that never reads its answers stalls only its own connection.
func TestSlowReaderBlocksNoOther(t *testing.T) {
	s := newTestServer("")
	slow, fast := dial(t, s), dial(t, s)
	go func() {
		for i := range 5000 {
			raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
			_ = slow.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := slow.nc.Write(appendFrame(nil, raw)); err != nil {
				return
			}
		}
	}()
	for i := range 50 {
		if res := fast.call(i, "ping", nil); res["error"] != nil {
			t.Fatalf("ping %d = %v", i, res)
		}
	}
}

// Before a connection has connected with the token, it may send only small
// frames: nobody without the token makes the bridge hold a full frame.
func TestFramesBeforeConnectAreSmall(t *testing.T) {
	s := newTestServer("secret")
	big := func(id int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"message":"%s"}}`, id, strings.Repeat("x", 2*preConnectFrame))
	}
	c := dial(t, s)
	if res := c.call(1, "connect", map[string]any{"token": "secret"}); res["error"] != nil {
		t.Fatalf("connect = %v", res)
	}
	c.write(big(2))
	if res := c.read(); res["error"] != nil || res["id"] != float64(2) {
		t.Fatalf("a large ping after connect = %v", res)
	}
	stranger := dial(t, s)
	go func() {
		_ = stranger.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = stranger.nc.Write(appendFrame(nil, big(1)))
	}()
	if got := errorCode(stranger.read()); got != codeParse {
		t.Fatalf("a large frame before connect got code %d, want %d", got, codeParse)
	}
}

// A connection that does not connect with the token in time is closed.
func TestConnectionThatNeverConnectsIsClosed(t *testing.T) {
	cfg := testConfig("secret")
	cfg.ConnectWait = 100 * time.Millisecond
	s := NewServer(cfg)
	// The member's wait began first, so it is over once the stranger's is.
	member := dial(t, s)
	if res := member.call(1, "connect", map[string]any{"token": "secret"}); res["error"] != nil {
		t.Fatalf("connect = %v", res)
	}
	stranger := dial(t, s)
	_ = stranger.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stranger.fr.Read(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection that never connected: read = %v, want it closed", err)
	}
	if res := member.call(2, "ping", nil); res["error"] != nil {
		t.Fatalf("a connected connection after the wait: ping = %v", res)
	}
}
