package copilot

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The API may spread one message over several choices; Tandem gets it as
// one streamed message, with the CLI's tool names mapped onto Tandem's.
func TestGatewayJoinsChoices(t *testing.T) {
	var got map[string]any
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Test") != "v" {
			t.Errorf("headers = %v", r.Header)
		}
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[
			{"message":{"content":"I'll create it."}},
			{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"report_intent","arguments":"{}"}}]}},
			{"message":{"tool_calls":[{"id":"b","type":"function","function":{"name":"create","arguments":"{\"file_text\":\"hi\",\"path\":\"/x\"}"}}]}}]}`)
	}))
	defer up.Close()
	g, err := NewGateway(up.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
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
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		_, _ = io.WriteString(w, `{"id":"c","model":"m","choices":[{"message":{"content":"went on"}}]}`)
	}))
	defer up.Close()
	g, err := NewGateway(up.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
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
