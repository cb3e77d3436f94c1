// Package providertest is a recording fake model server for the providers'
// tests: it keeps every request it sees and answers with the handler the
// test scripts.
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-dev/tandem/internal/provider"
)

// Request is one request the fake server saw.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                map[string]any
	RawBody             string
}

// Server is an httptest server that records requests.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// New starts a recording server answering with handler; it stops with the test.
func New(t testing.TB, handler http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), RawBody: string(raw)}
		_ = json.Unmarshal(raw, &rec.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Last returns the latest request, failing the test when there was none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return s.reqs[len(s.reqs)-1]
}

// Count returns how many requests the server saw.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// All returns every request the server saw, oldest first.
func (s *Server) All() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Conversation returns a history of n messages that uses every kind of
// message and content a provider encodes: prompts with HTML, quotes,
// control and non-ASCII characters, an image, assistant text with tool
// calls (arguments nested, empty, or none), several results of one turn,
// errors, and empty texts. Message i is the same whatever n is, so that
// Conversation(n+1) is Conversation(n) and one more message, as a
// session's history grows.
func Conversation(n int) []provider.Message {
	msgs := make([]provider.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		turn := []provider.Message{
			{Role: provider.RoleUser, Text: fmt.Sprintf("prompt %d: fix <b>this</b> & \"that\"\u2028 \u00e9t\u00e9 \x01 \U0001F600\n\ttabs", i)},
			{Role: provider.RoleAssistant, Text: fmt.Sprintf("Looking at it (%d).", i), ToolCalls: []provider.ToolCall{
				{ID: fmt.Sprintf("call_%d_a", i), Name: "view", Arguments: json.RawMessage(`{"path":"a.go","range":{"start":1,"end":20}}`)},
				{ID: fmt.Sprintf("call_%d_b", i), Name: "ls", Arguments: json.RawMessage(`{}`)},
			}},
			{Role: provider.RoleTool, ToolCallID: fmt.Sprintf("call_%d_a", i), ToolName: "view", Text: strings.Repeat("1\tpackage main <html> & more\n", 1+i%7)},
			{Role: provider.RoleTool, ToolCallID: fmt.Sprintf("call_%d_b", i), ToolName: "ls", Text: "permission denied", IsError: true},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: fmt.Sprintf("call_%d_c", i), Name: "bash"}}},
			{Role: provider.RoleTool, ToolCallID: fmt.Sprintf("call_%d_c", i), ToolName: "bash", Text: ""},
			{Role: provider.RoleAssistant, Text: fmt.Sprintf("Done with step %d; see `a.go` \u2029.", i)},
		}
		if i%3 == 1 {
			turn[0].Images = []provider.Image{{MimeType: "image/png", Data: []byte(fmt.Sprintf("\x89PNG fake image %d", i))}}
		}
		if i%4 == 2 {
			turn[0].Text = ""
			turn[0].Images = []provider.Image{{MimeType: "image/jpeg", Data: []byte("jpeg")}}
		}
		for _, m := range turn {
			if len(msgs) < n {
				msgs = append(msgs, m)
			}
		}
	}
	return msgs
}

// BenchmarkRequestBody is the cost of one model step's request body as the
// history grows: "sdk" encodes it all through the SDK, as every step did
// before the encode cache, "cached" takes the messages sent before from the
// cache and encodes the newest only (each iteration's last message is new).
// sdk encodes req whole; newCached makes a provider's cached encoder.
func BenchmarkRequestBody(b *testing.B, model string, sdk func(provider.Request) error, newCached func() (func(provider.Request) error, error)) {
	for _, n := range []int{10, 100, 500, 1000} {
		history := Conversation(n)
		base := provider.Request{Model: model, System: "You are Tandem.", Tools: []provider.Tool{{Name: "view"}, {Name: "ls"}}}
		step := func(encode func(provider.Request) error) func(*testing.B) {
			return func(b *testing.B) {
				i := 0
				for b.Loop() {
					req := base
					req.Messages = append(history[:n-1:n-1], provider.Message{Role: provider.RoleUser, Text: fmt.Sprint("new ", i)})
					i++
					if err := encode(req); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.Run(fmt.Sprintf("sdk/messages=%d", n), step(sdk))
		cached, err := newCached()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("cached/messages=%d", n), step(cached))
	}
}

// StreamFirst is an SDK's body, which ends with the "stream" key the SDK
// appends, with that key moved to the front, where the providers put it
// in a request with messages (see provider.StreamFirst). A quote cannot
// start a key inside a JSON string, so a body holds `"messages":[` only
// as the key.
func StreamFirst(t testing.TB, body string) string {
	t.Helper()
	const last = `,"stream":true}`
	if !strings.HasSuffix(body, last) {
		t.Fatalf("the SDK did not append stream: %s", body)
	}
	if !strings.Contains(body, `"messages":[`) {
		return body
	}
	return `{"stream":true,` + body[1:len(body)-len(last)] + "}"
}
