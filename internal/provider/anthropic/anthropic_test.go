package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/anthropic"
)

const testKey = "sk-ant-test-secret-0123456789"

// ev is one SSE event as the Messages API sends it: "event: TYPE" and
// "data: {json}" whose own "type" repeats TYPE.
type ev struct{ typ, data string }

func writeEvents(w http.ResponseWriter, events []ev) {
	for _, e := range events {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e.typ, e.data)
		w.(http.Flusher).Flush()
	}
}

func sse(events ...ev) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		writeEvents(w, events)
	}
}

func messageStart() ev {
	return ev{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`}
}

func blockStart(i int, block string) ev {
	return ev{"content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, block)}
}

func delta(i int, d string) ev {
	return ev{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, d)}
}

func textDelta(i int, s string) ev {
	b, _ := json.Marshal(s)
	return delta(i, `{"type":"text_delta","text":`+string(b)+`}`)
}

func blockStop(i int) ev {
	return ev{"content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i)}
}

func messageDelta(stop string) ev {
	return ev{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":20}}`}
}

func messageStop() ev { return ev{"message_stop", `{"type":"message_stop"}`} }

func ping() ev { return ev{"ping", `{"type":"ping"}`} }

func newProvider(t *testing.T, cfg provider.Config) *anthropic.Provider {
	t.Helper()
	cfg.Type = "anthropic"
	p, err := anthropic.New(cfg)
	require.NoError(t, err)
	return p
}

func collect(deltas *[]provider.Delta) func(provider.Delta) {
	return func(d provider.Delta) { *deltas = append(*deltas, d) }
}

func userHi() []provider.Message { return []provider.Message{{Role: "user", Text: "hi"}} }

func TestStreamTextDeltas(t *testing.T) {
	srv := providertest.New(t, sse(
		messageStart(),
		blockStart(0, `{"type":"text","text":""}`),
		ping(),
		textDelta(0, "Hel"),
		textDelta(0, "lo"),
		textDelta(0, " world"),
		blockStop(0),
		messageDelta("end_turn"),
		messageStop(),
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})

	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{
		Model:           "claude-sonnet-4",
		ReasoningEffort: "high",
		System:          "You are Tandem.",
		Messages:        userHi(),
		Tools: []provider.Tool{{
			Name:        "view",
			Description: "Read a file",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}},
	}, collect(&deltas))
	require.NoError(t, err)
	require.Equal(t, []provider.Delta{{Kind: "text", Text: "Hel"}, {Kind: "text", Text: "lo"}, {Kind: "text", Text: " world"}}, deltas)
	require.Equal(t, "Hello world", resp.Text)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)

	req := srv.Last(t)
	require.Equal(t, "POST", req.Method)
	require.Equal(t, "/v1/messages", req.Path)
	require.Equal(t, testKey, req.Header.Get("X-Api-Key"))
	require.NotEmpty(t, req.Header.Get("Anthropic-Version"))
	require.Equal(t, "claude-sonnet-4", req.Body["model"])
	require.Equal(t, true, req.Body["stream"])
	require.EqualValues(t, anthropic.DefaultMaxTokens, req.Body["max_tokens"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "You are Tandem."}}, req.Body["system"])
	require.NotContains(t, req.Body, "thinking", "reasoning effort is not passed to anthropic")
	msgs := req.Body["messages"].([]any)
	require.Len(t, msgs, 1)
	require.Equal(t, "user", msgs[0].(map[string]any)["role"])

	tools := req.Body["tools"].([]any)
	require.Len(t, tools, 1)
	tool := tools[0].(map[string]any)
	require.Equal(t, "view", tool["name"])
	require.Equal(t, "Read a file", tool["description"])
	schema := tool["input_schema"].(map[string]any)
	require.Equal(t, "object", schema["type"])
	require.Equal(t, []any{"path"}, schema["required"])
	require.Equal(t, false, schema["additionalProperties"])
	require.Contains(t, schema["properties"], "path")
}

func TestStreamToolUseFragments(t *testing.T) {
	srv := providertest.New(t, sse(
		messageStart(),
		blockStart(0, `{"type":"text","text":""}`),
		textDelta(0, "I'll write it."),
		blockStop(0),
		blockStart(1, `{"type":"tool_use","id":"toolu_01","name":"write","input":{}}`),
		delta(1, `{"type":"input_json_delta","partial_json":""}`),
		delta(1, `{"type":"input_json_delta","partial_json":"{\"path\": \"a"}`),
		delta(1, `{"type":"input_json_delta","partial_json":".txt\", \"content\""}`),
		delta(1, `{"type":"input_json_delta","partial_json":": \"hi\"}"}`),
		blockStop(1),
		blockStart(2, `{"type":"tool_use","id":"toolu_02","name":"ls","input":{}}`),
		blockStop(2),
		messageDelta("tool_use"),
		messageStop(),
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, collect(&deltas))
	require.NoError(t, err)
	require.Equal(t, []provider.Delta{{Kind: "text", Text: "I'll write it."}}, deltas)
	require.Equal(t, provider.FinishToolUse, resp.FinishReason)
	require.Len(t, resp.ToolCalls, 2)
	require.Equal(t, "toolu_01", resp.ToolCalls[0].ID)
	require.Equal(t, "write", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"path":"a.txt","content":"hi"}`, string(resp.ToolCalls[0].Arguments))
	require.Equal(t, "toolu_02", resp.ToolCalls[1].ID)
	require.JSONEq(t, `{}`, string(resp.ToolCalls[1].Arguments))
}

func TestThinkingDeltas(t *testing.T) {
	srv := providertest.New(t, sse(
		messageStart(),
		blockStart(0, `{"type":"thinking","thinking":"","signature":""}`),
		delta(0, `{"type":"thinking_delta","thinking":"Let me "}`),
		delta(0, `{"type":"thinking_delta","thinking":"think."}`),
		delta(0, `{"type":"signature_delta","signature":"EqQBCgIYAhIM"}`),
		blockStop(0),
		blockStart(1, `{"type":"text","text":""}`),
		textDelta(1, "Answer"),
		blockStop(1),
		messageDelta("max_tokens"),
		messageStop(),
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", MaxTokens: 100, Messages: userHi()}, collect(&deltas))
	require.NoError(t, err)
	require.Equal(t, []provider.Delta{
		{Kind: "reasoning", Text: "Let me "},
		{Kind: "reasoning", Text: "think."},
		{Kind: "text", Text: "Answer"},
	}, deltas)
	require.Equal(t, "Let me think.", resp.Reasoning)
	require.Equal(t, "Answer", resp.Text)
	require.Equal(t, provider.FinishMaxTokens, resp.FinishReason)
	require.EqualValues(t, 100, srv.Last(t).Body["max_tokens"])
}

func TestRequestConversion(t *testing.T) {
	srv := providertest.New(t, sse(messageStart(), messageDelta("end_turn"), messageStop()))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	png := []byte{0x89, 'P', 'N', 'G', 1, 2, 3}
	_, err := p.Stream(context.Background(), provider.Request{
		Model: "claude-sonnet-4",
		Messages: []provider.Message{
			{Role: "user", Text: "what is this?", Images: []provider.Image{{MimeType: "image/png", Data: png}}},
			{Role: "assistant", Text: "Let me look.", ToolCalls: []provider.ToolCall{
				{ID: "toolu_1", Name: "view", Arguments: json.RawMessage(`{"path":"a.go"}`)},
				{ID: "toolu_2", Name: "ls"},
			}},
			{Role: "tool", ToolCallID: "toolu_1", ToolName: "view", Text: "package a"},
			{Role: "tool", ToolCallID: "toolu_2", ToolName: "ls", Text: "no such dir", IsError: true},
			{Role: "user", Text: "thanks"},
		},
	}, nil)
	require.NoError(t, err)

	req := srv.Last(t)
	require.Contains(t, req.RawBody, "iVBORwECAw==")
	msgs := req.Body["messages"].([]any)
	require.Len(t, msgs, 3, "tool results and the next user text merge into one user turn")

	user := msgs[0].(map[string]any)
	require.Equal(t, "user", user["role"])
	blocks := user["content"].([]any)
	img := blocks[0].(map[string]any)
	require.Equal(t, "image", img["type"])
	require.Equal(t, map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORwECAw=="}, img["source"])
	require.Equal(t, map[string]any{"type": "text", "text": "what is this?"}, blocks[1])

	asst := msgs[1].(map[string]any)
	require.Equal(t, "assistant", asst["role"])
	ab := asst["content"].([]any)
	require.Len(t, ab, 3)
	require.Equal(t, map[string]any{"type": "text", "text": "Let me look."}, ab[0])
	require.Equal(t, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "view", "input": map[string]any{"path": "a.go"}}, ab[1])
	require.Equal(t, map[string]any{"type": "tool_use", "id": "toolu_2", "name": "ls", "input": map[string]any{}}, ab[2])

	results := msgs[2].(map[string]any)
	require.Equal(t, "user", results["role"])
	rb := results["content"].([]any)
	require.Len(t, rb, 3)
	r1 := rb[0].(map[string]any)
	require.Equal(t, "tool_result", r1["type"])
	require.Equal(t, "toolu_1", r1["tool_use_id"])
	require.Equal(t, false, r1["is_error"])
	require.Equal(t, []any{map[string]any{"type": "text", "text": "package a"}}, r1["content"])
	r2 := rb[1].(map[string]any)
	require.Equal(t, "toolu_2", r2["tool_use_id"])
	require.Equal(t, true, r2["is_error"])
	require.Equal(t, map[string]any{"type": "text", "text": "thanks"}, rb[2])
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		status    int
		typ       string
		code      string
		retryable bool
	}{
		{401, "authentication_error", provider.CodeAuth, false},
		{403, "permission_error", provider.CodeAuth, false},
		{429, "rate_limit_error", provider.CodeRateLimited, true},
		{500, "api_error", provider.CodeUnavailable, true},
		{529, "overloaded_error", provider.CodeUnavailable, true},
		{400, "invalid_request_error", provider.CodeBadRequest, false},
		{404, "not_found_error", provider.CodeBadRequest, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":"bad x-api-key %s here"}}`, c.typ, testKey)
			})
			p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
			_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, nil)
			pe, ok := provider.AsError(err)
			require.True(t, ok, "want *provider.Error, got %T %v", err, err)
			require.Equal(t, c.code, pe.Code)
			require.Equal(t, c.status, pe.Status)
			require.Equal(t, c.retryable, pe.Retryable)
			require.Contains(t, pe.Message, "here")
			require.NotContains(t, err.Error(), testKey)
			require.Equal(t, 1, srv.Count(), "the SDK must not retry on its own")
		})
	}
}

func TestErrorEventInStream(t *testing.T) {
	srv := providertest.New(t, sse(
		messageStart(),
		blockStart(0, `{"type":"text","text":""}`),
		textDelta(0, "Hel"),
		ev{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.Contains(t, pe.Message, "Overloaded")
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	p := newProvider(t, provider.Config{BaseURL: "http://" + addr, APIKey: testKey})
	_, err = p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.NotContains(t, err.Error(), testKey)
}

func TestStreamCutMidway(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvents(w, []ev{messageStart(), blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Hel")})
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_blo")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-body
	})
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	var deltas []provider.Delta
	_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, collect(&deltas))
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.Equal(t, []provider.Delta{{Kind: "text", Text: "Hel"}}, deltas)
}

func TestStreamEndsWithoutMessageStop(t *testing.T) {
	srv := providertest.New(t, sse(messageStart(), blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Hel")))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
}

func TestCancelMidStream(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvents(w, []ev{messageStart(), blockStart(0, `{"type":"text","text":""}`), textDelta(0, "first")})
		select { // hang like a slow model
		case <-r.Context().Done():
		case <-release:
		}
	})
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas []provider.Delta
	start := time.Now()
	_, err := p.Stream(ctx, provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, func(d provider.Delta) {
		deltas = append(deltas, d)
		cancel()
	})
	require.ErrorIs(t, err, context.Canceled)
	_, isModelErr := provider.AsError(err)
	require.False(t, isModelErr)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Len(t, deltas, 1)
}

func TestIgnoresProcessEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-env-must-not-leak")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "tok-from-env-must-not-leak")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	srv := providertest.New(t, sse(messageStart(), messageDelta("end_turn"), messageStop()))
	p := newProvider(t, provider.Config{BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4", Messages: userHi()}, nil)
	require.NoError(t, err)
	for k, v := range srv.Last(t).Header {
		require.NotContains(t, strings.Join(v, ","), "from-env", k)
	}
}

func TestBadConfig(t *testing.T) {
	_, err := anthropic.New(provider.Config{Type: "anthropic", BaseURL: "api.anthropic.com"})
	require.Error(t, err)
	_, err = newProvider(t, provider.Config{BaseURL: "http://127.0.0.1:1"}).Stream(context.Background(), provider.Request{}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeBadRequest, pe.Code)
}
