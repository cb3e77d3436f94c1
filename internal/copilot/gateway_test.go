package copilot

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-dev/tandem/proto"
)

// The API may spread one message over several choices; Tandem gets it as
// one streamed message, with the CLI's tool names mapped onto Tandem's.
func TestGatewayJoinsChoices(t *testing.T) {
	var got map[string]any
	g := testGateway(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Test") != "v" {
			t.Errorf("headers = %v", r.Header)
		}
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[
			{"message":{"content":"I'll create it."}},
			{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"report_intent","arguments":"{}"}}]}},
			{"message":{"tool_calls":[{"id":"b","type":"function","function":{"name":"create","arguments":"{\"file_text\":\"hi\",\"path\":\"/x\"}"}}]}}]}`)
	})
	g.SetHeaders("s1", map[string]string{"X-Test": "v", "Authorization": "Bearer app's own"})
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"go"},
		{"role":"assistant","tool_calls":[{"id":"w","type":"function","function":{"name":"write","arguments":"{\"path\":\"/x\",\"content\":\"hi\"}"}}]},
		{"role":"tool","tool_call_id":"w","content":"Created x (2 bytes)."},
		{"role":"tool","tool_call_id":"q","content":"Error: unknown tool \"report_intent\": call only the tools offered to you"}]}`
	anon, err := http.Post(g.BaseURL("s1")+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the gateway's key got %d, want 401", anon.StatusCode)
	}
	stream := postGateway(t, g, body)
	for _, want := range []string{`"content":"I'll create it."`, `"name":"report_intent"`, `"name":"write"`, `\"content\":\"hi\"`, `"finish_reason":"tool_calls"`, "data: [DONE]"} {
		if !strings.Contains(stream, want) {
			t.Errorf("stream lacks %s:\n%s", want, stream)
		}
	}
	if _, ok := got["stream"]; ok {
		t.Errorf("the upstream request streams: %v", got)
	}
	msgs, _ := json.Marshal(got["messages"])
	for _, want := range []string{`"name":"create"`, `file_text`, `Created file /x with 2 characters`, `Tool 'report_intent' does not exist.`, `GitHub Copilot`} {
		if !strings.Contains(string(msgs), want) {
			t.Errorf("upstream messages lack %s: %s", want, msgs)
		}
	}
}

func TestViewResult(t *testing.T) {
	if got := viewResult("     1\tone\n     2\ttwo\n"); got != "1. one\n2. two" {
		t.Fatalf("viewResult = %q", got)
	}
	if got := viewResult("(x is empty)"); got != "(x is empty)" {
		t.Fatalf("viewResult changed a note: %q", got)
	}
}

// When a person denied a call of the model's last step, the Copilot profile
// ends the turn there, as the CLI does: the model is not asked again.
func TestGatewayEndsTheTurnOnAnInteractiveDenial(t *testing.T) {
	asked := 0
	g := testGateway(t, func(w http.ResponseWriter, r *http.Request) {
		asked++
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[{"message":{"content":"went on"}}]}`)
	})
	post := func(body string) string { return postGateway(t, g, body) }
	call := `{"role":"assistant","tool_calls":[{"id":"v","type":"function","function":{"name":"view","arguments":"{\"path\":\"/x\"}"}}]}`
	denied := post(`{"model":"m","messages":[{"role":"user","content":"go"},` + call + `,{"role":"tool","tool_call_id":"v","content":"Error: The user denied this tool call."}]}`)
	if asked != 0 || !strings.Contains(denied, `"finish_reason":"stop"`) || !strings.Contains(denied, "data: [DONE]") {
		t.Fatalf("a denied step: upstream asked %d times, answer %s", asked, denied)
	}
	// A denial in an earlier step, answered since, does not end later turns.
	later := post(`{"model":"m","messages":[{"role":"user","content":"go"},` + call + `,{"role":"tool","tool_call_id":"v","content":"Error: The user denied this tool call."},{"role":"assistant","content":""},{"role":"user","content":"again"}]}`)
	if asked != 1 || !strings.Contains(later, "went on") {
		t.Fatalf("a new turn after a denial: upstream asked %d times, answer %s", asked, later)
	}
}

// postGateway posts a chat completion for session s1 with the gateway's
// key and returns the answer's body.
func postGateway(t *testing.T, g *Gateway, body string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.BaseURL("s1")+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.Key())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// The gateway shows the model an image only when Tandem's view, confined to
// the workspace, opened it: a path the model names outside the workspace
// (which Tandem's view refused) is never read.
func TestGatewayReadsOnlyImagesTandemsViewOpened(t *testing.T) {
	var got map[string]any
	g := testGateway(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[{"message":{"content":"ok"}}]}`)
	})
	img := filepath.Join(t.TempDir(), "secret.png")
	if err := os.WriteFile(img, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0o600); err != nil {
		t.Fatal(err)
	}
	ask := func(result string) string {
		t.Helper()
		got = nil
		args, _ := json.Marshal(map[string]string{"path": img})
		call, _ := json.Marshal(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "v", "type": "function", "function": map[string]any{"name": "view", "arguments": string(args)}}}})
		res, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": "v", "content": result})
		postGateway(t, g, `{"model":"m","messages":[{"role":"user","content":"look"},`+string(call)+`,`+string(res)+`]}`)
		msgs, _ := json.Marshal(got["messages"])
		return string(msgs)
	}
	refused := ask(`Error: path "` + img + `" is outside the workspace`)
	if strings.Contains(refused, "image_url") || strings.Contains(refused, "Viewed image file successfully.") {
		t.Fatalf("an image Tandem's view refused reached the model: %s", refused)
	}
	opened := ask("Error: secret.png looks like a binary file; view only reads text files")
	if !strings.Contains(opened, "image_url") || !strings.Contains(opened, "Viewed image file successfully.") {
		t.Fatalf("an image Tandem's view opened was not shown: %s", opened)
	}
}

// A deleted session's request headers and system mode are let go: they
// reach no later request and hold no memory.
func TestGatewayForgetsADeletedSession(t *testing.T) {
	var header string
	g := testGateway(t, func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get("X-Test")
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[{"message":{"content":"ok"}}]}`)
	})
	g.SetHeaders("s1", map[string]string{"X-Test": "v"})
	g.SetSystemMode("s1", "replace")
	body := `{"model":"m","messages":[{"role":"user","content":"go"}]}`
	postGateway(t, g, body)
	if header != "v" {
		t.Fatalf("the session's header = %q before it was deleted", header)
	}
	g.Forget("s1")
	postGateway(t, g, body)
	if header != "" {
		t.Fatalf("a deleted session's header still reaches the model: %q", header)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.headers)+len(g.system)+len(g.notices) != 0 {
		t.Fatalf("the gateway keeps a deleted session: %v %v %v", g.headers, g.system, g.notices)
	}
}

// deleteBackend knows one session, s1 in workspace w, and deletes it.
type deleteBackend struct{ nopBackend }

func (deleteBackend) Workspaces(context.Context) ([]proto.Workspace, error) {
	return []proto.Workspace{{ID: "w"}}, nil
}
func (deleteBackend) Session(_ context.Context, _, id string) (proto.Session, error) {
	return proto.Session{ID: id}, nil
}
func (deleteBackend) DeleteSession(context.Context, string, string) error { return nil }

// session.delete makes the gateway forget the session.
func TestDeleteForgetsTheSessionInTheGateway(t *testing.T) {
	g, err := NewGateway("http://127.0.0.1:1", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.SetHeaders("s1", map[string]string{"X-Test": "v"})
	s := NewServer(Config{Connect: func(string) (Backend, error) { return deleteBackend{}, nil }, Gateway: g})
	res := dial(t, s).call(1, "session.delete", map[string]any{"sessionId": "s1"})
	if r, _ := res["result"].(map[string]any); r["success"] != true {
		t.Fatalf("session.delete = %v", res)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.headers["s1"]; ok {
		t.Fatal("the gateway keeps the request headers of a deleted session")
	}
}

// testGateway starts a gateway with token tok in front of an upstream
// served by h; both stop when the test ends.
func testGateway(t *testing.T, h http.HandlerFunc) *Gateway {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	g, err := NewGateway(up.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// However a cancel meets a call (before its permission, before its shell
// started, while it ran), the model reads the CLI's one interruption text;
// a result that merely mentions a cancel is left alone.
func TestInterruptedResults(t *testing.T) {
	for _, s := range []string{
		"Error: The permission request was canceled, so the call did not run.",
		"Error: canceled",
		"canceled before it ran",
		"Error: command not started: context canceled",
		"partial output\n[command canceled; its process group was killed]",
	} {
		if !interruptedResult.MatchString(s) {
			t.Errorf("%q is not read as an interruption", s)
		}
	}
	for _, s := range []string{"the build was canceled by CI", "Error: command not started: exec: no such file"} {
		if interruptedResult.MatchString(s) {
			t.Errorf("%q is read as an interruption", s)
		}
	}
}

// A shell result reads as the CLI words it: the output, then the exit code
// on a line of its own, for a zero code too.
func TestShellResult(t *testing.T) {
	for in, want := range map[string]string{
		"done\n":                 "done\n<exited with exit code 0>",
		"done":                   "done\n<exited with exit code 0>",
		"(no output)":            "<exited with exit code 0>",
		"boom\n[exit code: 2]":   "boom\n<exited with exit code 2>",
		"[exit code: 1]":         "<exited with exit code 1>",
		"a\nb\n[exit code: 127]": "a\nb\n<exited with exit code 127>",
		"x\n[command timed out after 1s; its process group was killed]": "x\n[command timed out after 1s; its process group was killed]",
	} {
		if got := shellResult(in); got != want {
			t.Errorf("shellResult(%q) = %q, want %q", in, got, want)
		}
	}
}
