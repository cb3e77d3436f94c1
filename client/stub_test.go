package client

// These tests script the server's side to reach what a real server does not
// do on demand: answers that are not the contract's, and event streams cut
// frame by frame. Everything else is tested against the real server.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

const (
	stubWS  = "11111111-1111-4111-8111-111111111111"
	stubSID = "22222222-2222-4222-8222-222222222222"
	stubCID = "44444444-4444-4444-8444-444444444444"
)

// stub answers every request with status and answer.
func stub(t *testing.T, status int, answer string) *Client {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	c := New(ts.URL, testToken, WithClientID(stubCID))
	t.Cleanup(func() {
		ts.Close()
		c.CloseIdleConnections()
	})
	return c
}

func TestErrorWithoutTheContractBody(t *testing.T) {
	c := stub(t, http.StatusBadGateway, "<html>\n<body>upstream   down</body></html>")
	_, err := c.Health(context.Background())
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadGateway, apiErr.Status)
	assert.Empty(t, apiErr.Code)
	assert.Equal(t, "Bad Gateway: <html> <body>upstream down</body></html>", apiErr.Message)
	assert.Equal(t, "tandem: HTTP 502: Bad Gateway: <html> <body>upstream down</body></html>", err.Error())
	assert.False(t, IsCode(err, ""), "an empty code matches no code")
}

// sseStub serves scripted event streams: conns[i] serves the i-th connection
// and returns when it wants the connection to end.
type sseStub struct {
	ts    *httptest.Server
	n     atomic.Int32
	mu    sync.Mutex
	lasts []string // Last-Event-ID of each connection
}

func newSSEStub(t *testing.T, conns ...func(w http.ResponseWriter, r *http.Request)) (*sseStub, *Client) {
	t.Helper()
	s := &sseStub{}
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(s.n.Add(1)) - 1
		s.mu.Lock()
		s.lasts = append(s.lasts, r.Header.Get("Last-Event-ID"))
		s.mu.Unlock()
		if i >= len(conns) {
			// Out of script: stay open, quietly, until the client leaves.
			sseHeaders(w)
			hold(w, r)
			return
		}
		conns[i](w, r)
	}))
	c := New(s.ts.URL, testToken, WithClientID(stubCID))
	t.Cleanup(func() {
		s.ts.Close()
		c.CloseIdleConnections()
	})
	return s, c
}

func (s *sseStub) lastEventIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lasts...)
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// hold sends what was written and keeps the connection open until the
// client leaves.
func hold(w http.ResponseWriter, r *http.Request) {
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func opened(w io.Writer, head int64) {
	fmt.Fprintf(w, "event: stream.opened\ndata: {\"client_id\":%q,\"workspace_id\":%q,\"head_seq\":%d}\n\n", stubCID, stubWS, head)
}

func event(w io.Writer, seq int64, typ string, ephemeral bool) {
	fmt.Fprintf(w, "id: %d\nevent: %s\ndata: {\"seq\":%d,\"type\":%q,\"workspace_id\":%q,\"time\":\"2025-01-02T03:04:05.000006Z\",\"ephemeral\":%t,\"data\":{}}\n\n",
		seq, typ, seq, typ, stubWS, ephemeral)
}

// collect reads n events, failing the test on an error.
func collect(t *testing.T, s *EventStream, n int) []proto.Event {
	t.Helper()
	var out []proto.Event
	for range n {
		out = append(out, next(t, s))
	}
	return out
}

func summary(evs []proto.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Seq == 0 {
			out = append(out, ev.Type)
		} else {
			out = append(out, fmt.Sprint(ev.Seq))
		}
	}
	return out
}

func TestStreamDropsReplayedDuplicatesAndCutFrames(t *testing.T) {
	stub, c := newSSEStub(t,
		func(w http.ResponseWriter, r *http.Request) {
			assert.Equal(t, "Bearer "+testToken, r.Header.Get("Authorization"))
			assert.Equal(t, "text/event-stream", r.Header.Get("Accept"))
			assert.Equal(t, stubCID, r.URL.Query().Get("client_id"))
			assert.Equal(t, stubSID, r.URL.Query().Get("session_id"))
			assert.Empty(t, r.URL.Query().Get("access_token"), "the token stays out of URLs")
			sseHeaders(w)
			opened(w, 10)
			fmt.Fprint(w, ": ping\n\n")
			event(w, 11, "run.started", false)
			event(w, 12, "message.delta", true)
			event(w, 13, "message.created", false)
			fmt.Fprint(w, "event: stream.evicted\ndata: {\"reason\":\"slow\"}\n\n")
			// A frame cut by the disconnect: no blank line ends it.
			fmt.Fprint(w, "id: 14\nevent: message.updated\ndata: {\"seq\":14}\n")
		},
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 15)
			// A replay that overlaps what the client has.
			event(w, 11, "run.started", false)
			event(w, 13, "message.created", false)
			event(w, 14, "message.updated", false)
			event(w, 15, "run.completed", false)
			hold(w, r)
		},
	)
	s := openStream(t, c, stubWS, EventsOptions{SessionID: stubSID})
	got := collect(t, s, 8)
	assert.Equal(t, []string{"stream.opened", "11", "12", "13", "stream.evicted", "stream.opened", "14", "15"}, summary(got))
	assert.True(t, got[2].Ephemeral)
	assert.Equal(t, stubWS, got[4].WorkspaceID, "control frames carry the stream's workspace")
	assert.JSONEq(t, `{"reason":"slow"}`, string(got[4].Data))
	assert.Equal(t, int64(15), s.LastSeq())
	assert.Equal(t, []string{"", "13"}, stub.lastEventIDs())
}

func TestStreamResumesFromHeadWhenCutBeforeAnyEvent(t *testing.T) {
	stub, c := newSSEStub(t,
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 7)
		},
		func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"code":"shutting_down","message":"server is shutting down"}}`, http.StatusServiceUnavailable)
		},
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 9)
			event(w, 8, "session.log", false)
			event(w, 9, "session.log", false)
			hold(w, r)
		},
	)
	s := openStream(t, c, stubWS, EventsOptions{})
	got := collect(t, s, 4)
	assert.Equal(t, []string{"stream.opened", "stream.opened", "8", "9"}, summary(got))
	assert.Equal(t, []string{"", "7", "7"}, stub.lastEventIDs(), "a 503 is retried from the same place")
}

func TestStreamEndsOnAPermanentReconnectError(t *testing.T) {
	_, c := newSSEStub(t,
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 3)
			event(w, 4, "session.log", false)
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"session_not_found","message":"no such session"}}`)
		},
	)
	s := openStream(t, c, stubWS, EventsOptions{})
	assert.Equal(t, []string{"stream.opened", "4"}, summary(collect(t, s, 2)))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := s.Next(ctx)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "%v", err)
	_, err = s.Next(ctx)
	assert.True(t, IsCode(err, proto.CodeSessionNotFound), "the end is sticky: %v", err)
}

func TestIdleWatchdogReopensASilentConnection(t *testing.T) {
	stub, c := newSSEStub(t,
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 5)
			w.(http.Flusher).Flush()
			hold(w, r) // silent: no heartbeat
		},
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 5)
			event(w, 6, "session.log", false)
			hold(w, r)
		},
	)
	s := openStream(t, c, stubWS, EventsOptions{IdleTimeout: 100 * time.Millisecond})
	assert.Equal(t, []string{"stream.opened", "stream.opened", "6"}, summary(collect(t, s, 3)))
	assert.Equal(t, []string{"", "5"}, stub.lastEventIDs())
}

func TestEventsRefusesWhatIsNotAnEventStream(t *testing.T) {
	c := stub(t, http.StatusOK, `{}`)
	_, err := c.Events(context.Background(), stubWS, EventsOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an event stream")
}

func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	prevMax := time.Duration(0)
	for n := 1; n <= 20; n++ {
		ceil := min(minBackoff<<min(n-1, 10), maxBackoff)
		for range 50 {
			d := backoff(n)
			require.GreaterOrEqual(t, d, ceil/2, "attempt %d", n)
			require.LessOrEqual(t, d, ceil, "attempt %d", n)
		}
		require.GreaterOrEqual(t, ceil, prevMax)
		prevMax = ceil
	}
	assert.Equal(t, maxBackoff, prevMax)
}

func TestPermanentErrors(t *testing.T) {
	for status, want := range map[int]bool{400: true, 401: true, 404: true, 408: false, 409: false, 429: false, 500: false, 503: false} {
		assert.Equal(t, want, permanent(&APIError{Status: status}), "status %d", status)
	}
	assert.False(t, permanent(io.EOF))
	assert.False(t, permanent(nil))
}
