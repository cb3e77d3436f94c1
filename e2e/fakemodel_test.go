package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// step is one scripted model response.
type step struct {
	status    int // non-zero: answer this HTTP status with an error body
	text      []string
	reasoning []string
	toolCalls []scriptedCall
	// hold, when set, pauses the stream after the first chunk until it is
	// closed or the client goes away.
	hold chan struct{}
	// delay, when set, pauses the stream after the first chunk for that
	// long (or until the client goes away): a model's latency, for tests
	// that need runs to last.
	delay time.Duration
	// cut ends the stream after the first content chunk, without finishing it.
	cut bool
	// header is set on the answer (Retry-After on a 429, for instance).
	header map[string]string
	// errBody, with status, replaces the scripted error body.
	errBody string
	// usage is what the model reports; nil reports defaultUsage. See
	// fakeUsage for how it goes on the wire.
	usage *fakeUsage
}

// fakeUsage is the usage a fake model reports, in provider.Usage's
// convention: Input counts every input token, cached or not, and Output
// every output token, reasoning included. On the wire the OpenAI flavor
// sends it as is (prompt_tokens, cached_tokens, reasoning_tokens; cache
// writes are not an OpenAI notion and are dropped) in a last chunk, and only
// when the request asked for it with stream_options.include_usage, as
// OpenAI does. The Anthropic flavor sends input_tokens without the cached
// tokens (Input - CacheRead - CacheWrite), cache_read_input_tokens and
// cache_creation_input_tokens in message_start, and output_tokens (with
// thinking_tokens) in message_delta, as Anthropic does.
type fakeUsage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
}

// defaultUsage is what a step reports when its script says nothing.
var defaultUsage = fakeUsage{Input: 100, Output: 20, CacheRead: 40, CacheWrite: 10, Reasoning: 5}

type scriptedCall struct {
	ID, Name, Args string
}

// fakeModel is an OpenAI- or Anthropic-compatible streaming server that plays
// a script and records every request.
type fakeModel struct {
	t      *testing.T
	srv    *httptest.Server
	flavor string // "openai" or "anthropic"

	mu       sync.Mutex
	script   func(n int, req map[string]any) step
	requests []recorded
	started  chan int // receives the index of each request as it arrives
	// conns counts the TCP connections the server accepted.
	conns atomic.Int64
}

type recorded struct {
	Path    string
	Header  http.Header
	Body    map[string]any
	RawBody string
	At      time.Time // when the request arrived
}

func newFakeModel(t *testing.T, flavor string, script func(n int, req map[string]any) step) *fakeModel {
	f := &fakeModel{t: t, flavor: flavor, script: script, started: make(chan int, 1000)}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// awaitRequest waits for the next request to arrive, failing the test
// after the deadline.
func (f *fakeModel) awaitRequest(t *testing.T) int {
	t.Helper()
	select {
	case n := <-f.started:
		return n
	case <-time.After(wait):
		t.Fatalf("no model request within %v", wait)
	}
	return 0
}

// Connections returns how many TCP connections the server has accepted.
func (f *fakeModel) Connections() int64 { return f.conns.Load() }

// reply answers every request with the same text.
func reply(text ...string) func(int, map[string]any) step {
	return func(int, map[string]any) step { return step{text: text} }
}

func (f *fakeModel) URL() string { return f.srv.URL }

func (f *fakeModel) Requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, RawBody: string(raw), At: time.Now()})
	s := f.script(n, body)
	f.mu.Unlock()
	select {
	case f.started <- n:
	default: // nobody reads it in long tests; never block the answer
	}

	for k, v := range s.header {
		w.Header().Set(k, v)
	}
	if s.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		if s.errBody != "" {
			io.WriteString(w, s.errBody)
		} else if f.flavor == "anthropic" {
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"scripted failure %d"}}`, s.status)
		} else {
			fmt.Fprintf(w, `{"error":{"message":"scripted failure %d","type":"server_error","code":null}}`, s.status)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	var chunks []string
	usage := defaultUsage
	if s.usage != nil {
		usage = *s.usage
	}
	if f.flavor == "anthropic" {
		chunks = anthropicStream(s, usage)
	} else {
		chunks = openAIStream(s, usage, wantsUsage(body))
	}
	for i, c := range chunks {
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		fl.Flush()
		if i == 1 && s.cut {
			return
		}
		if i == 0 && s.delay > 0 {
			t := time.NewTimer(s.delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if i == 0 {
			if s.hold != nil {
				select {
				case <-s.hold:
				case <-r.Context().Done():
					return
				}
			}
		}
	}
}

func sseData(v any) string {
	b, _ := json.Marshal(v)
	return "data: " + string(b) + "\n\n"
}

// wantsUsage reports whether an OpenAI request asked for usage.
func wantsUsage(req map[string]any) bool {
	opts, _ := req["stream_options"].(map[string]any)
	return opts["include_usage"] == true
}

// openAIChunks is the stream of s without usage.
func openAIChunks(s step) []string { return openAIStream(s, fakeUsage{}, false) }

// openAIStream is the stream of s, ending with usage u if withUsage.
func openAIStream(s step, u fakeUsage, withUsage bool) []string {
	chunk := func(delta map[string]any, finish any) string {
		return sseData(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
	}
	out := []string{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	for _, r := range s.reasoning {
		out = append(out, chunk(map[string]any{"reasoning_content": r}, nil))
	}
	for _, t := range s.text {
		out = append(out, chunk(map[string]any{"content": t}, nil))
	}
	for i, c := range s.toolCalls {
		half := len(c.Args) / 2
		out = append(out,
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Args[:half]}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
				"function": map[string]any{"arguments": c.Args[half:]}}}}, nil))
	}
	finish := "stop"
	if len(s.toolCalls) > 0 {
		finish = "tool_calls"
	}
	out = append(out, chunk(map[string]any{}, finish))
	if withUsage {
		out = append(out, sseData(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake", "choices": []any{},
			"usage": map[string]any{
				"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
				"prompt_tokens_details":     map[string]any{"cached_tokens": u.CacheRead},
				"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
			},
		}))
	}
	out = append(out, "data: [DONE]\n\n")
	return out
}

// anthropicStream is the stream of s, reporting usage u.
func anthropicStream(s step, u fakeUsage) []string {
	ev := func(typ string, v map[string]any) string {
		v["type"] = typ
		b, _ := json.Marshal(v)
		return "event: " + typ + "\ndata: " + string(b) + "\n\n"
	}
	out := []string{ev("message_start", map[string]any{"message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "fake", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{
			"input_tokens": u.Input - u.CacheRead - u.CacheWrite, "output_tokens": 1,
			"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite,
		},
	}})}
	idx := 0
	if len(s.text) > 0 {
		out = append(out, ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}}))
		for _, t := range s.text {
			out = append(out, ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": t}}))
		}
		out = append(out, ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	for _, c := range s.toolCalls {
		out = append(out,
			ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}}),
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": c.Args}}),
			ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	stop := "end_turn"
	if len(s.toolCalls) > 0 {
		stop = "tool_use"
	}
	out = append(out,
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{
			"output_tokens": u.Output, "output_tokens_details": map[string]any{"thinking_tokens": u.Reasoning},
		}}),
		ev("message_stop", map[string]any{}))
	return out
}

// lastUserText returns the text of the last user message of a recorded
// OpenAI request.
func lastUserText(req map[string]any) string {
	msgs, _ := req["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		switch c := m["content"].(type) {
		case string:
			return c
		case []any:
			var b strings.Builder
			for _, p := range c {
				if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
					b.WriteString(fmt.Sprint(pm["text"]))
				}
			}
			return b.String()
		}
	}
	return ""
}
