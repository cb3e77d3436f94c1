package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/proto"
)

// bodies are the request bodies decode reads, one per route that takes one.
var bodies = []func() any{
	func() any { return new(proto.CreateWorkspaceRequest) },
	func() any { return new(proto.CreateSessionRequest) },
	func() any { return new(proto.LogRequest) },
	func() any { return new(proto.SetModelRequest) },
	func() any { return new(proto.ResumeRequest) },
	func() any { return new(proto.PromptRequest) },
	func() any { return new(proto.PermissionAnswer) },
	func() any { return new(proto.ToolCallAnswer) },
	func() any { return new(struct{}) },
}

// Whatever a client sends as a body, decoding it never panics and never
// yields an error that would be answered 5xx: a bad body is the client's
// mistake, a 4xx with the contract's error body.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), []byte(`{"path": "/tmp"}`))
	f.Add(uint8(5), []byte(`{"session_id": "5f0c8a52-8f0e-4f55-9c1b-6f3e7a1d2b10", "prompt": "hi", "attachments": [{"type": "blob", "data": "aGk=", "mime_type": "text/plain"}]}`))
	f.Add(uint8(1), []byte(`{"tools": [{"name": "t", "parameters": {"type": "object"}}], "mcp_servers": {}}`))
	f.Add(uint8(8), []byte(``))
	f.Add(uint8(6), []byte(`{"decision": 1}`))
	f.Add(uint8(2), []byte(`[1, 2]`))
	f.Add(uint8(3), []byte(`{"model": "x"} {"model": "y"}`))
	f.Add(uint8(4), []byte("{\"sesion_id\": \"\xff\"}"))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		v := bodies[int(kind)%len(bodies)]()
		r := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
		w := httptest.NewRecorder()
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		err := decode(r, v)
		if err == nil {
			return
		}
		code := apierr.ErrorCode(err)
		if status := statusOf(code); status >= 500 {
			t.Fatalf("body %q decoded into %T: %v, answered %d %s", body, v, err, status, code)
		}
	})
}

// Whatever a client sends as Last-Event-ID, the stream either resumes after
// a non-negative seq or answers 400; a seq it was sent parses back.
func FuzzLastEventID(f *testing.F) {
	for _, seed := range [][2]string{{"42", ""}, {"", "7"}, {"-1", ""}, {"9223372036854775808", ""}, {" 3 ", ""}, {"1e3", "5"}, {"+4", ""}, {"", ""}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, header, query string) {
		n, resume, err := parseLastEventID(header, query)
		switch {
		case err != nil:
			if status := statusOf(apierr.ErrorCode(err)); status != http.StatusBadRequest {
				t.Fatalf("(%q, %q): %v answered %d", header, query, err, status)
			}
			if len(apierr.ErrorMessage(err)) > 400 {
				t.Fatalf("(%q, %q): the message echoes the whole input: %d bytes", header, query, len(apierr.ErrorMessage(err)))
			}
			if resume || n != 0 {
				t.Fatalf("(%q, %q): an error with a resume point", header, query)
			}
		case resume:
			if n < 0 {
				t.Fatalf("(%q, %q): negative seq %d", header, query, n)
			}
			if m, _, err := parseLastEventID(strconv.FormatInt(n, 10), ""); err != nil || m != n {
				t.Fatalf("seq %d does not parse back: %d, %v", n, m, err)
			}
		default:
			if strings.TrimSpace(header) != "" || strings.TrimSpace(query) != "" {
				t.Fatalf("(%q, %q): given but ignored", header, query)
			}
		}
	})
}

func TestBodyTimeoutDefaultsToTheContracts30s(t *testing.T) {
	if got := New(Config{}).cfg.BodyTimeout; got != 30*time.Second {
		t.Fatalf("default body timeout %s, want 30s", got)
	}
}
