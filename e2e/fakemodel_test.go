package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
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
	// cut ends the stream after the first content chunk, without finishing it.
	cut bool
}

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
}

type recorded struct {
	Path    string
	Header  http.Header
	Body    map[string]any
	RawBody string
}

func newFakeModel(t *testing.T, flavor string, script func(n int, req map[string]any) step) *fakeModel {
	f := &fakeModel{t: t, flavor: flavor, script: script, started: make(chan int, 1000)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

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
	f.requests = append(f.requests, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, RawBody: string(raw)})
	s := f.script(n, body)
	f.mu.Unlock()
	f.started <- n

	if s.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		if f.flavor == "anthropic" {
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
	if f.flavor == "anthropic" {
		chunks = anthropicChunks(s)
	} else {
		chunks = openAIChunks(s)
	}
	for i, c := range chunks {
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		fl.Flush()
		if i == 1 && s.cut {
			return
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

func openAIChunks(s step) []string {
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
	out = append(out, chunk(map[string]any{}, finish), "data: [DONE]\n\n")
	return out
}

func anthropicChunks(s step) []string {
	ev := func(typ string, v map[string]any) string {
		v["type"] = typ
		b, _ := json.Marshal(v)
		return "event: " + typ + "\ndata: " + string(b) + "\n\n"
	}
	out := []string{ev("message_start", map[string]any{"message": map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": "fake", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 1, "output_tokens": 0},
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
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}}),
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
