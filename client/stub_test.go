package client

// The server does not implement resume, model, pending, permissions and
// tool-calls yet, so these tests check the SDK's side of them against a stub:
// method, path, headers and body as the contract gives them, and the decoding
// of the contract's answers. The stream tests here script the server's side
// frame by frame to reach cases a real server makes hard to hit on demand.

import (
	"context"
	"encoding/json"
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
	stubRID = "33333333-3333-4333-8333-333333333333"
	stubCID = "44444444-4444-4444-8444-444444444444"
)

// seen is one request as the stub got it.
type seen struct {
	method, path, query string
	auth, contentType   string
	body                string
}

// stub answers every request with status and answer and records it.
func stub(t *testing.T, status int, answer string) (*Client, func() seen) {
	t.Helper()
	var mu sync.Mutex
	var last seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), body: string(b)}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	c := New(ts.URL, testToken, WithClientID(stubCID))
	t.Cleanup(func() {
		ts.Close()
		c.CloseIdleConnections()
	})
	return c, func() seen {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

const stubSession = `{"id":"` + stubSID + `","workspace_id":"` + stubWS + `","title":"t","model":"openai/gpt-4.1",
	"reasoning_effort":"high","created_at":"2025-01-02T03:04:05.000006Z","updated_at":"2025-01-02T03:04:05.000006Z",
	"message_count":2,"busy":true,"queued":0,"attached_clients":1,"context":{"cwd":"/w"},"future_field":1}`

const stubPending = `{"permissions":[{"request_id":"` + stubRID + `","session_id":"` + stubSID + `","run_id":"r1",
	"tool_call_id":"call_0","tool_name":"bash","kind":"shell","summary":"run ls","details":{"command":"ls"}}],
	"tool_calls":[{"request_id":"r2","session_id":"` + stubSID + `","run_id":"r1","tool_call_id":"call_1",
	"tool_name":"lookup","arguments":{"q":1},"owner_client_ids":["` + stubCID + `"]}]}`

func checkPending(t *testing.T, p PendingWork) {
	t.Helper()
	require.Len(t, p.Permissions, 1)
	assert.Equal(t, PermissionRequest{RequestID: stubRID, SessionID: stubSID, RunID: "r1", ToolCallID: "call_0",
		ToolName: "bash", Kind: PermissionKindShell, Summary: "run ls", Details: json.RawMessage(`{"command":"ls"}`)}, p.Permissions[0])
	require.Len(t, p.ToolCalls, 1)
	assert.Equal(t, ToolCallRequest{RequestID: "r2", SessionID: stubSID, RunID: "r1", ToolCallID: "call_1",
		ToolName: "lookup", Arguments: json.RawMessage(`{"q":1}`), OwnerClientIDs: []string{stubCID}}, p.ToolCalls[0])
}

func checkSeen(t *testing.T, got seen, method, path, body string) {
	t.Helper()
	assert.Equal(t, method, got.method)
	assert.Equal(t, path, got.path)
	assert.Equal(t, "Bearer "+testToken, got.auth)
	if body == "" {
		assert.Empty(t, got.body)
		assert.Empty(t, got.contentType)
		return
	}
	assert.Equal(t, "application/json", got.contentType)
	assert.JSONEq(t, body, got.body)
}

func TestResumeRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, `{"session":`+stubSession+`,"pending":`+stubPending+`}`)
	out, err := c.Resume(context.Background(), stubWS, stubSID, ResumeRequest{
		Tools:    []proto.ToolSpec{{Name: "lookup", Description: "find", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Provider: &proto.Provider{Type: "openai", APIKey: "k"},
	})
	require.NoError(t, err)
	checkSeen(t, last(), "POST", "/v1/workspaces/"+stubWS+"/sessions/"+stubSID+"/resume",
		`{"client_id":"`+stubCID+`","continue_pending_work":false,
		  "tools":[{"name":"lookup","description":"find","parameters":{"type":"object"}}],
		  "provider":{"type":"openai","api_key":"k"}}`)
	assert.Equal(t, stubSID, out.Session.ID)
	assert.True(t, out.Session.Busy)
	checkPending(t, out.Pending)

	// A caller's own client_id and a true flag are sent as given.
	_, err = c.Resume(context.Background(), stubWS, stubSID, ResumeRequest{ClientID: stubRID, ContinuePendingWork: true})
	require.NoError(t, err)
	assert.JSONEq(t, `{"client_id":"`+stubRID+`","continue_pending_work":true}`, last().body)
}

func TestSetModelRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, stubSession)
	s, err := c.SetModel(context.Background(), stubWS, stubSID, SetModelRequest{Model: "openai/gpt-4.1", ReasoningEffort: "high"})
	require.NoError(t, err)
	checkSeen(t, last(), "PUT", "/v1/workspaces/"+stubWS+"/sessions/"+stubSID+"/model",
		`{"model":"openai/gpt-4.1","reasoning_effort":"high"}`)
	assert.Equal(t, "openai/gpt-4.1", s.Model)
	assert.Equal(t, "high", s.ReasoningEffort)
	assert.Equal(t, "/w", s.Context.Cwd)

	_, err = c.SetModel(context.Background(), stubWS, stubSID, SetModelRequest{Model: "echo"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"echo"}`, last().body)
}

func TestPendingRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, stubPending)
	p, err := c.Pending(context.Background(), stubWS, stubSID)
	require.NoError(t, err)
	checkSeen(t, last(), "GET", "/v1/workspaces/"+stubWS+"/sessions/"+stubSID+"/pending", "")
	checkPending(t, p)
}

func TestListPermissionsRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, stubPending) // "permissions" is the list's key too
	perms, err := c.ListPermissions(context.Background(), stubWS)
	require.NoError(t, err)
	checkSeen(t, last(), "GET", "/v1/workspaces/"+stubWS+"/permissions", "")
	require.Len(t, perms, 1)
	assert.Equal(t, stubRID, perms[0].RequestID)
}

func TestAnswerPermissionRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, `{"resolved":true,"result":"denied_by_user"}`)
	res, err := c.AnswerPermission(context.Background(), stubWS, stubRID, PermissionDecision{Decision: DecisionReject, Feedback: "not now"})
	require.NoError(t, err)
	checkSeen(t, last(), "POST", "/v1/workspaces/"+stubWS+"/permissions/"+stubRID,
		`{"client_id":"`+stubCID+`","decision":"reject","feedback":"not now"}`)
	assert.Equal(t, PermissionResolution{Resolved: true, Result: PermissionDeniedByUser}, res)

	_, err = c.AnswerPermission(context.Background(), stubWS, stubRID, PermissionDecision{Decision: DecisionApproveOnce})
	require.NoError(t, err)
	assert.JSONEq(t, `{"client_id":"`+stubCID+`","decision":"approve_once"}`, last().body)
}

func TestAnswerToolCallRequest(t *testing.T) {
	c, last := stub(t, http.StatusOK, `{"resolved":true}`)
	res, err := c.AnswerToolCall(context.Background(), stubWS, stubRID, ToolResult(""))
	require.NoError(t, err)
	assert.True(t, res.Resolved)
	// An empty result is still a result: it must be sent.
	checkSeen(t, last(), "POST", "/v1/workspaces/"+stubWS+"/tool-calls/"+stubRID,
		`{"client_id":"`+stubCID+`","result":""}`)

	_, err = c.AnswerToolCall(context.Background(), stubWS, stubRID, ToolError("boom"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"client_id":"`+stubCID+`","error":"boom"}`, last().body)
}

func TestAlreadyResolvedIsTyped(t *testing.T) {
	c, _ := stub(t, http.StatusConflict, `{"error":{"code":"already_resolved","message":"request was answered by another client"}}`)
	_, err := c.AnswerToolCall(context.Background(), stubWS, stubRID, ToolResult("x"))
	assert.True(t, IsCode(err, proto.CodeAlreadyResolved), "%v", err)
	_, err = c.AnswerPermission(context.Background(), stubWS, stubRID, PermissionDecision{Decision: DecisionApproveSession})
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, APIError{Status: 409, Code: "already_resolved", Message: "request was answered by another client"}, *apiErr)
	assert.Equal(t, "tandem: already_resolved (HTTP 409): request was answered by another client", err.Error())
}

func TestErrorWithoutTheContractBody(t *testing.T) {
	c, _ := stub(t, http.StatusBadGateway, "<html>\n<body>upstream   down</body></html>")
	_, err := c.Health(context.Background())
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusBadGateway, apiErr.Status)
	assert.Empty(t, apiErr.Code)
	assert.Equal(t, "Bad Gateway: <html> <body>upstream down</body></html>", apiErr.Message)
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
	c, _ := stub(t, http.StatusOK, `{}`)
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
