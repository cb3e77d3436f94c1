package copilot

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/tandem-dev/tandem/proto"
)

// Event is a session event as the protocol carries it.
type Event struct {
	ID        string  `json:"id"`
	Timestamp string  `json:"timestamp"`
	ParentID  *string `json:"parentId"`
	Type      string  `json:"type"`
	Data      any     `json:"data"`
	Ephemeral bool    `json:"ephemeral,omitempty"`
}

// eventNamespace makes event ids: a Tandem event's translations get ids that
// are the same every time it is translated, live or from history.
var eventNamespace = uuid.MustParse("6f1d9a52-3c0e-4f7b-9a43-2b8c1d7e5a10")

// eventID is the id of the i-th protocol event of the session's Tandem event
// seq: a UUID, as the protocol's schema says.
func eventID(sessionID string, seq int64, i int) string {
	return uuid.NewSHA1(eventNamespace, fmt.Appendf(nil, "%s/%d/%d", sessionID, seq, i)).String()
}

// abortReason is the reason of the abort event of a run that a cancel or
// an interruption ended: the schema's enum (user_initiated, remote_command,
// user_abort, autopilot_credit_limit) has no other word for either.
const abortReason = "user_initiated"

// translator turns a session's Tandem events into protocol events. It keeps
// what a later event needs of earlier ones (tool names, the current turn).
type translator struct {
	sessionID string
	version   string
	model     func(string) string // Tandem model name → SDK model name
	extras    *extraStore

	lastID   string
	turn     int
	toolName map[string]string
	idleSent bool
}

func newTranslator(sessionID, version string, model func(string) string, extras *extraStore) *translator {
	return &translator{sessionID: sessionID, version: version, model: model, extras: extras, toolName: map[string]string{}}
}

// translate returns the protocol events of one Tandem event; none for the
// events the protocol has no word for.
func (t *translator) translate(ev proto.Event) []Event {
	var out []Event
	add := func(typ string, data any, ephemeral bool) {
		id := eventID(t.sessionID, ev.Seq, len(out))
		e := Event{ID: id, Timestamp: ev.Time.UTC().Format(time.RFC3339Nano), Type: typ, Data: data, Ephemeral: ephemeral}
		if t.lastID != "" {
			p := t.lastID
			e.ParentID = &p
		}
		if !ephemeral {
			t.lastID = id
		}
		out = append(out, e)
	}
	switch ev.Type {
	case proto.EventSessionStarted:
		var d proto.SessionStarted
		_ = json.Unmarshal(ev.Data, &d)
		data := map[string]any{
			"sessionId": t.sessionID, "version": 1, "producer": "tandem", "copilotVersion": t.version,
			"startTime": ev.Time.UTC().Format(time.RFC3339Nano), "selectedModel": t.model(d.Model),
			"context": map[string]any{"cwd": d.Context.Cwd},
		}
		if d.ReasoningEffort != "" {
			data["reasoningEffort"] = d.ReasoningEffort
		}
		add("session.start", data, false)
	case proto.EventSessionResumed:
		var d proto.SessionResumed
		_ = json.Unmarshal(ev.Data, &d)
		add("session.resume", map[string]any{
			"resumeTime": ev.Time.UTC().Format(time.RFC3339Nano), "eventCount": ev.Seq,
			"continuePendingWork": d.ContinuePendingWork, "sessionWasActive": d.SessionWasActive,
		}, false)
	case proto.EventSessionModelChanged:
		var d proto.SessionModelChanged
		_ = json.Unmarshal(ev.Data, &d)
		data := map[string]any{"newModel": t.model(d.Model)}
		if d.PreviousModel != "" {
			data["previousModel"] = t.model(d.PreviousModel)
		}
		if d.ReasoningEffort != "" {
			data["reasoningEffort"] = d.ReasoningEffort
		}
		add("session.model_change", data, false)
	case proto.EventSessionLog:
		var d proto.SessionLog
		_ = json.Unmarshal(ev.Data, &d)
		switch d.Level {
		case "warning", "warn":
			add("session.warning", map[string]any{"warningType": "notification", "message": d.Message}, ev.Ephemeral)
		case "error":
			add("session.error", map[string]any{"errorType": "notification", "message": d.Message}, ev.Ephemeral)
		default:
			add("session.info", map[string]any{"infoType": "notification", "message": d.Message}, ev.Ephemeral)
		}
	case proto.EventSessionIdle:
		add("session.idle", map[string]any{}, true)
	case proto.EventRunStarted:
		t.turn++
		add("assistant.turn_start", map[string]any{"turnId": fmt.Sprint(t.turn)}, false)
	case proto.EventRunCompleted:
		var d proto.RunCompleted
		_ = json.Unmarshal(ev.Data, &d)
		switch d.Outcome {
		case proto.OutcomeCanceled, proto.OutcomeInterrupted:
			add("abort", map[string]any{"reason": abortReason}, false)
		case proto.OutcomeError:
			msg := "the run failed"
			if d.Error != nil {
				msg = d.Error.Message
			}
			add("session.error", map[string]any{"errorType": "model_call", "message": msg}, false)
		}
		add("assistant.turn_end", map[string]any{"turnId": fmt.Sprint(t.turn)}, false)
	case proto.EventMessageCreated, proto.EventMessageUpdated:
		var m proto.Message
		if json.Unmarshal(ev.Data, &m) != nil {
			break
		}
		switch m.Role {
		case proto.RoleUser:
			if ev.Type != proto.EventMessageCreated {
				break
			}
			add("user.message", t.userMessage(m), false)
		case proto.RoleAssistant:
			if !hasFinish(m) {
				break // the message is complete when its finish part is there
			}
			var text strings.Builder
			reqs := []map[string]any{}
			for _, p := range m.Parts {
				switch p.Type {
				case proto.PartText:
					text.WriteString(p.Text)
				case proto.PartToolCall:
					t.toolName[p.ID] = p.Name
					var args any
					_ = json.Unmarshal(p.Arguments, &args)
					reqs = append(reqs, map[string]any{"toolCallId": p.ID, "name": p.Name, "arguments": args, "type": "function"})
				}
			}
			if text.Len() == 0 && len(reqs) == 0 {
				break
			}
			add("assistant.message", map[string]any{"messageId": m.ID, "content": text.String(), "toolRequests": reqs}, false)
		}
	case proto.EventToolStarted:
		var d proto.ToolStarted
		_ = json.Unmarshal(ev.Data, &d)
		t.toolName[d.ToolCallID] = d.Name
		var args any
		_ = json.Unmarshal(d.Arguments, &args)
		add("tool.execution_start", map[string]any{"toolCallId": d.ToolCallID, "toolName": d.Name, "arguments": args}, false)
	case proto.EventToolFinished:
		var d proto.ToolFinished
		_ = json.Unmarshal(ev.Data, &d)
		data := map[string]any{"toolCallId": d.ToolCallID, "success": !d.IsError}
		if d.IsError {
			data["error"] = map[string]any{"message": d.Content}
		} else {
			data["result"] = map[string]any{"content": d.Content}
		}
		add("tool.execution_complete", data, false)
	case proto.EventPermissionRequested:
		var d proto.PermissionRequest
		_ = json.Unmarshal(ev.Data, &d)
		add("permission.requested", map[string]any{"requestId": d.RequestID, "permissionRequest": permissionRequest(d)}, false)
	case proto.EventPermissionResolved:
		var d proto.PermissionResolved
		_ = json.Unmarshal(ev.Data, &d)
		result := map[string]any{"kind": permissionResultKind(d.Result)}
		if result["kind"] == "denied-by-rules" {
			// The schema requires the rules that denied it; Tandem's rule
			// is not in the SDK's shape, so none is named.
			result["rules"] = []any{}
		}
		add("permission.completed", map[string]any{"requestId": d.RequestID, "result": result}, false)
	case proto.EventToolRequested:
		var d proto.ToolCallRequest
		_ = json.Unmarshal(ev.Data, &d)
		var args any
		_ = json.Unmarshal(d.Arguments, &args)
		add("external_tool.requested", map[string]any{
			"requestId": d.RequestID, "sessionId": t.sessionID, "toolCallId": d.ToolCallID,
			"toolName": d.ToolName, "arguments": args,
		}, false)
	case proto.EventToolResolved:
		var d proto.ToolResolved
		_ = json.Unmarshal(ev.Data, &d)
		add("external_tool.completed", map[string]any{"requestId": d.RequestID}, false)
	}
	return out
}

func hasFinish(m proto.Message) bool {
	for _, p := range m.Parts {
		if p.Type == proto.PartFinish {
			return true
		}
	}
	return false
}

func (t *translator) userMessage(m proto.Message) map[string]any {
	var text strings.Builder
	for _, p := range m.Parts {
		if p.Type == proto.PartText {
			text.WriteString(p.Text)
		}
	}
	data := map[string]any{"content": text.String()}
	if x, ok := t.extras.get(m.RunID); ok {
		if x.content != "" {
			data["content"] = x.content
		}
		if len(x.attachments) > 0 {
			data["attachments"] = x.attachments
		}
		if x.agentMode != "" {
			data["agentMode"] = x.agentMode
		}
	}
	return data
}

// permissionRequest is a Tandem permission request in the SDK's shape.
func permissionRequest(d proto.PermissionRequest) map[string]any {
	r := map[string]any{"toolCallId": d.ToolCallID, "toolName": d.ToolName}
	detail := func(k string) string {
		s, _ := d.Details[k].(string)
		return s
	}
	switch d.Kind {
	case proto.PermissionShell:
		cmd := detail("command")
		r["kind"] = "shell"
		r["fullCommandText"] = cmd
		r["intention"] = d.Summary
		r["commands"] = []map[string]any{{"identifier": cmd, "readOnly": false}}
		r["possiblePaths"] = []string{}
		r["possibleUrls"] = []any{}
		r["hasWriteFileRedirection"] = false
		r["canOfferSessionApproval"] = true
	case proto.PermissionWrite:
		r["kind"] = "write"
		r["fileName"] = detail("path")
		r["intention"] = d.Summary
		r["diff"] = detail("diff")
		r["canOfferSessionApproval"] = true
	case proto.PermissionRead:
		r["kind"] = "read"
		r["path"] = detail("path")
		r["intention"] = d.Summary
	default:
		r["kind"] = "custom-tool"
		r["toolDescription"] = d.Summary
		if args, ok := d.Details["arguments"]; ok {
			r["args"] = args
		}
	}
	return r
}

func permissionResultKind(result string) string {
	switch result {
	case proto.ResultApproved, proto.ResultApprovedByRule:
		return "approved"
	case proto.ResultApprovedForSession:
		return "approved-for-session"
	case proto.ResultDeniedNoClient:
		return "denied-no-approval-rule-and-could-not-request-from-user"
	case proto.ResultDeniedByRule, proto.ResultDeniedByMode:
		return "denied-by-rules"
	case proto.ResultCanceled:
		return "cancelled"
	}
	return "denied-interactively-by-user"
}

// extra is what a prompt carried that Tandem does not keep.
type extra struct {
	content     string
	attachments []json.RawMessage
	agentMode   string
}

// extraStore keeps extras by run id, bounded in count and in bytes (a
// send's blobs travel inline, up to a frame each): the oldest go first.
type extraStore struct {
	mu    sync.Mutex
	byRun map[string]extra
	order []string
	bytes int
}

const (
	maxExtras     = 1024
	maxExtraBytes = 64 << 20
)

func newExtraStore() *extraStore { return &extraStore{byRun: map[string]extra{}} }

func (x extra) size() int {
	n := len(x.content) + len(x.agentMode)
	for _, a := range x.attachments {
		n += len(a)
	}
	return n
}

func (s *extraStore) put(runID string, x extra) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byRun[runID]; ok {
		s.bytes -= old.size()
		s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == runID })
	}
	for len(s.order) > 0 && (len(s.order) >= maxExtras || s.bytes+x.size() > maxExtraBytes) {
		s.bytes -= s.byRun[s.order[0]].size()
		delete(s.byRun, s.order[0])
		s.order = s.order[1:]
	}
	s.byRun[runID] = x
	s.order = append(s.order, runID)
	s.bytes += x.size()
}

func (s *extraStore) get(runID string) (extra, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.byRun[runID]
	return x, ok
}
