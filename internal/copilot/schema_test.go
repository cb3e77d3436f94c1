package copilot

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tandem-dev/tandem/internal/copilot/sdkschema"
	"github.com/tandem-dev/tandem/proto"
)

// everyKind is a session's history with every kind of Tandem event the
// bridge translates, each outcome and level and permission kind included.
func everyKind() []proto.Event {
	user := proto.Message{ID: "u", Role: proto.RoleUser, RunID: "r1", Parts: []proto.Part{{Type: proto.PartText, Text: "hi"}}}
	asst := proto.Message{ID: "a", Role: proto.RoleAssistant, RunID: "r1", Parts: []proto.Part{
		{Type: proto.PartText, Text: "running it"},
		{Type: proto.PartToolCall, ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"echo done"}`)},
		{Type: proto.PartFinish, Reason: proto.FinishToolUse},
	}}
	var evs []proto.Event
	add := func(typ string, data any, ephemeral bool) {
		evs = append(evs, tevent(int64(len(evs)+1), typ, data, ephemeral))
	}
	add(proto.EventSessionStarted, proto.SessionStarted{SessionID: "s", Model: "openai/gpt-4.1", ReasoningEffort: "high", Context: proto.SessionContext{Cwd: "/w"}}, false)
	add(proto.EventSessionModelChanged, proto.SessionModelChanged{Model: "openai/gpt-4.1", PreviousModel: "openai/o3", ReasoningEffort: "low"}, false)
	for _, level := range []string{"info", "warning", "error", ""} {
		add(proto.EventSessionLog, proto.SessionLog{Level: level, Message: "a line"}, level == "info")
	}
	add(proto.EventMessageCreated, user, false)
	add(proto.EventRunStarted, proto.RunStarted{RunID: "r1"}, false)
	add(proto.EventMessageUpdated, asst, false)
	add(proto.EventToolStarted, proto.ToolStarted{ToolCallID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"echo done"}`)}, false)
	for _, kind := range []string{proto.PermissionShell, proto.PermissionWrite, proto.PermissionRead, "mcp"} {
		add(proto.EventPermissionRequested, proto.PermissionRequest{RequestID: "p-" + kind, ToolCallID: "call_1", ToolName: "bash", Kind: kind, Summary: "do it",
			Details: map[string]any{"command": "echo done", "path": "/w/a", "diff": "+a", "arguments": map[string]any{"x": 1}}}, false)
	}
	for _, res := range []string{proto.ResultApproved, proto.ResultApprovedForSession, proto.ResultDeniedNoClient, proto.ResultDeniedByRule, proto.ResultCanceled, "denied"} {
		add(proto.EventPermissionResolved, proto.PermissionResolved{RequestID: "p-shell", Result: res}, false)
	}
	add(proto.EventToolFinished, proto.ToolFinished{ToolCallID: "call_1", Name: "bash", Content: "done\n"}, false)
	add(proto.EventToolFinished, proto.ToolFinished{ToolCallID: "call_1", Name: "bash", Content: "boom", IsError: true}, false)
	add(proto.EventToolRequested, proto.ToolCallRequest{RequestID: "t1", ToolCallID: "call_2", ToolName: "mine", Arguments: json.RawMessage(`{"a":1}`)}, false)
	add(proto.EventToolResolved, proto.ToolResolved{RequestID: "t1"}, false)
	for _, outcome := range []string{proto.OutcomeEndTurn, proto.OutcomeCanceled, proto.OutcomeInterrupted, proto.OutcomeError} {
		add(proto.EventRunStarted, proto.RunStarted{RunID: "r-" + outcome}, false)
		add(proto.EventRunCompleted, proto.RunCompleted{RunID: "r-" + outcome, Outcome: outcome, Error: &proto.ErrorDetail{Code: "model_error", Message: "boom"}}, false)
	}
	add(proto.EventSessionResumed, proto.SessionResumed{ContinuePendingWork: true, SessionWasActive: true}, false)
	add(proto.EventSessionIdle, proto.Empty{}, true)
	return evs
}

// Every event the bridge sends passes the SDK's own types as strictly as
// the strictest SDKs read them: enums (the abort reason), UUID ids,
// required fields.
func TestEveryTranslatedEventPassesTheSDKSchema(t *testing.T) {
	tr := newTranslator("s", "v", func(m string) string { return strings.TrimPrefix(m, "openai/") }, newExtraStore())
	seen := map[string]bool{}
	for _, ev := range everyKind() {
		for _, e := range tr.translate(ev) {
			seen[e.Type] = true
			raw, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := sdkschema.Event(raw); err != nil {
				t.Errorf("Tandem %s became %s, which the SDK refuses: %v\n%s", ev.Type, e.Type, err, raw)
			}
		}
	}
	for _, typ := range []string{"session.start", "session.resume", "session.model_change", "session.info", "session.warning",
		"session.error", "session.idle", "assistant.turn_start", "assistant.turn_end", "abort", "user.message", "assistant.message",
		"tool.execution_start", "tool.execution_complete", "permission.requested", "permission.completed",
		"external_tool.requested", "external_tool.completed"} {
		if !seen[typ] {
			t.Errorf("no %s was translated: the test misses a case", typ)
		}
	}
}

// The checker itself refuses what the strict SDKs refuse.
func TestSDKSchemaRefusesWhatStrictSDKsRefuse(t *testing.T) {
	const id = "6f1d9a52-3c0e-4f7b-9a43-2b8c1d7e5a10"
	for _, bad := range []string{
		`{"id":"` + id + `","timestamp":"2026-01-01T00:00:00Z","parentId":null,"type":"abort","data":{"reason":"user initiated"}}`,
		`{"id":"7","timestamp":"2026-01-01T00:00:00Z","parentId":null,"type":"abort","data":{"reason":"user_initiated"}}`,
		`{"id":"` + id + `","timestamp":"2026-01-01T00:00:00Z","parentId":null,"type":"abort","data":{}}`,
		`{"id":"` + id + `","timestamp":"2026-01-01T00:00:00Z","parentId":null,"type":"no.such.event","data":{}}`,
	} {
		if err := sdkschema.Event([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if err := sdkschema.Result("session.log", []byte(`{"eventId":"12"}`)); err == nil {
		t.Error("accepted a session.log eventId that is a sequence number")
	}
	if err := sdkschema.Result("session.log", []byte(`{"eventId":"`+id+`"}`)); err != nil {
		t.Errorf("refused a UUID eventId: %v", err)
	}
}

// Fuzz the translation: whatever a Tandem event holds, what the bridge
// makes of it is something every SDK reads.
func FuzzTranslateAgainstTheSDKSchema(f *testing.F) {
	for _, ev := range everyKind() {
		f.Add(ev.Type, []byte(ev.Data), ev.Seq, ev.Ephemeral)
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte, seq int64, ephemeral bool) {
		tr := newTranslator("s", "v", func(m string) string { return m }, newExtraStore())
		ev := proto.Event{Seq: seq, Type: typ, Data: data, Ephemeral: ephemeral, Time: proto.Now()}
		for _, e := range tr.translate(ev) {
			raw, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
			if err := sdkschema.Event(raw); err != nil {
				t.Fatalf("Tandem %s %q became %s, which the SDK refuses: %v\n%s", typ, data, e.Type, err, raw)
			}
		}
	})
}
