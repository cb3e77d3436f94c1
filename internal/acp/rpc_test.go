package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pipePeer is a peer served over pipes, and the other side's ends.
type pipePeer struct {
	p    *peer
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
	stop context.CancelFunc
}

func newPipePeer(t *testing.T, methods map[string]handler) *pipePeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	pp := &pipePeer{p: newPeer(outW, methods, nil), in: inW, out: bufio.NewReader(outR), done: make(chan error, 1), stop: cancel}
	go func() { pp.done <- pp.p.serve(ctx, inR); outW.Close() }()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-pp.done:
		case <-time.After(5 * time.Second):
			t.Error("the peer did not stop")
		}
	})
	return pp
}

func (pp *pipePeer) send(t *testing.T, line string) {
	_, err := pp.in.Write([]byte(line + "\n"))
	require.NoError(t, err)
}

func (pp *pipePeer) read(t *testing.T) map[string]json.RawMessage {
	line, err := pp.out.ReadString('\n')
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(line), &m), "every line is JSON: %q", line)
	return m
}

func errorCode(t *testing.T, m map[string]json.RawMessage) int {
	var e rpcError
	require.NoError(t, json.Unmarshal(m["error"], &e))
	return e.Code
}

// A line that is not JSON is -32700 with id null; one that is JSON but no
// JSON-RPC message -32600; an unknown method -32601; and the connection
// goes on after each.
func TestPeerRefusesBadLinesAndGoesOn(t *testing.T) {
	pp := newPipePeer(t, map[string]handler{
		"echo": func(_ context.Context, p json.RawMessage) (any, error) { return p, nil },
	})
	pp.send(t, "not json at all {")
	m := pp.read(t)
	assert.Equal(t, "null", string(m["id"]))
	assert.Equal(t, -32700, errorCode(t, m))

	pp.send(t, `[{"jsonrpc":"2.0","id":1,"method":"echo"}]`)
	m = pp.read(t)
	assert.Equal(t, "null", string(m["id"]))
	assert.Equal(t, -32600, errorCode(t, m))

	pp.send(t, `{"jsonrpc":"2.0","id":"a","method":"nope"}`)
	m = pp.read(t)
	assert.Equal(t, `"a"`, string(m["id"]))
	assert.Equal(t, -32601, errorCode(t, m))

	pp.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"x":1}}`)
	m = pp.read(t)
	assert.Equal(t, "2", string(m["id"]))
	assert.JSONEq(t, `{"x":1}`, string(m["result"]))
}

// A line longer than the bound is refused as a parse error and skipped
// whole: the next line is served.
func TestPeerRefusesAnOverlongLine(t *testing.T) {
	pp := newPipePeer(t, map[string]handler{
		"echo": func(_ context.Context, p json.RawMessage) (any, error) { return "ok", nil },
	})
	go func() {
		_, _ = pp.in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":"` + strings.Repeat("x", maxLine) + "\"}\n"))
		_, _ = pp.in.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"echo"}` + "\n"))
	}()
	m := pp.read(t)
	assert.Equal(t, "null", string(m["id"]))
	assert.Equal(t, -32700, errorCode(t, m))
	m = pp.read(t)
	assert.Equal(t, "2", string(m["id"]))
}

// The other side's $/cancel_request ends the context of the request it
// names.
func TestPeerCancelRequestEndsTheRequest(t *testing.T) {
	started := make(chan struct{})
	pp := newPipePeer(t, map[string]handler{
		"wait": func(ctx context.Context, _ json.RawMessage) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, &rpcError{Code: -32800, Message: "cancelled"}
		},
	})
	pp.send(t, `{"jsonrpc":"2.0","id":7,"method":"wait"}`)
	<-started
	pp.send(t, `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	m := pp.read(t)
	assert.Equal(t, "7", string(m["id"]))
	assert.Equal(t, -32800, errorCode(t, m))
}

// A call of ours withdrawn (its context ended) sends $/cancel_request, and
// its late answer is dropped.
func TestPeerWithdrawnCallSendsCancelRequest(t *testing.T) {
	pp := newPipePeer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := pp.p.call(ctx, "session/request_permission", map[string]any{"x": 1})
		errc <- err
	}()
	m := pp.read(t)
	assert.Equal(t, `"session/request_permission"`, string(m["method"]))
	id := string(m["id"])
	cancel()
	m = pp.read(t)
	assert.Equal(t, `"$/cancel_request"`, string(m["method"]))
	assert.JSONEq(t, `{"requestId":`+id+`}`, string(m["params"]))
	assert.ErrorIs(t, <-errc, context.Canceled)
	// The late answer changes nothing, and the connection goes on.
	pp.send(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"outcome":{"outcome":"selected","optionId":"approve_once"}}}`)
	res := make(chan json.RawMessage, 1)
	go func() {
		r, _ := pp.p.call(context.Background(), "ping", nil)
		res <- r
	}()
	m = pp.read(t)
	pp.send(t, `{"jsonrpc":"2.0","id":`+string(m["id"])+`,"result":"pong"}`)
	assert.Equal(t, `"pong"`, string(<-res))
}
