package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// discardingModel is an OpenAI-compatible endpoint that reads each request
// without keeping it and answers "ok". Unlike fakeModel it holds nothing of
// the 20 MiB a request may carry, so the memory the test measures in this
// process is the server's. It counts the bytes it was sent.
func discardingModel(t *testing.T) (url string, received *atomic.Int64) {
	received = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		received.Add(n)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range openAIChunks(step{text: []string{"ok"}}) {
			_, _ = io.WriteString(w, c)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, received
}

// heapSampler records the peak of the heap's objects (live and not yet
// swept) while it runs.
type heapSampler struct {
	peak uint64
	stop chan struct{}
	done chan struct{}
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			h.peak = max(h.peak, heapNow())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}

// attachmentMemoryBound is the most the server's heap may grow for a
// prompt with 20 attachments of 1 MiB (20 MiB of text): the attachments
// themselves, the user message built from them, and the request encoded for
// the model, with room for the garbage collector's timing (GOGC=100 lets
// the heap reach twice what is live).
const attachmentMemoryBound = 256 << 20

// TestAttachmentsAreBounded is defect 1: any number of 1 MiB file
// attachments was accepted, and their texts joined by repeated "+=" (200 of
// them in a 6 KiB body took the server to 4.4 GiB; 300 killed it). Now a
// prompt carries at most 20 attachments and 20 MiB decoded in all, else 413
// body_too_large and nothing changes; 20 of 1 MiB run with the server's
// heap growing by less than attachmentMemoryBound.
func TestAttachmentsAreBounded(t *testing.T) {
	modelURL, received := discardingModel(t)
	e := startEnv(t)
	line := bytes.Repeat([]byte("0123456789abcdef"), 4)
	line[len(line)-1] = '\n'
	mib := bytes.Repeat(line, (1<<20)/len(line))
	require.Len(t, mib, 1<<20)
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "big.txt"), mib, 0o644))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{
		"model":    "openai/gpt-test",
		"provider": map[string]any{"type": "openai", "base_url": modelURL + "/v1", "api_key": "sk-test"},
	})
	files := func(n int) []proto.Attachment {
		var out []proto.Attachment
		for range n {
			out = append(out, proto.Attachment{Type: "file", Path: "big.txt"})
		}
		return out
	}
	agent := "/v1/workspaces/" + ws.ID + "/agent"

	// Refused, and nothing changed: no run, no message, no model request.
	blob := proto.Attachment{Type: "blob", MimeType: "text/plain", Data: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 2<<20))}
	for name, atts := range map[string][]proto.Attachment{
		"21 attachments":         files(21),
		"300 attachments":        files(300),
		"over 20 MiB decoded":    append(files(19), blob),
		"21 tiny blobs and more": append(files(1), make([]proto.Attachment, 20)...),
	} {
		detail := e.scRefused("POST", agent, proto.PromptRequest{SessionID: sess.ID, Prompt: "look", Attachments: atts},
			http.StatusRequestEntityTooLarge, proto.CodeBodyTooLarge)
		assert.NotEmpty(t, detail.Message, name)
	}
	var got proto.Session
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID), nil, &got)
	assert.Equal(t, 0, got.MessageCount, "a refused prompt changes nothing")
	assert.Zero(t, received.Load(), "the model was not called")

	// 20 of 1 MiB: accepted, sent to the model whole, with bounded memory.
	// A frequent collector makes the peak follow what is live, rather than
	// when the collector happened to run.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := heapNow()
	h := sampleHeap()
	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", agent, proto.PromptRequest{SessionID: sess.ID, Prompt: "look", Attachments: files(20)}, &acc)
	rc := s.completionWithin(acc.RunID, time.Minute) // 20 MiB through -race takes a while
	peak := h.end()
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	growth := int64(peak) - int64(base)
	t.Logf("20 attachments of 1 MiB: heap %d MiB before, peak %d MiB, growth %d MiB; model sent %d MiB",
		base>>20, peak>>20, growth>>20, received.Load()>>20)
	assert.Less(t, growth, int64(attachmentMemoryBound), "the server's heap grew by %d MiB", growth>>20)
	assert.Greater(t, received.Load(), int64(20<<20), "every attachment reached the model")
}

// completionWithin waits up to d for the run.completed of runID.
func (s *stream) completionWithin(runID string, d time.Duration) proto.RunCompleted {
	s.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case f, ok := <-s.frames:
			require.True(s.t, ok, "stream ended before run.completed of %s", runID)
			if f.Event != proto.EventRunCompleted {
				continue
			}
			var rc proto.RunCompleted
			require.NoError(s.t, json.Unmarshal(f.envelope(s.t).Data, &rc))
			if rc.RunID == runID {
				return rc
			}
		case <-deadline:
			s.t.Fatalf("no run.completed of %s within %v", runID, d)
		}
	}
}
