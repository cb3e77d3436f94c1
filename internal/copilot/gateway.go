package copilot

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// maxModelBody bounds a model request or answer passing the gateway.
const maxModelBody = 64 << 20

// Gateway stands between Tandem's openai provider and the Copilot API the
// SDK names (COPILOT_API_URL), for the sessions of this bridge. It speaks to
// the API as the Copilot CLI does: one non-streamed request, whose answer
// may spread one assistant message over several choices (text in one, each
// tool call in the next), which it joins into one message; with the
// session's request headers; with the SDK's token. To Tandem it answers as
// a streaming Chat Completions server. Each session has its own base URL,
// GATEWAY/s/SESSION_ID, so that the gateway knows whose request it serves.
type Gateway struct {
	upstream string
	token    string
	// key is what Tandem's provider must present: the gateway spends the
	// SDK's token, so no other local process may use it.
	key  string
	hc   *http.Client
	log  *slog.Logger
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu      sync.Mutex
	headers map[string]map[string]string
	system  map[string]string // session → system message mode
	// notices are the user messages that carried a tools-changed notice,
	// by session: Tandem tells the model once, the Copilot CLI keeps the
	// notice in the message for the rest of the conversation.
	notices map[string]map[string]string
}

// NewGateway starts a gateway on a loopback port in front of upstream.
func NewGateway(upstream, token string, logger *slog.Logger) (*Gateway, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("copilot gateway: %w", err)
	}
	g := &Gateway{
		upstream: strings.TrimRight(upstream, "/"), token: token, log: logger, ln: ln, key: uuid.NewString(),
		hc:      &http.Client{Timeout: 10 * time.Minute},
		headers: map[string]map[string]string{}, system: map[string]string{}, done: make(chan struct{}),
		notices: map[string]map[string]string{},
	}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(g.done)
		_ = g.srv.Serve(ln)
	}()
	return g, nil
}

// BaseURL is the model endpoint of a session.
func (g *Gateway) BaseURL(sessionID string) string {
	return "http://" + g.ln.Addr().String() + "/s/" + sessionID
}

// Key is the API key a session's provider presents to the gateway.
func (g *Gateway) Key() string { return g.key }

// SetHeaders makes headers part of the session's model requests from now on.
func (g *Gateway) SetHeaders(sessionID string, h map[string]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(h) == 0 {
		delete(g.headers, sessionID)
		return
	}
	g.headers[sessionID] = h
}

// SetSystemMode records the session's system message mode ("replace" keeps
// the system message as the app wrote it).
func (g *Gateway) SetSystemMode(sessionID, mode string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.system[sessionID] = mode
}

// Forget drops what the gateway keeps of a deleted session.
func (g *Gateway) Forget(sessionID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.headers, sessionID)
	delete(g.system, sessionID)
	delete(g.notices, sessionID)
}

// Close stops the gateway and waits for it.
func (g *Gateway) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := g.srv.Shutdown(ctx)
	<-g.done
	return err
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/s/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+g.key)) != 1 {
		http.Error(w, `{"error":{"message":"unauthorized"}}`, http.StatusUnauthorized)
		return
	}
	sessionID, path, _ := strings.Cut(rest, "/")
	if path != "chat/completions" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxModelBody+1))
	if err != nil || len(body) > maxModelBody {
		http.Error(w, `{"error":{"message":"request too large or unreadable"}}`, http.StatusRequestEntityTooLarge)
		return
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"invalid JSON"}}`, http.StatusBadRequest)
		return
	}
	delete(req, "stream")
	delete(req, "stream_options")
	g.mu.Lock()
	headers := g.headers[sessionID]
	mode := g.system[sessionID]
	g.mu.Unlock()
	if mode != "replace" {
		rewriteSystem(req)
	}
	if deniedInteractively(req) {
		// The Copilot CLI ends its turn when a person denies a call: the
		// model is not asked again. Tandem's engine tells the model and
		// goes on, so the profile answers for the model, with an empty
		// last word.
		endTurn(w)
		return
	}
	g.rewriteMessages(sessionID, req)
	out, _ := json.Marshal(req)
	up, err := http.NewRequestWithContext(r.Context(), http.MethodPost, g.upstream+"/chat/completions", bytes.NewReader(out))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header.Set("Content-Type", "application/json")
	up.Header.Set("Copilot-Integration-Id", "copilot-developer-cli")
	up.Header.Set("Openai-Intent", "conversation-agent")
	if g.token != "" {
		up.Header.Set("Authorization", "Bearer "+g.token)
	}
	for k, v := range headers {
		if !reservedHeader(k) {
			up.Header.Set(k, v)
		}
	}
	resp, err := g.hc.Do(up)
	if err != nil {
		http.Error(w, `{"error":{"message":"model endpoint unreachable"}}`, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxModelBody+1))
	if err != nil || len(answer) > maxModelBody {
		http.Error(w, `{"error":{"message":"model answer too large or cut"}}`, http.StatusBadGateway)
		return
	}
	if resp.StatusCode != http.StatusOK {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
		return
	}
	chunks, err := streamOf(answer)
	if err != nil {
		g.log.Warn("copilot gateway: model answer not understood", "err", err)
		http.Error(w, `{"error":{"message":"model answer not understood"}}`, http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// userDenial is what Tandem tells the model of a call a person denied.
var userDenial = regexp.MustCompile(`^(Error: )?The user denied this tool call\.`)

// deniedInteractively reports whether a call of the model's last step was
// denied by a person: among the tool results after its last message.
func deniedInteractively(req map[string]json.RawMessage) bool {
	var msgs []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	if json.Unmarshal(req["messages"], &msgs) != nil {
		return false
	}
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		if s, ok := msgs[i].Content.(string); ok && userDenial.MatchString(s) {
			return true
		}
	}
	return false
}

// endTurn answers a chat completion with an empty message that ends the
// turn, as a streamed completion.
func endTurn(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, `data: {"id":"tandem-gateway-end-turn","object":"chat.completion.chunk","created":0,"model":"","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`+"\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// reservedHeader reports the headers an app's requestHeaders may not set:
// the ones that frame the request or carry the gateway's credentials.
func reservedHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Te", "Upgrade", "Trailer", "Proxy-Authorization":
		return true
	}
	return false
}

// identityLine is put in front of the system message of sessions that did
// not replace it: apps written for the Copilot SDK expect the agent to say
// that it runs for GitHub Copilot.
const identityLine = "You are the agent of a GitHub Copilot SDK session, served by Tandem.\n\n"

func rewriteSystem(req map[string]json.RawMessage) {
	var msgs []map[string]any
	if json.Unmarshal(req["messages"], &msgs) != nil || len(msgs) == 0 {
		return
	}
	if msgs[0]["role"] != "system" {
		return
	}
	if s, ok := msgs[0]["content"].(string); ok {
		msgs[0]["content"] = identityLine + s
	}
	if raw, err := json.Marshal(msgs); err == nil {
		req["messages"] = raw
	}
}

// unknownTool is how Tandem tells the model it called a tool it does not
// have; the Copilot CLI says it in other words, which apps (and recorded
// conversations) expect.
var unknownTool = regexp.MustCompile(`^Error: unknown tool "([^"]+)": call only the tools offered to you$`)

// goneNotice is the note Tandem adds to the newest message when client
// tools went away.
var goneNotice = regexp.MustCompile(`(?s)^(.*)\n\n\[notice\] These tools are no longer available because the client offering them left: (.+)\.$`)

// builtinNames maps Tandem's built-in tools onto the Copilot CLI's names
// for the same job, with their argument names.
var builtinNames = map[string]struct {
	name string
	args map[string]string // Tandem argument → Copilot argument
}{
	"write": {"create", map[string]string{"content": "file_text"}},
}

// numberedLine is a line of Tandem's view output: "     1\ttext".
var numberedLine = regexp.MustCompile(`^ *(\d+)\t`)

// viewResult words Tandem's view output as the CLI does: "1. text".
func viewResult(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		m := numberedLine.FindStringSubmatchIndex(l)
		if m == nil {
			return s
		}
		lines[i] = l[m[2]:m[3]] + ". " + l[m[1]:]
	}
	return strings.Join(lines, "\n")
}

// exitNote is the note Tandem's bash adds to the output of a command that
// exited with a non-zero code.
var exitNote = regexp.MustCompile(`\n?\[exit code: (-?\d+)\]$`)

// shellResult words Tandem's bash result as the CLI does: the output, then
// "<exited with exit code N>" on a line of its own, for every code. A
// result with another note (a timeout, a signal) is left as Tandem says it.
func shellResult(s string) string {
	code := "0"
	if m := exitNote.FindStringSubmatchIndex(s); m != nil {
		code = s[m[2]:m[3]]
		s = s[:m[0]]
	} else if strings.HasSuffix(s, "]") {
		return s
	}
	s = strings.TrimSuffix(s, "\n")
	if s == "(no output)" {
		s = ""
	}
	marker := "<exited with exit code " + code + ">"
	if s == "" {
		return marker
	}
	return s + "\n" + marker
}

// interruptedResult matches what Tandem tells the model of a call that a
// cancel stopped; the CLI words it as interruptedText.
var interruptedResult = regexp.MustCompile(`(?s)^(Error: )?(The permission request was canceled, so the call did not run\.|canceled|canceled before it ran|command not started: context canceled|.*\[command canceled; its process group was killed\].*)$`)

const interruptedText = "The execution of this tool, or a previous tool was interrupted."

// writeResult is what Tandem's write tool says of a created file.
var writeResult = regexp.MustCompile(`^Created .+ \((\d+) bytes\)\.$`)

// rewriteMessages words the conversation as the Copilot CLI does: its tool
// names and argument names, its unknown-tool error, its tools-changed
// notice, its write result.
func (g *Gateway) rewriteMessages(sessionID string, req map[string]json.RawMessage) {
	var msgs []map[string]any
	if json.Unmarshal(req["messages"], &msgs) != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	calls := map[string]map[string]any{} // tool call id → its arguments, for writes
	views := map[string]string{}         // tool call id of a view call → its path
	shells := map[string]bool{}          // tool call ids of bash calls
	images := map[int]string{}           // index of a view result → the image it showed
	for i, m := range msgs {
		switch m["role"] {
		case "user":
			s, ok := m["content"].(string)
			if !ok {
				continue
			}
			if sm := goneNotice.FindStringSubmatch(s); sm != nil {
				n := fmt.Sprintf("<tools_changed_notice>\nTools no longer available: %s\n\nImportant: Do not attempt to call tools that are no longer available unless you've been notified that they're available again.\n</tools_changed_notice>\n\n%s", sm[2], sm[1])
				if g.notices[sessionID] == nil {
					g.notices[sessionID] = map[string]string{}
				}
				g.notices[sessionID][sm[1]] = n
				m["content"] = n
			} else if n, ok := g.notices[sessionID][s]; ok {
				m["content"] = n
			}
		case "assistant":
			tcs, _ := m["tool_calls"].([]any)
			for _, tc := range tcs {
				call, _ := tc.(map[string]any)
				fn, _ := call["function"].(map[string]any)
				name, _ := fn["name"].(string)
				if id, _ := call["id"].(string); name == "view" {
					var a struct {
						Path string `json:"path"`
					}
					_ = json.Unmarshal([]byte(fmt.Sprint(fn["arguments"])), &a)
					views[id] = a.Path
				}
				if name == "ls" {
					fn["name"] = "view"
					continue
				}
				if id, _ := call["id"].(string); name == "bash" {
					shells[id] = true
				}
				b, ok := builtinNames[name]
				if !ok {
					continue
				}
				fn["name"] = b.name
				var args map[string]any
				if s, _ := fn["arguments"].(string); json.Unmarshal([]byte(s), &args) == nil {
					for from, to := range b.args {
						if v, ok := args[from]; ok {
							delete(args, from)
							args[to] = v
						}
					}
					raw, _ := json.Marshal(args)
					fn["arguments"] = string(raw)
					if id, _ := call["id"].(string); id != "" && name == "write" {
						calls[id] = args
					}
				}
			}
		case "tool":
			s, ok := m["content"].(string)
			if !ok {
				continue
			}
			if sm := unknownTool.FindStringSubmatch(s); sm != nil {
				m["content"] = fmt.Sprintf("Tool '%s' does not exist.", sm[1])
			} else if interruptedResult.MatchString(s) {
				m["content"] = interruptedText
			} else if shells[fmt.Sprint(m["tool_call_id"])] {
				m["content"] = shellResult(s)
			} else if path, ok := views[fmt.Sprint(m["tool_call_id"])]; ok {
				if imageType(path) != "" && viewedImage(path, s) {
					m["content"] = "Viewed image file successfully."
					images[i] = path
				} else {
					m["content"] = viewResult(s)
				}
			} else if args, ok := calls[fmt.Sprint(m["tool_call_id"])]; ok {
				if sm := writeResult.FindStringSubmatch(s); sm != nil {
					m["content"] = fmt.Sprintf("Created file %v with %s characters", args["path"], sm[1])
				}
			}
		}
	}
	if len(images) > 0 {
		msgs = withImages(msgs, images)
	}
	if raw, err := json.Marshal(msgs); err == nil {
		req["messages"] = raw
	}
}

// maxImage bounds an image the gateway shows the model.
const maxImage = 20 << 20

// imageType is the MIME type of an image file the CLI's view shows the
// model, by its name; "" for other files.
func imageType(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}

// binaryView is the end of what Tandem's view says of a file it opened in
// the workspace and found binary.
var binaryView = regexp.MustCompile(`looks like a binary file; view only reads text files$`)

// viewedImage reports whether Tandem's view, confined to the session's
// workspace, opened the image at path: only then may the gateway read it
// for the model. The path comes from the model; a view Tandem refused (a
// path outside the workspace) must not become a read outside it.
func viewedImage(path, result string) bool {
	return filepath.IsAbs(path) && binaryView.MatchString(result)
}

// withImages shows the model the images that view calls looked at, as the
// CLI does: in a user message after the calls' results. Tandem's view reads
// only text, so the gateway reads the image (bounded) itself.
func withImages(msgs []map[string]any, images map[int]string) []map[string]any {
	out := make([]map[string]any, 0, len(msgs)+len(images))
	var pending []string
	flush := func() {
		for _, path := range pending {
			data, err := readBounded(path, maxImage)
			if err != nil {
				continue
			}
			out = append(out, map[string]any{"role": "user", "content": []map[string]any{
				{"type": "text", "text": "Image file at path " + path},
				{"type": "image_url", "image_url": map[string]any{"url": "data:" + imageType(path) + ";base64," + base64.StdEncoding.EncodeToString(data)}},
			}})
		}
		pending = nil
	}
	for i, m := range msgs {
		if m["role"] != "tool" {
			flush()
		}
		out = append(out, m)
		if p, ok := images[i]; ok {
			pending = append(pending, p)
		}
	}
	flush()
	return out
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", path, max)
	}
	return data, nil
}

// toTandem maps a Copilot CLI tool call the model made onto Tandem's tool.
func toTandem(name, args string) (string, string) {
	if name == "view" {
		// The CLI's view also lists directories; Tandem's ls does that.
		var a struct {
			Path string `json:"path"`
		}
		if json.Unmarshal([]byte(args), &a) == nil && filepath.IsAbs(a.Path) {
			if st, err := os.Stat(a.Path); err == nil && st.IsDir() {
				return "ls", args
			}
		}
	}
	for tandem, b := range builtinNames {
		if b.name != name {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(args), &m) != nil {
			return tandem, args
		}
		for from, to := range b.args {
			if v, ok := m[to]; ok {
				delete(m, to)
				m[from] = v
			}
		}
		raw, _ := json.Marshal(m)
		return tandem, string(raw)
	}
	return name, args
}

// completion is the part of a Chat Completions answer the gateway reads.
type completion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

// streamOf turns an answer into the chunks of one streamed message: the
// text of every choice, then every tool call of every choice, then the end.
func streamOf(answer []byte) ([][]byte, error) {
	var c completion
	if err := json.Unmarshal(answer, &c); err != nil {
		return nil, err
	}
	if len(c.Choices) == 0 {
		return nil, errors.New("no choices")
	}
	chunk := func(delta map[string]any, finish any) []byte {
		b, _ := json.Marshal(map[string]any{
			"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		return b
	}
	var out [][]byte
	var text strings.Builder
	calls := 0
	for _, ch := range c.Choices {
		if ch.Message.Content != nil {
			text.WriteString(*ch.Message.Content)
		}
	}
	if text.Len() > 0 {
		out = append(out, chunk(map[string]any{"role": "assistant", "content": text.String()}, nil))
	}
	for _, ch := range c.Choices {
		for _, tc := range ch.Message.ToolCalls {
			tc.Function.Name, tc.Function.Arguments = toTandem(tc.Function.Name, tc.Function.Arguments)
			out = append(out, chunk(map[string]any{"role": "assistant", "tool_calls": []map[string]any{{
				"index": calls, "id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Function.Name, "arguments": tc.Function.Arguments},
			}}}, nil))
			calls++
		}
	}
	finish := "stop"
	if calls > 0 {
		finish = "tool_calls"
	}
	out = append(out, chunk(map[string]any{}, finish))
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		b, _ := json.Marshal(map[string]any{
			"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model,
			"choices": []any{}, "usage": c.Usage,
		})
		out = append(out, b)
	}
	return out, nil
}
