package proto

import "encoding/json"

// Permission kinds.
const (
	PermissionShell      = "shell"
	PermissionWrite      = "write"
	PermissionCustomTool = "custom_tool"
	// PermissionRead is what a reading tool (view, ls, glob, grep) asks
	// when a permission rule says ask for it; they ask nothing otherwise.
	PermissionRead = "read"
	// PermissionMCP is asked by a tool of an MCP server (mcp__NAME__TOOL).
	PermissionMCP = "mcp"
)

// Permission decisions a client may send.
const (
	DecisionApproveOnce      = "approve_once"
	DecisionApproveSession   = "approve_session"
	DecisionReject           = "reject"
	DecisionUserNotAvailable = "user_not_available"
)

// Permission results.
const (
	ResultApproved           = "approved"
	ResultApprovedForSession = "approved_for_session"
	ResultDeniedByUser       = "denied_by_user"
	ResultDeniedNoClient     = "denied_no_client"
	ResultDeniedByMode       = "denied_by_mode"
	ResultCanceled           = "canceled"
	// ResultApprovedByRule and ResultDeniedByRule are what a permission
	// rule decided, without asking anyone; ToolFinished.Permission says so.
	ResultApprovedByRule = "approved_by_rule"
	ResultDeniedByRule   = "denied_by_rule"
)

// PermissionRequest asks the clients whether a tool call may run; it is the
// data of permission.requested.
type PermissionRequest struct {
	RequestID  string         `json:"request_id"`
	SessionID  string         `json:"session_id"`
	RunID      string         `json:"run_id"`
	ToolCallID string         `json:"tool_call_id"`
	ToolName   string         `json:"tool_name"`
	Kind       string         `json:"kind"`
	Summary    string         `json:"summary"`
	Details    map[string]any `json:"details"`
}

// PermissionResolved is the data of permission.resolved.
type PermissionResolved struct {
	RequestID  string `json:"request_id"`
	Result     string `json:"result"`
	Feedback   string `json:"feedback,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
	// ResolvedByName is the person who answered (section 9).
	ResolvedByName string `json:"resolved_by_name,omitempty"`
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

// ToolResolved is the data of tool.resolved.
type ToolResolved struct {
	RequestID  string `json:"request_id"`
	IsError    bool   `json:"is_error"`
	ResolvedBy string `json:"resolved_by,omitempty"`
	// ResolvedByName is the person who answered (section 9).
	ResolvedByName string `json:"resolved_by_name,omitempty"`
}

// PendingWork lists what waits on the clients.
type PendingWork struct {
	Permissions []PermissionRequest `json:"permissions"`
	ToolCalls   []ToolCallRequest   `json:"tool_calls"`
}

// PermissionList is the body of GET /v1/workspaces/{id}/permissions.
type PermissionList struct {
	Permissions []PermissionRequest `json:"permissions"`
}

// PermissionAnswer is the body of POST .../permissions/{request_id}.
type PermissionAnswer struct {
	ClientID string `json:"client_id"`
	Decision string `json:"decision"`
	Feedback string `json:"feedback,omitempty"`
}

// PermissionAnswered is the answer to a permission decision.
type PermissionAnswered struct {
	Resolved bool   `json:"resolved"`
	Result   string `json:"result"`
}

// ToolCallAnswer is the body of POST .../tool-calls/{request_id}: exactly
// one of Result and Error.
type ToolCallAnswer struct {
	ClientID string  `json:"client_id"`
	Result   *string `json:"result,omitempty"`
	Error    *string `json:"error,omitempty"`
}

// ToolCallAnswered is the answer to a tool call answer.
type ToolCallAnswered struct {
	Resolved bool `json:"resolved"`
}

// ResumeRequest is the body of POST .../sessions/{sid}/resume.
type ResumeRequest struct {
	ClientID            string     `json:"client_id"`
	Tools               []ToolSpec `json:"tools,omitempty"`
	ContinuePendingWork bool       `json:"continue_pending_work,omitempty"`
	Provider            *Provider  `json:"provider,omitempty"`
	// MCPServers, when given, replaces the session's own MCP servers (see
	// CreateSessionRequest.MCPServers); their env and header values, kept
	// in memory only, are given again this way after a server restart.
	MCPServers json.RawMessage `json:"mcp_servers,omitempty"`
}

// ResumeResponse is the answer to a resume.
type ResumeResponse struct {
	Session Session     `json:"session"`
	Pending PendingWork `json:"pending"`
}

// SessionResumed is the data of session.resumed.
type SessionResumed struct {
	ClientID            string `json:"client_id"`
	ContinuePendingWork bool   `json:"continue_pending_work"`
	SessionWasActive    bool   `json:"session_was_active"`
}
