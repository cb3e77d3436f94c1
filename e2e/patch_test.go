package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// PATCH changes a session's title, compaction, permission mode and tool
// lists: the answer and session.updated carry the new settings, the next run
// obeys them, a field left out keeps its value, an empty list clears one;
// a bad field is 400 and changes nothing.
func TestPatchSession(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, _ map[string]any) step {
		return step{toolCalls: []scriptedCall{{ID: fmt.Sprint("call_", n), Name: "bash", Args: `{"command":"echo hi"}`}}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	assert.Equal(t, proto.DefaultCompaction, sess.Compaction)
	path := fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID)

	var got proto.Session
	e.must(http.StatusOK, "PATCH", path, map[string]any{
		"title": "renamed", "compaction": map[string]any{"threshold": 0.5}, "permission_mode": "deny_all",
		"available_tools": []string{"bash", "view"}, "excluded_tools": []string{"view"},
	}, &got)
	assert.Equal(t, "renamed", got.Title)
	assert.Equal(t, proto.Compaction{Auto: true, Threshold: 0.5}, got.Compaction, "auto kept, threshold set")
	f, _ := s.until(proto.EventSessionUpdated)
	var announced proto.Session
	require.NoError(t, json.Unmarshal(f.envelope(t).Data, &announced))
	assert.Equal(t, got.Title, announced.Title)
	assert.Equal(t, got.Compaction, announced.Compaction)
	assert.Equal(t, got.Title, e.scSession(ws.ID, sess.ID).Title)

	// The run offers bash alone, and deny_all refuses it.
	acc := e.prompt(ws.ID, sess.ID, "run it")
	f, _ = s.until(proto.EventToolFinished)
	var tf proto.ToolFinished
	require.NoError(t, json.Unmarshal(f.envelope(t).Data, &tf))
	assert.True(t, tf.IsError, "denied by the mode")
	e.cancel(ws.ID, sess.ID)
	s.completion(acc.RunID)
	assert.Equal(t, []string{"bash"}, scOffered(t, fake.Requests()[0]))
	for _, ev := range e.scHistory(ws.ID, sess.ID) {
		assert.NotEqual(t, proto.EventPermissionRequested, ev.Type, "deny_all asks nobody")
	}

	// Left out: kept. Empty lists: cleared. Auto off, threshold kept.
	e.must(http.StatusOK, "PATCH", path, map[string]any{"available_tools": []string{}, "excluded_tools": []string{}, "compaction": map[string]any{"auto": false}}, &got)
	assert.Equal(t, "renamed", got.Title)
	assert.Equal(t, proto.Compaction{Auto: false, Threshold: 0.5}, got.Compaction)
	before := len(fake.Requests())
	acc = e.prompt(ws.ID, sess.ID, "again")
	s.until(proto.EventToolFinished)
	e.cancel(ws.ID, sess.ID)
	s.completion(acc.RunID)
	assert.Contains(t, scOffered(t, fake.Requests()[before]), "view", "every tool again")

	// Bad fields change nothing.
	for _, body := range []any{
		map[string]any{"title": ""},
		map[string]any{"title": "   "},
		map[string]any{"compaction": map[string]any{"threshold": 0}},
		map[string]any{"compaction": map[string]any{"threshold": 1.5}},
		map[string]any{"compaction": map[string]any{"threshold": "high"}},
		map[string]any{"compaction": map[string]any{"thresold": 0.5}},
		map[string]any{"permission_mode": "sometimes", "title": "not this"},
		map[string]any{"available_tools": []string{""}, "title": "nor this"},
		map[string]any{"titel": "typo"},
	} {
		e.scRefused("PATCH", path, body, http.StatusBadRequest, proto.CodeInvalidArgument)
	}
	now := e.scSession(ws.ID, sess.ID)
	assert.Equal(t, "renamed", now.Title)
	assert.Equal(t, proto.Compaction{Auto: false, Threshold: 0.5}, now.Compaction)
	e.scRefused("PATCH", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, newClientID()), map[string]any{"title": "x"}, http.StatusNotFound, proto.CodeSessionNotFound)
	e.scRefused("PATCH", path, `{"title": `, http.StatusBadRequest, proto.CodeInvalidJSON)

	// Create takes compaction too, checked the same way.
	created := e.createSession(ws.ID, map[string]any{"compaction": map[string]any{"threshold": 0.9}})
	assert.Equal(t, proto.Compaction{Auto: true, Threshold: 0.9}, created.Compaction)
	e.scRefused("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"compaction": map[string]any{"threshold": -1}}, http.StatusBadRequest, proto.CodeInvalidArgument)
}
