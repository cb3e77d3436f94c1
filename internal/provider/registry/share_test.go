package registry_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/registry"
)

// countingServer is a model server for both flavors that counts the
// connections it accepts and closes.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountingServer(t *testing.T) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/v1/messages") {
			for _, e := range []string{
				`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`,
				`{"type":"message_stop"}`,
			} {
				fmt.Fprintf(w, "event: x\ndata: %s\n\n", e)
			}
			return
		}
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\ndata: [DONE]\n\n")
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func streamOnce(t *testing.T, p provider.Provider) {
	t.Helper()
	resp, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Text)
}

// Providers built one after the other for the same settings, as runs build
// them, share one connection, whatever their API keys.
func TestProvidersShareConnections(t *testing.T) {
	for _, typ := range []string{"openai", "azure", "anthropic"} {
		t.Run(typ, func(t *testing.T) {
			srv := newCountingServer(t)
			reg := registry.New()
			defer reg.Close()
			for i := range 50 {
				p, err := reg.Provider(provider.Config{Type: typ, BaseURL: srv.URL, APIKey: fmt.Sprintf("key-%d", i%3)})
				require.NoError(t, err)
				streamOnce(t, p)
			}
			require.EqualValues(t, 1, srv.opened.Load(), "50 requests, one after the other, need one connection")
		})
	}
}

// Concurrent requests open a connection each, and no more once they are
// done: the connections wait idle for the next ones. A connection goes back
// to the pool once the transport has read its response's end, which can
// come after the provider returned (it stops at [DONE]): a round may then
// open a few more than parallel, never one per request (40).
func TestConcurrentRequestsReuseTheirConnections(t *testing.T) {
	srv := newCountingServer(t)
	reg := registry.New()
	defer reg.Close()
	const parallel = 8
	for range 5 {
		done := make(chan error, parallel)
		for range parallel {
			go func() {
				p, err := reg.Provider(provider.Config{Type: "openai", BaseURL: srv.URL})
				if err == nil {
					_, err = p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
				}
				done <- err
			}()
		}
		for range parallel {
			require.NoError(t, <-done)
		}
	}
	require.LessOrEqual(t, srv.opened.Load(), int64(2*parallel))
}

// Past its bound of clients, the registry drops the least recently used and
// closes its idle connections; Close closes the rest.
func TestClientsAreBounded(t *testing.T) {
	reg := registry.New()
	first := newCountingServer(t)
	p, err := reg.Provider(provider.Config{Type: "openai", BaseURL: first.URL})
	require.NoError(t, err)
	streamOnce(t, p)
	require.Zero(t, first.closed.Load(), "an idle connection stays for the next request")

	var last *countingServer
	for range 32 {
		last = newCountingServer(t)
		p, err := reg.Provider(provider.Config{Type: "openai", BaseURL: last.URL})
		require.NoError(t, err)
		streamOnce(t, p)
	}
	require.Eventually(t, func() bool { return first.closed.Load() == 1 }, 5*time.Second, time.Millisecond,
		"the least recently used client's idle connection is closed")
	require.Zero(t, last.closed.Load())

	reg.Close()
	require.Eventually(t, func() bool { return last.closed.Load() == 1 }, 5*time.Second, time.Millisecond,
		"Close closes idle connections")
}

// Providers built and used from many goroutines at once, for more settings
// than the registry keeps clients for, all work; the race detector watches
// the registry's bookkeeping.
func TestRegistryUnderConcurrentUse(t *testing.T) {
	srv := newCountingServer(t)
	reg := registry.New()
	defer reg.Close()
	const workers, each, settings = 8, 60, 40 // 40 settings: more than the registry keeps
	errs := make(chan error, workers*each)
	for w := range workers {
		go func() {
			for i := range each {
				typ := []string{"openai", "anthropic"}[(w+i)%2]
				base := fmt.Sprintf("%s/p%d", srv.URL, (w*each+i)%settings)
				p, err := reg.Provider(provider.Config{Type: typ, BaseURL: base, APIKey: "k"})
				if err == nil {
					_, err = p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
				}
				errs <- err
			}
		}()
	}
	for range workers * each {
		require.NoError(t, <-errs)
	}
	require.Less(t, srv.opened.Load(), int64(workers*each), "connections are reused even while clients come and go")
}
