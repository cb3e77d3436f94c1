// Package toolset is the tools a session's model may call: the built-in tools
// filtered by the session's allow and deny lists, dispatched with the
// permission checks the session's mode asks for.
package toolset

import (
	"context"
	"fmt"
	"slices"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/tools"
)

// Permission results of the contract.
const (
	Approved           = "approved"
	ApprovedForSession = "approved_for_session"
	DeniedByUser       = "denied_by_user"
	DeniedNoClient     = "denied_no_client"
	DeniedByMode       = "denied_by_mode"
	Canceled           = "canceled"
)

// Request is a permission question about one tool call.
type Request struct {
	Call    provider.ToolCall
	Kind    string // shell, write or custom_tool
	Summary string
	Details map[string]any
}

// Approver asks the clients whether a tool call may run, and waits for the
// answer; it returns one of the permission results and optional feedback.
type Approver interface {
	Approve(ctx context.Context, run *agent.Run, req Request) (result, feedback string)
}

// Set implements agent.Tools.
type Set struct {
	builtins []tools.Tool
	approver Approver
}

// New returns the tool set over the built-in tools; approver may be nil, in
// which case calls that need a human's permission are denied.
func New(approver Approver) *Set {
	return &Set{builtins: tools.Builtins(), approver: approver}
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
	for _, t := range s.builtins {
		if allowed(run, t.Name()) {
			out = append(out, provider.Tool{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
		}
	}
	return out, nil
}

// Call implements agent.Tools.
func (s *Set) Call(ctx context.Context, run *agent.Run, call provider.ToolCall) agent.ToolResult {
	var tool tools.Tool
	for _, t := range s.builtins {
		if t.Name() == call.Name && allowed(run, t.Name()) {
			tool = t
		}
	}
	if tool == nil {
		return agent.ToolResult{Content: fmt.Sprintf("unknown tool %q: call only the tools offered to you", call.Name), IsError: true}
	}
	env := tools.Env{Root: run.Workspace.Path}
	if kind := tool.Permission(); kind != tools.PermissionNone {
		summary, details := tool.Summary(env, call.Arguments)
		result, feedback := s.decide(ctx, run, Request{Call: call, Kind: kind, Summary: summary, Details: details})
		if result != Approved && result != ApprovedForSession {
			return agent.ToolResult{Content: denial(result, feedback), IsError: true}
		}
	}
	res := tool.Run(ctx, env, call.Arguments)
	return agent.ToolResult{Content: res.Content, IsError: res.IsError}
}

// decide applies the session's permission mode, asking only in mode ask.
func (s *Set) decide(ctx context.Context, run *agent.Run, req Request) (result, feedback string) {
	switch run.PermissionMode {
	case "allow_all":
		return Approved, ""
	case "deny_all":
		return DeniedByMode, ""
	}
	if s.approver == nil {
		return DeniedNoClient, ""
	}
	return s.approver.Approve(ctx, run, req)
}

// denial is what the model reads when a call was not allowed to run.
func denial(result, feedback string) string {
	var msg string
	switch result {
	case DeniedByUser:
		msg = "The user denied this tool call."
	case DeniedNoClient:
		msg = "No user was available to approve this tool call, so it did not run."
	case DeniedByMode:
		msg = "This session does not allow tools that need permission, so the call did not run."
	case Canceled:
		msg = "The permission request was canceled, so the call did not run."
	default:
		msg = "The tool call was not allowed to run (" + result + ")."
	}
	if feedback != "" {
		msg += " The user said: " + feedback
	}
	return msg
}
