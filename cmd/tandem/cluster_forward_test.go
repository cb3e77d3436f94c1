package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// openAIRecorder is an OpenAI-compatible model server that records the
// body of every request and answers each with "done".
type openAIRecorder struct {
	srv      *httptest.Server
	requests chan string
}

func newOpenAIRecorder(t *testing.T) *openAIRecorder {
	f := &openAIRecorder{requests: make(chan string, 64)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		select {
		case f.requests <- string(raw):
		default:
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
			})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		chunk(map[string]any{"role": "assistant", "content": "done"}, nil)
		chunk(map[string]any{}, "stop")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// next returns the body of the next request the model got.
func (f *openAIRecorder) next(t *testing.T) string {
	t.Helper()
	select {
	case body := <-f.requests:
		return body
	case <-time.After(30 * time.Second):
		t.Fatal("the model got no request")
	}
	return ""
}

// A prompt a single node accepts is accepted through any node: one whose
// attachments (base64 in its JSON body) are several times NATS's 1 MiB
// message size, sent to a node that does not own the workspace, reaches
// the model whole. And an answer larger than one message (a session's
// messages) comes back whole through that node too.
func TestClusterForwardsLargeBodiesAndAnswers(t *testing.T) {
	c := startCluster(t, 2)
	model := newOpenAIRecorder(t)
	ws, _ := c.workspace(0) // node 1 owns it; node 2 forwards
	var sess proto.Session
	require.Equal(t, http.StatusCreated, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{
		"model":    "openai/fake",
		"provider": map[string]any{"type": "openai", "base_url": model.srv.URL, "api_key": "test-key"},
	}, &sess))
	stream := openStream(t, c.url(1), ws.ID, -1)

	var images []string
	var atts []proto.Attachment
	for i := range 3 {
		raw := make([]byte, 1<<20+i)
		_, _ = rand.Read(raw)
		images = append(images, base64.StdEncoding.EncodeToString(raw))
		atts = append(atts, proto.Attachment{Type: "blob", MimeType: "image/png", Data: images[i], DisplayName: fmt.Sprintf("shot%d.png", i)})
	}
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, crashCall(t, c.url(1), "POST", "/v1/workspaces/"+ws.ID+"/agent",
		proto.PromptRequest{SessionID: sess.ID, Prompt: "look at these", Attachments: atts}, &acc))
	body := model.next(t)
	for i, img := range images {
		assert.Contains(t, body, img, "image %d reached the model whole", i)
	}
	stream.until(t, proto.EventRunCompleted, acc.RunID)

	// Long prompts make the session's messages more than one message.
	long := strings.Repeat("many words ", 200<<10/11)
	for range 6 {
		acc = c.prompt(1, ws.ID, sess.ID, long)
		model.next(t)
		stream.until(t, proto.EventRunCompleted, acc.RunID)
	}
	var msgs proto.MessageList
	require.Equal(t, http.StatusOK, crashCall(t, c.url(1), "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/messages", ws.ID, sess.ID), nil, &msgs))
	require.Len(t, msgs.Messages, 14, "7 prompts and 7 answers")
	var parts, longs int
	for _, m := range msgs.Messages {
		for _, p := range m.Parts {
			if p.Type == proto.PartAttachment {
				parts++
			}
			if p.Type == proto.PartText && p.Text == long {
				longs++
			}
		}
	}
	assert.Equal(t, 3, parts)
	assert.Equal(t, 6, longs)
}
