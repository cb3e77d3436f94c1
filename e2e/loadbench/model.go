package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// The fake model is an OpenAI-compatible Chat Completions server on
// loopback. What it streams depends on the prompt (the last user message):
//
//	fast [TAG]      an answer of fastChunks chunks, sent back to back (after
//	                TAG, so that answers differ as a real session's do)
//	paced N GAP     N chunks GAP apart, each "@UNIXNANO;" stamped as it is sent
//	hold            stamped chunks holdGap apart until the request ends
//	bash COMMAND    a call of the bash tool running COMMAND, then, once its
//	                result is back, a short answer
//
// A stamp lets a client measure a delta's delivery from the moment the
// model sent it: the model and the clients share this process's clock.
const (
	fastChunks = 10
	holdGap    = 20 * time.Millisecond
	holdMax    = time.Minute
)

func startModel() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(serveModel))
}

func serveModel(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	prompt, afterTool, err := lastPrompt(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	send := func(content string) bool {
		if _, err := io.WriteString(w, chunk(content)); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !send("") {
		return
	}
	f := strings.Fields(prompt)
	switch {
	case afterTool:
		if !send("done") {
			return
		}
	case len(f) > 1 && f[0] == "bash":
		args, _ := json.Marshal(map[string]string{"command": strings.TrimSpace(strings.TrimPrefix(prompt, "bash"))})
		_, _ = io.WriteString(w, toolCall("bash", string(args)))
		return
	case len(f) == 3 && f[0] == "paced":
		n, _ := strconv.Atoi(f[1])
		gap, _ := time.ParseDuration(f[2])
		for i := range n {
			if i > 0 {
				time.Sleep(gap)
			}
			if !send(stamp()) {
				return
			}
		}
	case len(f) == 1 && f[0] == "hold":
		t := time.NewTicker(holdGap)
		defer t.Stop()
		end := time.After(holdMax)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-end:
				return
			case <-t.C:
				if !send(stamp()) {
					return
				}
			}
		}
	default:
		if len(f) == 2 && !send(f[1]+": ") {
			return
		}
		for range fastChunks {
			if !send("word ") {
				return
			}
		}
	}
	_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
}

func stamp() string {
	return "@" + strconv.FormatInt(time.Now().UnixNano(), 10) + ";"
}

func chunk(content string) string {
	c, _ := json.Marshal(content)
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"content":` + string(c) + `},"finish_reason":null}]}` + "\n\n"
}

// toolCall is a call of tool with the JSON arguments args, and the end of
// the answer that asks for it.
func toolCall(tool, args string) string {
	call, _ := json.Marshal(map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": "call_bench", "type": "function",
		"function": map[string]string{"name": tool, "arguments": args},
	}}})
	return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":` + string(call) + `,"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
}

// lastPrompt is the text of the request's last user message, and whether
// a tool's result came after it (the model is to answer it).
func lastPrompt(body io.Reader) (prompt string, afterTool bool, err error) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		return "", false, err
	}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		afterTool = true
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			return text, afterTool, nil
		}
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", false, err
		}
		for _, p := range parts {
			text += p.Text
		}
		return text, afterTool, nil
	}
	return "", afterTool, nil
}
