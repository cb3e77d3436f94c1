package client

// The types of this file are wire types of the contract that package proto
// does not have yet (the server does not implement their routes yet). They
// are meant to move to proto; their JSON names follow the contract exactly.

import (
	"encoding/json"

	"github.com/tandem-dev/tandem/proto"
)

// Permission modes of a session (CreateSessionRequest.PermissionMode).
const (
	PermissionModeAsk      = "ask"
	PermissionModeAllowAll = "allow_all"
	PermissionModeDenyAll  = "deny_all"
)

// Permission kinds: what a tool asks permission for.
const (
	PermissionKindShell      = "shell"
	PermissionKindWrite      = "write"
	PermissionKindCustomTool = "custom_tool"
)

// Decisions a client answers a permission request with.
const (
	DecisionApproveOnce      = "approve_once"
	DecisionApproveSession   = "approve_session"
	DecisionReject           = "reject"
	DecisionUserNotAvailable = "user_not_available"
)

// Results of a permission request (permission.resolved, PermissionResolution).
const (
	PermissionApproved           = "approved"
	PermissionApprovedForSession = "approved_for_session"
	PermissionDeniedByUser       = "denied_by_user"
	PermissionDeniedNoClient     = "denied_no_client"
	PermissionDeniedByMode       = "denied_by_mode"
	PermissionCanceled           = "canceled"
)

// Log levels of LogRequest.
const (
	LogInfo    = "info"
	LogWarning = "warning"
	LogError   = "error"
)

// ResumeRequest is the body of POST .../sessions/{sid}/resume. Resume fills
// an empty ClientID with the client's own.
type ResumeRequest struct {
	ClientID string           `json:"client_id"`
	Tools    []proto.ToolSpec `json:"tools,omitempty"`
	// ContinuePendingWork is always sent: false is a decision (interrupt
	// suspended work), not an absence.
	ContinuePendingWork bool            `json:"continue_pending_work"`
	Provider            *proto.Provider `json:"provider,omitempty"`
}

// ResumeResponse is the answer to a resume.
type ResumeResponse struct {
	Session proto.Session `json:"session"`
	Pending PendingWork   `json:"pending"`
}

// PendingWork is what a session's parked runs wait for: the body of
// GET .../sessions/{sid}/pending and the pending part of a resume.
type PendingWork struct {
	Permissions []PermissionRequest `json:"permissions"`
	ToolCalls   []ToolCallRequest   `json:"tool_calls"`
}

// PermissionRequest asks the clients whether a tool may run; it is the data
// of permission.requested.
type PermissionRequest struct {
	RequestID  string `json:"request_id"`
	SessionID  string `json:"session_id"`
	RunID      string `json:"run_id"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	Kind       string `json:"kind"`
	Summary    string `json:"summary"`
	// Details is raw because the contract does not fix its shape (a
	// command, a diff...); a client shows it or decodes what it knows.
	Details json.RawMessage `json:"details,omitempty"`
}

// PermissionList is the body of GET /v1/workspaces/{id}/permissions.
type PermissionList struct {
	Permissions []PermissionRequest `json:"permissions"`
}

// PermissionDecision is the body of POST /v1/workspaces/{id}/permissions/{rid}.
// AnswerPermission fills an empty ClientID with the client's own.
type PermissionDecision struct {
	ClientID string `json:"client_id"`
	Decision string `json:"decision"`
	Feedback string `json:"feedback,omitempty"`
}

// PermissionResolution is the answer to a permission decision.
type PermissionResolution struct {
	Resolved bool   `json:"resolved"`
	Result   string `json:"result"`
}

// ToolCallRequest asks the clients to run one of their tools; it is the data
// of tool.requested.
type ToolCallRequest struct {
	RequestID      string          `json:"request_id"`
	SessionID      string          `json:"session_id"`
	RunID          string          `json:"run_id"`
	ToolCallID     string          `json:"tool_call_id"`
	ToolName       string          `json:"tool_name"`
	Arguments      json.RawMessage `json:"arguments"`
	OwnerClientIDs []string        `json:"owner_client_ids"`
}

// ToolCallAnswer is the body of POST /v1/workspaces/{id}/tool-calls/{rid}:
// exactly one of Result and Error is set. They are pointers because an empty
// result ("") is a valid answer that must still be sent; build answers with
// ToolResult and ToolError. AnswerToolCall fills an empty ClientID.
type ToolCallAnswer struct {
	ClientID string  `json:"client_id"`
	Result   *string `json:"result,omitempty"`
	Error    *string `json:"error,omitempty"`
}

// ToolResult is the answer of a tool call that succeeded with content.
func ToolResult(content string) ToolCallAnswer { return ToolCallAnswer{Result: &content} }

// ToolError is the answer of a tool call that failed; the model sees message.
func ToolError(message string) ToolCallAnswer { return ToolCallAnswer{Error: &message} }

// ToolCallResolution is the answer to a tool call answer.
type ToolCallResolution struct {
	Resolved bool `json:"resolved"`
}

// SetModelRequest is the body of PUT .../sessions/{sid}/model.
type SetModelRequest struct {
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// SessionResumed is the data of session.resumed.
type SessionResumed struct {
	ClientID            string `json:"client_id"`
	ContinuePendingWork bool   `json:"continue_pending_work"`
	SessionWasActive    bool   `json:"session_was_active"`
}

// SessionModelChanged is the data of session.model_changed.
type SessionModelChanged struct {
	Model           string `json:"model"`
	PreviousModel   string `json:"previous_model"`
	ReasoningEffort string `json:"reasoning_effort"`
}

// PermissionResolved is the data of permission.resolved.
type PermissionResolved struct {
	RequestID  string `json:"request_id"`
	Result     string `json:"result"`
	Feedback   string `json:"feedback,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
}

// ToolResolved is the data of tool.resolved.
type ToolResolved struct {
	RequestID  string `json:"request_id"`
	IsError    bool   `json:"is_error"`
	ResolvedBy string `json:"resolved_by,omitempty"`
}
