package copilot

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tandem-dev/tandem/proto"
)

func tevent(seq int64, typ string, data any, ephemeral bool) proto.Event {
	raw, _ := json.Marshal(data)
	return proto.Event{Seq: seq, Type: typ, Data: raw, Ephemeral: ephemeral, Time: proto.Now()}
}

// A turn's events come out in the protocol's words, each the child of the
// one before; housekeeping events are ephemeral and nobody's parent; the
// same history gives the same ids every time.
func TestTranslateTurn(t *testing.T) {
	hist := []proto.Event{
		tevent(1, proto.EventSessionStarted, proto.SessionStarted{SessionID: "s", Model: "openai/gpt-4.1"}, false),
		tevent(2, proto.EventMessageCreated, proto.Message{ID: "u", Role: proto.RoleUser, RunID: "r", Parts: []proto.Part{{Type: proto.PartText, Text: "hi"}}}, false),
		tevent(3, proto.EventRunStarted, proto.RunStarted{RunID: "r"}, false),
		tevent(4, proto.EventMessageCreated, proto.Message{ID: "a", Role: proto.RoleAssistant}, false),
		tevent(5, proto.EventMessageUpdated, proto.Message{ID: "a", Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartText, Text: "hello"}, {Type: proto.PartFinish, Reason: proto.FinishEndTurn}}}, false),
		tevent(6, proto.EventRunCompleted, proto.RunCompleted{RunID: "r", Outcome: proto.OutcomeCanceled}, false),
		tevent(7, proto.EventSessionIdle, proto.Empty{}, true),
	}
	run := func() []Event {
		tr := newTranslator("s", "v", func(m string) string { return m[len("openai/"):] }, newExtraStore())
		var out []Event
		for _, ev := range hist {
			out = append(out, tr.translate(ev)...)
		}
		return out
	}
	out := run()
	var types []string
	for _, e := range out {
		types = append(types, e.Type)
	}
	want := []string{"session.start", "user.message", "assistant.turn_start", "assistant.message", "abort", "assistant.turn_end", "session.idle"}
	if len(types) != len(want) {
		t.Fatalf("types = %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("types = %v, want %v", types, want)
		}
	}
	if out[0].ParentID != nil {
		t.Fatalf("session.start has a parent")
	}
	for i := 1; i < len(out); i++ {
		if out[i].ParentID == nil || *out[i].ParentID != out[i-1].ID {
			t.Fatalf("event %d (%s) is not the child of event %d", i, out[i].Type, i-1)
		}
	}
	if !out[len(out)-1].Ephemeral {
		t.Fatalf("session.idle is not ephemeral")
	}
	if d := out[0].Data.(map[string]any); d["selectedModel"] != "gpt-4.1" {
		t.Fatalf("selectedModel = %v", d["selectedModel"])
	}
	again := run()
	for i := range out {
		if out[i].ID != again[i].ID {
			t.Fatalf("event %d got id %s, then %s", i, out[i].ID, again[i].ID)
		}
	}
}

func TestPermissionRequestShapes(t *testing.T) {
	w := permissionRequest(proto.PermissionRequest{Kind: proto.PermissionWrite, ToolCallID: "c", Details: map[string]any{"path": "a.txt"}})
	if w["kind"] != "write" || w["fileName"] != "a.txt" || w["toolCallId"] != "c" {
		t.Fatalf("write request = %v", w)
	}
	s := permissionRequest(proto.PermissionRequest{Kind: proto.PermissionShell, Details: map[string]any{"command": "ls"}})
	if s["kind"] != "shell" || s["fullCommandText"] != "ls" {
		t.Fatalf("shell request = %v", s)
	}
	if c := permissionRequest(proto.PermissionRequest{Kind: proto.PermissionCustomTool}); c["kind"] != "custom-tool" {
		t.Fatalf("custom tool request = %v", c)
	}
	if got := permissionResultKind(proto.ResultDeniedByUser); got != "denied-interactively-by-user" {
		t.Fatalf("denied by user = %q", got)
	}
}

// What the bridge keeps of sends for their user.message is bounded in bytes
// as in count: large blobs push the oldest out, the newest stays.
func TestExtrasAreBoundedInBytes(t *testing.T) {
	s := newExtraStore()
	blob := json.RawMessage(`{"type":"blob","data":"` + strings.Repeat("A", 8<<20) + `"}`)
	for i := range 20 {
		s.put(fmt.Sprint(i), extra{content: "look", attachments: []json.RawMessage{blob}})
	}
	if s.bytes > maxExtraBytes {
		t.Fatalf("kept %d bytes of extras, over %d", s.bytes, maxExtraBytes)
	}
	if _, ok := s.get("19"); !ok {
		t.Fatal("the newest send's extras are gone")
	}
	if _, ok := s.get("0"); ok {
		t.Fatal("the oldest send's extras are kept past the bound")
	}
	n := 0
	for _, x := range s.byRun {
		n += x.size()
	}
	if n != s.bytes || len(s.byRun) != len(s.order) {
		t.Fatalf("accounting: %d bytes counted, %d kept; %d runs, %d in order", s.bytes, n, len(s.byRun), len(s.order))
	}
}
