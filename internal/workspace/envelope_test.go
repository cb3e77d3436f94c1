package workspace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func TestEncodeEnvelopeIsJSONMarshal(t *testing.T) {
	at := proto.Time{Time: time.Date(2026, 11, 22, 5, 6, 7, 891011000, time.UTC)}
	for _, ev := range []proto.Event{
		{Seq: 1, Type: proto.EventRunAccepted, WorkspaceID: "w", SessionID: "s", RunID: "r", Time: at, Data: json.RawMessage(`{"run_id":"r"}`)},
		{Seq: 1 << 40, Type: proto.EventMessageDelta, WorkspaceID: "w", SessionID: "s", Time: at, Ephemeral: true, Data: json.RawMessage(`{"text":"a\u003cb"}`)},
		{Seq: 3, Type: proto.EventWorkspaceClosing, WorkspaceID: "w", Data: json.RawMessage(`{}`)},
		{Seq: 4, Type: "odd \"type\" <&> \n é \u2028", WorkspaceID: "w\\x", SessionID: "s\t", RunID: "r\x01", Time: at, Data: json.RawMessage(`[1,2]`)},
		{Seq: 0, Type: "", WorkspaceID: ""},
	} {
		want, err := json.Marshal(ev)
		require.NoError(t, err)
		got := encodeEnvelope(ev)
		assert.Equal(t, string(want), string(got))
		var back proto.Event
		require.NoError(t, json.Unmarshal(got, &back))
	}
}

func BenchmarkEncodeEnvelope(b *testing.B) {
	data, _ := json.Marshal(proto.Message{ID: "m", SessionID: "s", Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartText, Text: strings.Repeat("echo, ", 50)}}})
	ev := proto.Event{Seq: 12345, Type: proto.EventMessageUpdated, WorkspaceID: "0b6c1f7e-2a8f-4b7e-9d7a-3c2f1e0d9a8b", SessionID: "5d0f6b8a-1c2e-4f3a-9b8c-7d6e5f4a3b2c", RunID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Time: proto.Now(), Data: data}
	b.Run("encodeEnvelope", func(b *testing.B) {
		for b.Loop() {
			encodeEnvelope(ev)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
