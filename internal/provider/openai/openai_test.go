package openai_test

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
	"github.com/tandem-dev/tandem/internal/provider/openai"
)

const testKey = "sk-test-secret-0123456789"

// sse streams chunks the way the Chat Completions API does: one
// "data: {json}" event per chunk, flushed one by one, then "data: [DONE]".
func sse(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func chunk(delta string, finish string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4.1",` +
		`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fin + `}]}`
}

func newProvider(t testing.TB, cfg provider.Config) *openai.Provider {
	t.Helper()
	p, err := openai.New(cfg)
	require.NoError(t, err)
	return p
}

func collect(deltas *[]provider.Delta) func(provider.Delta) {
	return func(d provider.Delta) { *deltas = append(*deltas, d) }
}

func TestStreamTextDeltas(t *testing.T) {
	srv := providertest.New(t, sse(
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(`{"content":"Hel"}`, ""),
		chunk(`{"content":"lo"}`, ""),
		chunk(`{"content":" world"}`, ""),
		chunk(`{}`, "stop"),
	))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL + "/v1", APIKey: testKey})

	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{
		Model:    "gpt-4.1",
		System:   "You are Tandem.",
		Messages: []provider.Message{{Role: "user", Text: "hi"}},
		Tools: []provider.Tool{{
			Name:        "view",
			Description: "Read a file",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		}},
	}, collect(&deltas))
	require.NoError(t, err)
	require.Equal(t, []provider.Delta{{Kind: "text", Text: "Hel"}, {Kind: "text", Text: "lo"}, {Kind: "text", Text: " world"}}, deltas)
	require.Equal(t, "Hello world", resp.Text)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)
	require.Empty(t, resp.ToolCalls)

	req := srv.Last(t)
	require.Equal(t, "POST", req.Method)
	require.Equal(t, "/v1/chat/completions", req.Path)
	require.Equal(t, "Bearer "+testKey, req.Header.Get("Authorization"))
	require.Equal(t, "gpt-4.1", req.Body["model"])
	require.Equal(t, true, req.Body["stream"])
	msgs := req.Body["messages"].([]any)
	require.Len(t, msgs, 2)
	require.Equal(t, map[string]any{"role": "system", "content": "You are Tandem."}, msgs[0])
	require.Equal(t, map[string]any{"role": "user", "content": "hi"}, msgs[1])
	tools := req.Body["tools"].([]any)
	require.Len(t, tools, 1)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	require.Equal(t, "function", tools[0].(map[string]any)["type"])
	require.Equal(t, "view", fn["name"])
	require.Equal(t, "Read a file", fn["description"])
	require.Equal(t, []any{"path"}, fn["parameters"].(map[string]any)["required"])
	require.NotContains(t, req.Body, "reasoning_effort", "not sent unless asked")
	require.NotContains(t, req.Body, "max_completion_tokens")
}

func TestStreamToolCallFragments(t *testing.T) {
	srv := providertest.New(t, sse(
		chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"write","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\": \"a"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_def","type":"function","function":{"name":"ls","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":".txt\", \"content\""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":": \"hi\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
	))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})

	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{
		Model: "gpt-4.1", Messages: []provider.Message{{Role: "user", Text: "write a.txt"}},
	}, collect(&deltas))
	require.NoError(t, err)
	require.Empty(t, deltas)
	require.Equal(t, provider.FinishToolUse, resp.FinishReason)
	require.Len(t, resp.ToolCalls, 2)
	require.Equal(t, "call_abc", resp.ToolCalls[0].ID)
	require.Equal(t, "write", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"path":"a.txt","content":"hi"}`, string(resp.ToolCalls[0].Arguments))
	require.Equal(t, "call_def", resp.ToolCalls[1].ID)
	require.Equal(t, "ls", resp.ToolCalls[1].Name)
	require.JSONEq(t, `{}`, string(resp.ToolCalls[1].Arguments))
	require.Equal(t, "/chat/completions", srv.Last(t).Path)
}

func TestToolCallsWithStopFinishAreToolUse(t *testing.T) {
	// Older Ollama reports "stop" after a tool call and sends no id.
	srv := providertest.New(t, sse(
		chunk(`{"tool_calls":[{"index":0,"function":{"name":"ls","arguments":"{}"}}]}`, ""),
		chunk(`{}`, "stop"),
	))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "llama3", Messages: []provider.Message{{Role: "user", Text: "ls"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.FinishToolUse, resp.FinishReason)
	require.Equal(t, "call_1", resp.ToolCalls[0].ID)
	require.Empty(t, srv.Last(t).Header.Get("Authorization"), "no key configured, none sent")
}

func TestLengthFinish(t *testing.T) {
	srv := providertest.New(t, sse(chunk(`{"content":"cut"}`, "length")))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "m", MaxTokens: 5, Messages: []provider.Message{{Role: "user", Text: "x"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.FinishMaxTokens, resp.FinishReason)
	require.EqualValues(t, 5, srv.Last(t).Body["max_completion_tokens"])
}

func TestReasoningDeltas(t *testing.T) {
	srv := providertest.New(t, sse(
		chunk(`{"role":"assistant","content":null,"reasoning_content":"Let me "}`, ""),
		chunk(`{"content":null,"reasoning_content":"think."}`, ""),
		chunk(`{"content":null,"reasoning":" More."}`, ""),
		chunk(`{"content":"Answer","reasoning_content":null}`, ""),
		chunk(`{}`, "stop"),
	))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	var deltas []provider.Delta
	resp, err := p.Stream(context.Background(), provider.Request{
		Model: "deepseek-reasoner", ReasoningEffort: "xhigh", Messages: []provider.Message{{Role: "user", Text: "q"}},
	}, collect(&deltas))
	require.NoError(t, err)
	require.Equal(t, []provider.Delta{
		{Kind: "reasoning", Text: "Let me "},
		{Kind: "reasoning", Text: "think."},
		{Kind: "reasoning", Text: " More."},
		{Kind: "text", Text: "Answer"},
	}, deltas)
	require.Equal(t, "Let me think. More.", resp.Reasoning)
	require.Equal(t, "Answer", resp.Text)
	require.Equal(t, "xhigh", srv.Last(t).Body["reasoning_effort"])
}

func TestRequestConversion(t *testing.T) {
	srv := providertest.New(t, sse(chunk(`{"content":"ok"}`, "stop")))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	png := []byte{0x89, 'P', 'N', 'G', 1, 2, 3}
	_, err := p.Stream(context.Background(), provider.Request{
		Model: "gpt-4.1",
		Messages: []provider.Message{
			{Role: "user", Text: "what is this?", Images: []provider.Image{{MimeType: "image/png", Data: png}}},
			{Role: "assistant", Text: "Let me look.", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "view", Arguments: json.RawMessage(`{"path":"a.go"}`)}}},
			{Role: "tool", ToolCallID: "call_1", ToolName: "view", Text: "package a"},
			{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "call_2", Name: "ls"}}},
			{Role: "tool", ToolCallID: "call_2", ToolName: "ls", Text: "no such dir", IsError: true},
		},
	}, nil)
	require.NoError(t, err)

	req := srv.Last(t)
	require.Contains(t, req.RawBody, "data:image/png;base64,iVBORwECAw==")
	msgs := req.Body["messages"].([]any)
	require.Len(t, msgs, 5)

	user := msgs[0].(map[string]any)
	parts := user["content"].([]any)
	require.Equal(t, map[string]any{"type": "text", "text": "what is this?"}, parts[0])
	require.Equal(t, "image_url", parts[1].(map[string]any)["type"])
	require.Equal(t, "data:image/png;base64,iVBORwECAw==", parts[1].(map[string]any)["image_url"].(map[string]any)["url"])

	asst := msgs[1].(map[string]any)
	require.Equal(t, "assistant", asst["role"])
	require.Equal(t, "Let me look.", asst["content"])
	call := asst["tool_calls"].([]any)[0].(map[string]any)
	require.Equal(t, "call_1", call["id"])
	require.Equal(t, "function", call["type"])
	require.Equal(t, "view", call["function"].(map[string]any)["name"])
	require.JSONEq(t, `{"path":"a.go"}`, call["function"].(map[string]any)["arguments"].(string))

	require.Equal(t, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "package a"}, msgs[2])

	asst2 := msgs[3].(map[string]any)
	require.NotContains(t, asst2, "content", "a tool-call-only turn has no content")
	require.Equal(t, "{}", asst2["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)["arguments"])

	require.Equal(t, "Error: no such dir", msgs[4].(map[string]any)["content"])
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		retryable bool
	}{
		{401, provider.CodeAuth, false},
		{403, provider.CodeAuth, false},
		{429, provider.CodeRateLimited, true},
		{500, provider.CodeUnavailable, true},
		{503, provider.CodeUnavailable, true},
		{400, provider.CodeBadRequest, false},
		{404, provider.CodeBadRequest, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				// Servers do quote (part of) the key back; it must not get out.
				fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. Or something else.","type":"invalid_request_error","param":null,"code":"x"}}`, testKey)
			})
			p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
			_, err := p.Stream(context.Background(), provider.Request{Model: "gpt-4.1", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
			require.Error(t, err)
			pe, ok := provider.AsError(err)
			require.True(t, ok, "want *provider.Error, got %T %v", err, err)
			require.Equal(t, c.code, pe.Code)
			require.Equal(t, c.status, pe.Status)
			require.Equal(t, c.retryable, pe.Retryable)
			require.Contains(t, pe.Message, "Or something else.")
			require.NotContains(t, err.Error(), testKey)
			require.NotContains(t, fmt.Sprintf("%+v", err), testKey)
			require.Equal(t, 1, srv.Count(), "the SDK must not retry on its own")
		})
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>bad gateway</html>")
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	p := newProvider(t, provider.Config{Type: "openai", BaseURL: "http://" + addr + "/v1", APIKey: testKey})
	_, err = p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.NotContains(t, err.Error(), testKey)
}

func TestStreamCutMidway(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"Hel"}`, ""))
		w.(http.Flusher).Flush()
		fmt.Fprint(w, `data: {"id":"chatcmpl-1","choi`)
		w.(http.Flusher).Flush()
		// Drop the connection without ending the chunked body.
		panic(http.ErrAbortHandler)
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
	var deltas []provider.Delta
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, collect(&deltas))
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.Equal(t, []provider.Delta{{Kind: "text", Text: "Hel"}}, deltas)
}

func TestStreamEndsWithoutFinish(t *testing.T) {
	// A clean end of body with neither finish_reason nor [DONE].
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"Hel"}`, ""))
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
}

func TestErrorEventInStream(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"Hel"}`, ""))
		fmt.Fprint(w, "data: {\"error\":{\"message\":\"upstream overloaded\",\"code\":502}}\n\n")
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.Contains(t, pe.Message, "upstream overloaded")
}

func TestCancelMidStream(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk(`{"content":"first"}`, ""))
		w.(http.Flusher).Flush()
		select { // hang like a slow model
		case <-r.Context().Done():
		case <-release:
		}
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas []provider.Delta
	start := time.Now()
	_, err := p.Stream(ctx, provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, func(d provider.Delta) {
		deltas = append(deltas, d)
		cancel()
	})
	require.ErrorIs(t, err, context.Canceled)
	_, isModelErr := provider.AsError(err)
	require.False(t, isModelErr, "a cancel must not look like a model failure")
	require.Less(t, time.Since(start), 2*time.Second)
	require.Len(t, deltas, 1)
}

func TestCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: "http://127.0.0.1:1"})
	_, err := p.Stream(ctx, provider.Request{Model: "m"}, nil)
	require.ErrorIs(t, err, context.Canceled)
}

func TestAzure(t *testing.T) {
	srv := providertest.New(t, sse(chunk(`{"content":"hi from azure"}`, "stop")))
	p := newProvider(t, provider.Config{Type: "azure", BaseURL: srv.URL + "/", APIKey: testKey, AzureAPIVersion: "2024-10-21"})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "my-gpt4o", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "hi from azure", resp.Text)

	req := srv.Last(t)
	require.Equal(t, "/openai/deployments/my-gpt4o/chat/completions", req.Path)
	require.Equal(t, "api-version=2024-10-21", req.Query)
	require.Equal(t, testKey, req.Header.Get("Api-Key"))
	require.Empty(t, req.Header.Get("Authorization"))
}

func TestAzureDefaults(t *testing.T) {
	srv := providertest.New(t, sse(chunk(`{"content":"ok"}`, "stop")))
	p := newProvider(t, provider.Config{Type: "azure", BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "dep", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "api-version="+provider.DefaultAzureAPIVersion, srv.Last(t).Query)

	_, err = openai.New(provider.Config{Type: "azure", APIKey: testKey})
	require.ErrorContains(t, err, "base_url")
	require.NotContains(t, err.Error(), testKey)
}

func TestBadBaseURL(t *testing.T) {
	_, err := openai.New(provider.Config{Type: "openai", BaseURL: "localhost:11434"})
	require.Error(t, err)
}

func TestIgnoresProcessEnvironment(t *testing.T) {
	// A session's own provider must not pick up the server's key or URL.
	t.Setenv("OPENAI_API_KEY", "sk-from-env-must-not-leak")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-env")
	srv := providertest.New(t, sse(chunk(`{"content":"ok"}`, "stop")))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	req := srv.Last(t)
	for k, v := range req.Header {
		require.NotContains(t, strings.Join(v, ","), "sk-from-env", k)
		require.NotContains(t, strings.Join(v, ","), "org-env", k)
	}
}
