// Package toolset is the tools a session's model may call: the built-in tools
// and the tools its clients offer, filtered by the session's allow and deny
// lists and dispatched with the permission checks the session's mode asks for.
package toolset

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/pending"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/tandem"
	"github.com/tandem-dev/tandem/internal/tools"
	"github.com/tandem-dev/tandem/proto"
)

// Set implements agent.Tools and keeps the client tools of every session.
type Set struct {
	builtins []tools.Tool
	// offers are the builtins as the model is offered them, made once:
	// every model step offers them, and each Schema call copies its JSON.
	offers []provider.Tool
	broker *pending.Broker

	mu       sync.Mutex
	sessions map[string]*sessionTools
}

// sessionTools are the client tools offered in one session.
type sessionTools struct {
	workspaceID string
	byClient    map[string][]proto.ToolSpec
	// gone names tools whose client left; the model hears of them once.
	gone []string
}

// New returns the tool set; broker parks permission requests and client tool calls.
func New(broker *pending.Broker) *Set {
	s := &Set{builtins: tools.Builtins(), broker: broker, sessions: make(map[string]*sessionTools)}
	for _, t := range s.builtins {
		s.offers = append(s.offers, provider.Tool{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return s
}

// Validate checks client tool specs: names a model API accepts, unique,
// parameters a JSON Schema object.
func Validate(specs []proto.ToolSpec) error {
	seen := make(map[string]bool, len(specs))
	for i, t := range specs {
		if !validName(t.Name) {
			return tandem.Invalid("tools[%d].name %q must be 1-64 letters, digits, '_' or '-'", i, t.Name)
		}
		if seen[t.Name] {
			return tandem.Invalid("tools[%d].name %q is given twice", i, t.Name)
		}
		seen[t.Name] = true
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return tandem.Invalid("tools[%d].parameters must be a JSON Schema object", i)
			}
			if typ, ok := schema["type"]; ok && typ != "object" {
				return tandem.Invalid("tools[%d].parameters.type must be \"object\"", i)
			}
		}
	}
	return nil
}

func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Register makes specs the client's tools in the session. An empty list
// changes nothing (a resume without tools removes nobody's). A name taken by
// a built-in or by another client's tool is a tool_conflict.
func (s *Set) Register(workspaceID, sessionID, clientID string, specs []proto.ToolSpec) error {
	if len(specs) == 0 {
		return nil
	}
	if err := Validate(specs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[sessionID]
	if st == nil {
		st = &sessionTools{workspaceID: workspaceID, byClient: make(map[string][]proto.ToolSpec)}
		s.sessions[sessionID] = st
	}
	for _, spec := range specs {
		for _, b := range s.builtins {
			if b.Name() == spec.Name {
				return tandem.Errorf(proto.CodeToolConflict, "tool %q clashes with a built-in tool", spec.Name)
			}
		}
		for owner, theirs := range st.byClient {
			if owner == clientID {
				continue
			}
			if slices.ContainsFunc(theirs, func(t proto.ToolSpec) bool { return t.Name == spec.Name }) {
				return tandem.Errorf(proto.CodeToolConflict, "tool %q is already offered by client %s", spec.Name, owner)
			}
		}
	}
	st.byClient[clientID] = slices.Clone(specs)
	st.gone = slices.DeleteFunc(st.gone, func(n string) bool {
		return slices.ContainsFunc(specs, func(t proto.ToolSpec) bool { return t.Name == n })
	})
	return nil
}

// DropClient removes the client's tools from every session of the workspace;
// the model's next request names them as gone.
func (s *Set) DropClient(workspaceID, clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.sessions {
		if st.workspaceID != workspaceID {
			continue
		}
		for _, t := range st.byClient[clientID] {
			st.gone = append(st.gone, t.Name)
		}
		delete(st.byClient, clientID)
	}
}

// ForgetSession drops a deleted session's tools.
func (s *Set) ForgetSession(sessionID string) {
	s.mu.Lock()
	delete(s.sessions, sessionID)
	s.mu.Unlock()
}

// allowed applies the session's allow list and deny list (which wins).
func allowed(run *agent.Run, name string) bool {
	if slices.Contains(run.ExcludedTools, name) {
		return false
	}
	return len(run.AvailableTools) == 0 || slices.Contains(run.AvailableTools, name)
}

// Offer implements agent.Tools.
func (s *Set) Offer(_ context.Context, run *agent.Run) ([]provider.Tool, []string) {
	var out []provider.Tool
	for _, t := range s.offers {
		if allowed(run, t.Name) {
			out = append(out, t)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var notes []string
	st := s.sessions[run.SessionID]
	if st == nil {
		return out, nil
	}
	var client []provider.Tool
	for _, specs := range st.byClient {
		for _, t := range specs {
			if allowed(run, t.Name) {
				params := t.Parameters
				if len(params) == 0 {
					params = json.RawMessage(`{"type":"object","properties":{}}`)
				}
				client = append(client, provider.Tool{Name: t.Name, Description: t.Description, Parameters: params})
			}
		}
	}
	sort.Slice(client, func(i, j int) bool { return client[i].Name < client[j].Name })
	if len(st.gone) > 0 {
		notes = append(notes, fmt.Sprintf("These tools are no longer available because the client offering them left: %s.", strings.Join(st.gone, ", ")))
		st.gone = nil
	}
	return append(out, client...), notes
}

// clientTool returns the client tool named name and its owners.
func (s *Set) clientTool(sessionID, name string) (spec proto.ToolSpec, owners []string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sessions[sessionID]
	if st == nil {
		return spec, nil, false
	}
	for owner, specs := range st.byClient {
		for _, t := range specs {
			if t.Name == name {
				spec, ok = t, true
				owners = append(owners, owner)
			}
		}
	}
	sort.Strings(owners)
	return spec, owners, ok
}

// Call implements agent.Tools.
func (s *Set) Call(ctx context.Context, run *agent.Run, call provider.ToolCall) agent.ToolResult {
	ref := pending.Ref{
		Workspace: run.Workspace, SessionID: run.SessionID, RunID: run.ID,
		ToolCallID: call.ID, ToolName: call.Name, Suspend: run.Commit, Announce: run.Announce,
	}
	if !allowed(run, call.Name) {
		return unknownTool(call.Name)
	}
	for _, t := range s.builtins {
		if t.Name() != call.Name {
			continue
		}
		env := tools.Env{Root: run.Workspace.Path}
		if kind := t.Permission(); kind != tools.PermissionNone {
			summary, details := t.Summary(env, call.Arguments)
			if res, ok := s.permit(ctx, run, ref, kind, summary, details); !ok {
				return res
			}
		}
		res := t.Run(ctx, env, call.Arguments)
		return agent.ToolResult{Content: res.Content, IsError: res.IsError}
	}
	spec, owners, ok := s.clientTool(run.SessionID, call.Name)
	if !ok {
		// A suspended call survives its owner: answer it if it was asked.
		if run.Revive == "" {
			return unknownTool(call.Name)
		}
	}
	if !spec.SkipPermission && !s.askedBefore(ctx, run, call) {
		summary := fmt.Sprintf("run client tool %s", call.Name)
		if res, ok := s.permit(ctx, run, ref, proto.PermissionCustomTool, summary, map[string]any{"arguments": call.Arguments}); !ok {
			return res
		}
	}
	ans, suspended := s.broker.CallClientTool(ctx, ref, call.Arguments, owners)
	if suspended {
		return agent.ToolResult{Suspended: true}
	}
	return agent.ToolResult{Content: ans.Content, IsError: ans.IsError}
}

// askedBefore reports whether a revived run had sent this client tool call
// out already: it passed the permission step then (or needed none), and
// goes on from where it stopped without asking again. After a restart the
// tool's owner is gone and its skip_permission with it; the request on
// disk is what is left to tell.
func (s *Set) askedBefore(ctx context.Context, run *agent.Run, call provider.ToolCall) bool {
	if run.Revive == "" {
		return false
	}
	asked, err := s.broker.AskedToolCall(context.WithoutCancel(ctx), run.Workspace.ID, run.ID, call.ID)
	if err != nil {
		// Asking again is the safe side: a person decides.
		return false
	}
	return asked
}

func unknownTool(name string) agent.ToolResult {
	return agent.ToolResult{Content: fmt.Sprintf("unknown tool %q: call only the tools offered to you", name), IsError: true}
}

// permit applies the session's permission mode, asking the clients in mode
// ask. ok false comes with the result to give the model.
func (s *Set) permit(ctx context.Context, run *agent.Run, ref pending.Ref, kind, summary string, details map[string]any) (agent.ToolResult, bool) {
	switch run.PermissionMode {
	case "allow_all":
		return agent.ToolResult{}, true
	case "deny_all":
		return agent.ToolResult{Content: denial(proto.ResultDeniedByMode, ""), IsError: true}, false
	}
	if s.broker.ApprovedForSession(ctx, run.SessionID, kind) {
		return agent.ToolResult{}, true
	}
	ans, suspended := s.broker.AskPermission(ctx, ref, kind, summary, details)
	switch {
	case suspended:
		return agent.ToolResult{Suspended: true}, false
	case ans.Result == proto.ResultApproved || ans.Result == proto.ResultApprovedForSession:
		return agent.ToolResult{}, true
	}
	return agent.ToolResult{Content: denial(ans.Result, ans.Feedback), IsError: true}, false
}

// Interrupt implements agent.Tools.
func (s *Set) Interrupt(ctx context.Context, run *agent.Run) error {
	return s.broker.Interrupt(ctx, run.Workspace, run.ID)
}

// denial is what the model reads when a call was not allowed to run.
func denial(result, feedback string) string {
	var msg string
	switch result {
	case proto.ResultDeniedByUser:
		msg = "The user denied this tool call."
	case proto.ResultDeniedNoClient:
		msg = "No user was available to approve this tool call, so it did not run."
	case proto.ResultDeniedByMode:
		msg = "This session does not allow tools that need permission, so the call did not run."
	case proto.ResultCanceled:
		msg = "The permission request was canceled, so the call did not run."
	default:
		msg = "The tool call was not allowed to run (" + result + ")."
	}
	if feedback != "" {
		msg += " The user said: " + feedback
	}
	return msg
}
