package workspace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// No event's data exceeds 1 MiB, whatever a caller hands the log: a long
// string is cut, saying how much, and what is stored is what is streamed.
func TestEventDataOverTheBoundIsCut(t *testing.T) {
	ctx := context.Background()
	ws, db := openWorkspace(t, nil)
	sid := "7d1b2c35-7b43-4d3a-9a52-3f0c5d7e1a10"

	// 2 MiB of characters JSON escapes six times over.
	ev, err := ws.Emit(ctx, Draft{Type: proto.EventSessionLog, SessionID: sid, Data: proto.SessionLog{Level: "info", Message: strings.Repeat("<", 2<<20)}})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(ev.Data), MaxEventData)
	var log proto.SessionLog
	require.NoError(t, json.Unmarshal(ev.Data, &log))
	assert.Equal(t, "info", log.Level)
	assert.Regexp(t, `^<+… \[\d+ bytes cut\]$`, log.Message)

	msg := proto.Message{ID: "0191b5a0-0000-7000-8000-000000000001", SessionID: sid, Role: proto.RoleAssistant, Parts: []proto.Part{
		{Type: proto.PartText, Text: "short"},
		{Type: proto.PartToolCall, ID: "call_1", Name: "write", Arguments: json.RawMessage(`{"path": "a", "content": "` + strings.Repeat("z", 3<<20) + `"}`)},
	}}
	mev, err := ws.Emit(ctx, Draft{Type: proto.EventMessageUpdated, SessionID: sid, Message: &msg})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(mev.Data), MaxEventData)
	stored, err := db.ListMessages(ctx, sid)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	got := stored[0]
	assert.Equal(t, "short", got.Parts[0].Text)
	assert.Contains(t, string(got.Parts[1].Arguments), "bytes cut]")
	encoded, _ := json.Marshal(got)
	assert.JSONEq(t, string(mev.Data), string(encoded), "the stored message is the streamed one")

	recs, err := db.WorkspaceEvents(ctx, ws.ID, 0, 0, 0)
	require.NoError(t, err)
	for _, r := range recs {
		var env proto.Event
		require.NoError(t, json.Unmarshal(r.Envelope, &env))
		assert.LessOrEqual(t, len(env.Data), MaxEventData)
	}
}

// A value too large for its strings alone to be cut (many small parts)
// still fits, its arrays cut short.
func TestFitCutsArraysWhenStringsAreNotEnough(t *testing.T) {
	parts := make([]int, 300_000)
	data, _ := json.Marshal(map[string]any{"n": parts, "s": "small"})
	out := fit(data, 64<<10)
	assert.LessOrEqual(t, len(out), 64<<10)
	var v map[string]any
	require.NoError(t, json.Unmarshal(out, &v))
	assert.Equal(t, "small", v["s"])
	n := v["n"].([]any)
	assert.Regexp(t, `^\[\d+ items, \d+ bytes cut\]$`, n[len(n)-1])
}

func FuzzFit(f *testing.F) {
	f.Add([]byte(`{"a": "hello world, hello world, hello world, hello world, hello world, hello world"}`), 40)
	f.Add([]byte(`{"a": ["<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<", 1, 2, 3], "b": {"c": "ééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé"}}`), 100)
	f.Add([]byte(`[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]`), 10)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		if !json.Valid(data) || limit < 64 || limit > 1<<20 {
			return
		}
		out := fit(data, limit)
		if !json.Valid(out) {
			t.Fatalf("fit gave invalid JSON %q", out)
		}
		if len(out) > limit && len(out) > len(notice(len(data))) {
			t.Fatalf("fit gave %d bytes for a limit of %d", len(out), limit)
		}
	})
}
