// Package toolset is the tools a session's model may call: the built-in tools,
// the tools of the MCP servers its run is given and the tools its clients
// offer, filtered by the session's allow and deny lists and dispatched with
// the permission checks the configuration's rules and the session's mode ask
// for.
//
// A call's permission is decided in this order: the first permission rule
// that matches it (allow runs it, deny refuses it, ask asks the clients
// whatever the mode and the session's approvals say), then the session's
// approvals and permission mode. A call a rule decided emits no
// permission.requested; its result says approved_by_rule or denied_by_rule.
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
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/pending"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/rules"
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
	// runs are what each running run's configuration adds (see Bind).
	runs map[string]*binding
}

// RunConfig is what a run's configuration adds to the tool set.
type RunConfig struct {
	// Rules decide calls before the permission mode; nil has none.
	Rules *rules.Set
	// MCP are the MCP servers whose tools the run is offered, a session's
	// own before the workspace's: a session's server hides a workspace
	// server of the same name.
	MCP []*mcp.Manager
	// BeforeChange, when set, is called before each call of a tool that
	// may change files (edit, write, bash, MCP tools) runs, once its
	// permission is given (checkpoints, contract section 11).
	BeforeChange func(ctx context.Context)
	// Sandbox confines the run's commands (contract section 12); nil
	// runs them unconfined, which only tests of other things do.
	Sandbox tools.Sandbox
}

// binding is a run's RunConfig and whether its MCP servers were started.
type binding struct {
	RunConfig
	started sync.Once
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
	s := &Set{builtins: tools.Builtins(), broker: broker, sessions: make(map[string]*sessionTools), runs: make(map[string]*binding)}
	for _, t := range s.builtins {
		s.offers = append(s.offers, provider.Tool{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return s
}

// Bind gives the run its configuration's rules and MCP servers until
// unbind is called, which the run's owner does once the run has returned.
func (s *Set) Bind(runID string, rc RunConfig) (unbind func()) {
	b := &binding{RunConfig: rc}
	s.mu.Lock()
	s.runs[runID] = b
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.runs[runID] == b {
			delete(s.runs, runID)
		}
		s.mu.Unlock()
	}
}

// binding returns the run's binding; an unbound run has no rules and no
// MCP servers.
func (s *Set) binding(runID string) *binding {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.runs[runID]; b != nil {
		return b
	}
	return &binding{}
}

// startMCP starts the run's MCP servers that are not running, once per run,
// and waits for their starts (each bounded by its handshake timeout) or the
// run's end, so that its first request offers every tool that could start
// and its clients have heard of each server's state.
func (b *binding) startMCP(ctx context.Context) {
	b.started.Do(func() {
		for _, m := range b.MCP {
			m.Start()
		}
		for _, m := range b.MCP {
			if m.Wait(ctx) != nil {
				return
			}
		}
	})
}

// mcpOwner returns the manager that runs the tool named name: the first
// whose servers include the name's server.
func (b *binding) mcpOwner(name string) *mcp.Manager {
	for _, m := range b.MCP {
		if m.Owns(name) {
			return m
		}
	}
	return nil
}

// mcpTools are the tools of the run's MCP servers the session allows.
func (b *binding) mcpTools(run *agent.Run) []provider.Tool {
	var out []provider.Tool
	for i, m := range b.MCP {
		for _, t := range m.Tools() {
			if !allowed(run, t.Name) || hidden(b.MCP[:i], t.Name) {
				continue
			}
			out = append(out, provider.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hidden reports whether a server of an earlier manager has the name's
// server name.
func hidden(earlier []*mcp.Manager, name string) bool {
	return slices.ContainsFunc(earlier, func(m *mcp.Manager) bool { return m.Owns(name) })
}

// Validate checks client tool specs: names a model API accepts, unique,
// parameters a JSON Schema object. Names that start like an MCP server's
// tools (mcp__) are kept for those.
func Validate(specs []proto.ToolSpec) error {
	seen := make(map[string]bool, len(specs))
	for i, t := range specs {
		if !validName(t.Name) {
			return apierr.Invalid("tools[%d].name %q must be 1-64 letters, digits, '_' or '-'", i, t.Name)
		}
		if strings.HasPrefix(t.Name, mcp.ToolPrefix) {
			return apierr.Invalid("tools[%d].name %q: names starting with %q are MCP servers' tools", i, t.Name, mcp.ToolPrefix)
		}
		if seen[t.Name] {
			return apierr.Invalid("tools[%d].name %q is given twice", i, t.Name)
		}
		seen[t.Name] = true
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return apierr.Invalid("tools[%d].parameters must be a JSON Schema object", i)
			}
			if typ, ok := schema["type"]; ok && typ != "object" {
				return apierr.Invalid("tools[%d].parameters.type must be \"object\"", i)
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
				return apierr.Errorf(proto.CodeToolConflict, "tool %q clashes with a built-in tool", spec.Name)
			}
		}
		for owner, theirs := range st.byClient {
			if owner == clientID {
				continue
			}
			if slices.ContainsFunc(theirs, func(t proto.ToolSpec) bool { return t.Name == spec.Name }) {
				return apierr.Errorf(proto.CodeToolConflict, "tool %q is already offered by client %s", spec.Name, owner)
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

// Offer implements agent.Tools. The run's first offer starts its MCP
// servers and waits for them.
func (s *Set) Offer(ctx context.Context, run *agent.Run) ([]provider.Tool, []string) {
	var out []provider.Tool
	for _, t := range s.offers {
		if allowed(run, t.Name) {
			out = append(out, t)
		}
	}
	if b := s.binding(run.ID); len(b.MCP) > 0 {
		b.startMCP(ctx)
		out = append(out, b.mcpTools(run)...)
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
	b := s.binding(run.ID)
	for _, t := range s.builtins {
		if t.Name() != call.Name {
			continue
		}
		env := tools.Env{Root: run.Workspace.Path, Sandbox: b.Sandbox}
		rule := s.decide(ctx, run, b, call, func(p string) (string, bool) {
			rel, err := env.Rel(p)
			return rel, err == nil
		})
		if rule.denied() {
			return rule.denial()
		}
		kind := t.Permission()
		if kind == tools.PermissionNone && rule.asks() {
			// A rule decides before the mode (section 7): an ask rule
			// makes even a reading tool ask.
			kind = tools.PermissionRead
		}
		if kind != tools.PermissionNone && !rule.allowed() {
			summary, details := t.Summary(env, call.Arguments)
			if res, ok := s.permit(ctx, run, ref, kind, summary, details, rule.asks()); !ok {
				return res
			}
		}
		if b.BeforeChange != nil && t.Permission() != tools.PermissionNone {
			b.BeforeChange(ctx)
		}
		res := t.Run(ctx, env, call.Arguments)
		return agent.ToolResult{Content: res.Content, IsError: res.IsError, Permission: rule.approval(), Sandbox: res.Sandbox}
	}
	if m := b.mcpOwner(call.Name); m != nil {
		// A revived run calls before it offers anything.
		b.startMCP(ctx)
		rule := s.decide(ctx, run, b, call, nil)
		if rule.denied() {
			return rule.denial()
		}
		if !rule.allowed() {
			server, tool, _ := mcp.SplitName(call.Name)
			summary := fmt.Sprintf("call %s of MCP server %s", tool, server)
			details := map[string]any{"server": server, "tool": tool, "arguments": call.Arguments}
			if res, ok := s.permit(ctx, run, ref, proto.PermissionMCP, summary, details, rule.asks()); !ok {
				return res
			}
		}
		if b.BeforeChange != nil {
			b.BeforeChange(ctx)
		}
		res := m.Call(ctx, call.Name, call.Arguments)
		return agent.ToolResult{Content: res.Content, IsError: res.IsError, Permission: rule.approval()}
	}
	if strings.HasPrefix(call.Name, mcp.ToolPrefix) {
		// A server of the run's configuration no more, or never.
		return unknownTool(call.Name)
	}
	rule := s.decide(ctx, run, b, call, nil)
	if rule.denied() {
		return rule.denial()
	}
	spec, owners, ok := s.clientTool(run.SessionID, call.Name)
	if !ok {
		// A suspended call survives its owner: answer it if it was asked.
		if run.Revive == "" {
			return unknownTool(call.Name)
		}
	}
	if (!spec.SkipPermission || rule.asks()) && !rule.allowed() && !s.askedBefore(ctx, run, call) {
		summary := fmt.Sprintf("run client tool %s", call.Name)
		if res, ok := s.permit(ctx, run, ref, proto.PermissionCustomTool, summary, map[string]any{"arguments": call.Arguments}, rule.asks()); !ok {
			return res
		}
	}
	ans, suspended := s.broker.CallClientTool(ctx, ref, call.Arguments, owners)
	if suspended {
		return agent.ToolResult{Suspended: true}
	}
	return agent.ToolResult{Content: ans.Content, IsError: ans.IsError, Permission: rule.approval()}
}

// ruling is what the permission rules said of a call: "" when none
// matched, else rules.Allow, rules.Ask or rules.Deny and the rule.
type ruling struct {
	decision string
	rule     rules.Rule
}

func (r ruling) allowed() bool { return r.decision == rules.Allow }
func (r ruling) denied() bool  { return r.decision == rules.Deny }
func (r ruling) asks() bool    { return r.decision == rules.Ask }

// approval is the ToolResult.Permission of a call that ran.
func (r ruling) approval() string {
	if r.allowed() {
		return proto.ResultApprovedByRule
	}
	return ""
}

// denial is what the model reads of a call a rule denied.
func (r ruling) denial() agent.ToolResult {
	return agent.ToolResult{Content: denial(proto.ResultDeniedByRule, "") + " (rule: " + describeRule(r.rule) + ")", IsError: true, Permission: proto.ResultDeniedByRule}
}

func describeRule(r rules.Rule) string {
	parts := []string{fmt.Sprintf("tool %q", r.Tool)}
	if r.Command != "" {
		parts = append(parts, fmt.Sprintf("command %q", r.Command))
	}
	if r.Path != "" {
		parts = append(parts, fmt.Sprintf("path %q", r.Path))
	}
	return strings.Join(parts, ", ") + ": " + r.Decision
}

// decide applies the run's permission rules to the call; rel makes a path
// argument workspace-relative (nil keeps it as given). A revived run's call
// that asked a permission before goes on with that request, whatever the
// rules say now: the run goes on exactly where it stopped.
func (s *Set) decide(ctx context.Context, run *agent.Run, b *binding, call provider.ToolCall, rel func(string) (string, bool)) ruling {
	if b.Rules.Len() == 0 {
		return ruling{}
	}
	m, ok := b.Rules.Decide(rules.CallOf(call.Name, call.Arguments, rel))
	if !ok {
		return ruling{}
	}
	if run.Revive != "" {
		asked, err := s.broker.AskedPermission(context.WithoutCancel(ctx), run.Workspace.ID, run.ID, call.ID)
		if err != nil || asked {
			return ruling{}
		}
	}
	return ruling{decision: m.Decision, rule: m.Rule}
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
// ask, or always when ask (an ask rule matched the call). ok false comes
// with the result to give the model.
func (s *Set) permit(ctx context.Context, run *agent.Run, ref pending.Ref, kind, summary string, details map[string]any, ask bool) (agent.ToolResult, bool) {
	if !ask {
		switch run.PermissionMode {
		case "allow_all":
			return agent.ToolResult{}, true
		case "deny_all":
			return agent.ToolResult{Content: denial(proto.ResultDeniedByMode, ""), IsError: true}, false
		}
		if s.broker.ApprovedForSession(ctx, run.SessionID, kind) {
			return agent.ToolResult{}, true
		}
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
	case proto.ResultDeniedByRule:
		msg = "A permission rule of the configuration denies this tool call, so it did not run."
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
