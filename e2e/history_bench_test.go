package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkStepWithHistory measures one model step (a run whose answer is a
// few words) in a session imported with `history` messages, through the
// real OpenAI provider against a model that only drains the request and
// streams a canned answer: what a step costs the server as its history
// grows. A step re-sends the whole history, so its bytes must be copied to
// the socket; the rest of its work should follow the new messages only.
// cpu-µs/step is this process's CPU per step (the server's, the model's
// draining and the client's, the latter two the same at every length).
func BenchmarkStepWithHistory(b *testing.B) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{"", "word ", "word ", "word "} {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"content":"`+c+`"},"finish_reason":null}]}`+"\n\n")
		}
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer model.Close()
	b.Setenv("OPENAI_API_KEY", "bench")
	b.Setenv("OPENAI_BASE_URL", model.URL+"/v1")
	for _, history := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			_, base, client, cleanup := benchServerWith(b, func(c *serverConfig) { c.DefaultModel = "openai/fake" })
			defer cleanup()
			wsID := benchWorkspace(b, client, base)
			sid := benchImport(b, client, base, wsID, history)
			frames, stop := benchStream(b, base, wsID)
			defer stop()
			n := 0
			run := func() { // each prompt its own, as a user's are
				benchRunToIdle(b, client, base, wsID, sid, fmt.Sprintf("step %d: go on", n), frames)
				n++
			}
			for range 5 { // the first run loads the history
				run()
			}
			cpu := processCPU()
			n = 0
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(n), "cpu-µs/step")
		})
	}
}

// benchImport imports a session with a history of n messages (a prompt,
// an answer of a few hundred bytes, and so on) and returns its id.
func benchImport(b *testing.B, client *http.Client, base, wsID string, n int) string {
	b.Helper()
	// Each answer its own text, as in a real session.
	answer := func(i int) string {
		return fmt.Sprintf("Turn %d: ", i) + strings.Repeat("Changed the parser to keep the last token, ran the tests: all pass. ", 6)
	}
	now := proto.Time{Time: time.Now().UTC()}
	doc := proto.Export{Format: "tandem.session.v1", Session: proto.Session{ID: uuid.NewString()}}
	for i := range n {
		m := proto.Message{ID: uuid.NewString(), CreatedAt: now, UpdatedAt: now, Role: proto.RoleUser,
			Parts: []proto.Part{{Type: proto.PartText, Text: fmt.Sprintf("earlier prompt %d: make the tests pass and explain what you changed", i/2)}}}
		if i%2 == 1 {
			m.Role = proto.RoleAssistant
			m.Parts = []proto.Part{{Type: proto.PartText, Text: answer(i)}, {Type: proto.PartFinish, Reason: proto.FinishEndTurn}}
		}
		doc.Messages = append(doc.Messages, m)
	}
	status, raw := benchPost(b, client, base+"/v1/workspaces/"+wsID+"/sessions/import", doc)
	require.Equal(b, http.StatusCreated, status, "%s", raw)
	var s proto.Session
	require.NoError(b, json.Unmarshal(raw, &s))
	return s.ID
}
