// Package proto holds Tandem's wire types: the JSON bodies of the HTTP API and
// the envelope and payloads of the event stream. It has no dependencies beyond the
// standard library so any Go client can import it.
package proto

import (
	"encoding/json"
	"time"
)

// Time is a timestamp that always encodes as RFC 3339 in UTC with fractional
// seconds, as the contract requires; time.Time drops the fraction when it is zero.
type Time struct{ time.Time }

// timeLayout keeps microseconds: SQLite round-trips them and clients can sort on them.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Now returns the current time truncated to the precision Time encodes.
func Now() Time { return Time{time.Now().UTC().Truncate(time.Microsecond)} }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Format(timeLayout) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v.UTC()
	return nil
}

// String formats t the way it is encoded.
func (t Time) String() string { return t.UTC().Format(timeLayout) }

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail carries a snake_case code and a human-readable message.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of the contract.
const (
	CodeInvalidJSON       = "invalid_json"
	CodeInvalidArgument   = "invalid_argument"
	CodeUnauthorized      = "unauthorized"
	CodeWorkspaceNotFound = "workspace_not_found"
	CodeSessionNotFound   = "session_not_found"
	CodeRequestNotFound   = "request_not_found"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeAlreadyExists     = "already_exists"
	CodeAlreadyResolved   = "already_resolved"
	CodeToolConflict      = "tool_conflict"
	CodeWorkspaceNotOpen  = "workspace_not_open"
	CodeWorkspaceClosing  = "workspace_closing"
	CodeBodyTooLarge      = "body_too_large"
	CodeShuttingDown      = "shutting_down"
	// CodeStorageUnavailable: the store refuses writes (disk full, locked
	// past its timeout); nothing accepted before is lost.
	CodeStorageUnavailable = "storage_unavailable"
	// CodeWorkspaceUnavailable: in a cluster, no node owns the workspace
	// while its owner is being replaced.
	CodeWorkspaceUnavailable = "workspace_unavailable"
	// CodeForbiddenOrigin: a browser request from an origin not allowed.
	CodeForbiddenOrigin = "forbidden_origin"
	// CodeForbiddenHost: a request to a loopback server whose Host header
	// is not a loopback name (DNS rebinding).
	CodeForbiddenHost = "forbidden_host"
	// CodeInvalidConfig: a configuration file (the workspace's) is invalid.
	CodeInvalidConfig = "invalid_config"
	CodeInternal      = "internal"
)

// Health is the body of GET /v1/health.
type Health struct {
	Status       string `json:"status"`
	Version      string `json:"version"`
	DefaultModel string `json:"default_model"`
	// NodeID names the server answering: one node of a cluster, or the
	// only one.
	NodeID string `json:"node_id"`
	// Sandbox says whether this server can confine the agent's commands
	// (section 12).
	Sandbox SandboxStatus `json:"sandbox"`
}

// SandboxStatus is whether the agent's commands can be confined here, and how.
type SandboxStatus struct {
	Available bool `json:"available"`
	// Mechanism names what confines them ("none" when nothing can).
	Mechanism string `json:"mechanism"`
	// Reason says what is missing when not Available.
	Reason string `json:"reason,omitempty"`
}

// Sandbox modes (section 12).
const (
	SandboxWorkspace = "workspace"
	SandboxReadOnly  = "read-only"
	SandboxOff       = "off"
)

// SandboxOptions are a session's sandbox settings in a request: each
// field given replaces the session's value (section 12).
type SandboxOptions struct {
	Sandbox        *string   `json:"sandbox,omitempty"`
	SandboxNetwork *bool     `json:"sandbox_network,omitempty"`
	SandboxRead    *[]string `json:"sandbox_read,omitempty"`
	SandboxWrite   *[]string `json:"sandbox_write,omitempty"`
}

// SandboxSettings are the sandbox settings a session's commands run under.
type SandboxSettings struct {
	Sandbox        string   `json:"sandbox"`
	SandboxNetwork bool     `json:"sandbox_network"`
	SandboxRead    []string `json:"sandbox_read"`
	SandboxWrite   []string `json:"sandbox_write"`
}

// Workspace is a project directory that clients attach to.
type Workspace struct {
	ID        string `json:"id"`
	Path      string `json:"path"`
	Open      bool   `json:"open"`
	Clients   int    `json:"clients"`
	CreatedAt Time   `json:"created_at"`
	// Attached lists the clients whose streams are open on this node,
	// with the person each belongs to (section 9).
	Attached []AttachedClient `json:"attached"`
	// Missing is set, in GET /v1/workspaces, on a workspace whose directory
	// no longer exists (deleted or moved since it was opened).
	Missing bool `json:"missing,omitempty"`
}

// CreateWorkspaceRequest is the body of POST /v1/workspaces.
type CreateWorkspaceRequest struct {
	Path string `json:"path"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Workspaces []Workspace `json:"workspaces"`
}

// SessionContext describes where a session's agent works and how much of
// its model's context window the conversation fills.
type SessionContext struct {
	Cwd string `json:"cwd"`
	// Tokens is the size of what the session's next model request would
	// carry: the last request's reported input and output, plus an
	// estimate of the messages recorded since; estimated (about 4 bytes a
	// token) until a model has reported anything.
	Tokens int64 `json:"tokens"`
	// Window is the model's context window, when it is known.
	Window *int64 `json:"window,omitempty"`
}

// Compaction settings of a session (contract section 4).
type Compaction struct {
	// Auto compacts the conversation before a model request that would
	// carry more than Threshold of the model's context window, and when
	// the provider answers that a request is over it.
	Auto bool `json:"auto"`
	// Threshold is the fraction of the window, in (0, 1].
	Threshold float64 `json:"threshold"`
}

// DefaultCompaction is a session's compaction unless it says otherwise.
var DefaultCompaction = Compaction{Auto: true, Threshold: 0.8}

// CompactionOptions sets a session's compaction in a create or a PATCH:
// a nil field keeps the current value (the default, on create).
type CompactionOptions struct {
	Auto      *bool    `json:"auto,omitempty"`
	Threshold *float64 `json:"threshold,omitempty"`
}

// UpdateSessionRequest is the body of PATCH .../sessions/{sid}. A field
// left out (or null) keeps its value; an empty list clears
// available_tools or excluded_tools (every tool is offered again).
type UpdateSessionRequest struct {
	Title          *string            `json:"title,omitempty"`
	Compaction     *CompactionOptions `json:"compaction,omitempty"`
	PermissionMode *string            `json:"permission_mode,omitempty"`
	AvailableTools *[]string          `json:"available_tools,omitempty"`
	ExcludedTools  *[]string          `json:"excluded_tools,omitempty"`
	// SandboxOptions narrow (anyone) or widen (an owner) what the
	// session's commands may touch.
	SandboxOptions
}

// Session is one conversation with the agent inside a workspace.
type Session struct {
	ID              string         `json:"id"`
	WorkspaceID     string         `json:"workspace_id"`
	Title           string         `json:"title"`
	Model           string         `json:"model"`
	ReasoningEffort string         `json:"reasoning_effort"`
	CreatedAt       Time           `json:"created_at"`
	UpdatedAt       Time           `json:"updated_at"`
	MessageCount    int            `json:"message_count"`
	Busy            bool           `json:"busy"`
	Queued          int            `json:"queued"`
	AttachedClients int            `json:"attached_clients"`
	Context         SessionContext `json:"context"`
	// PermissionMode is how its tools are approved (ask when unset).
	PermissionMode string `json:"permission_mode,omitempty"`
	// Usage is the session's runs' usage summed.
	Usage      Usage      `json:"usage"`
	Compaction Compaction `json:"compaction"`
	// ForkedFrom and ImportedFrom say where a forked or imported session
	// came from (section 11).
	ForkedFrom   *ForkedFrom   `json:"forked_from,omitempty"`
	ImportedFrom *ImportedFrom `json:"imported_from,omitempty"`
	// SandboxSettings are what its commands run under (section 12).
	SandboxSettings
}

// SessionList is the body of GET .../sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// LastSession is the body of GET .../sessions/last.
type LastSession struct {
	SessionID *string `json:"session_id"`
}

// SystemMessage customizes a session's system prompt.
type SystemMessage struct {
	Mode     string                     `json:"mode"`
	Content  string                     `json:"content,omitempty"`
	Sections map[string]SectionOverride `json:"sections,omitempty"`
}

// SectionOverride is one action on a named section of the default system prompt.
type SectionOverride struct {
	Action  string `json:"action"`
	Content string `json:"content,omitempty"`
}

// Provider overrides the model provider of one session. APIKey is kept in memory
// only and never returned.
type Provider struct {
	Type    string         `json:"type"`
	BaseURL string         `json:"base_url,omitempty"`
	APIKey  string         `json:"api_key,omitempty"`
	Azure   *AzureProvider `json:"azure,omitempty"`
}

// AzureProvider holds Azure OpenAI settings.
type AzureProvider struct {
	APIVersion string `json:"api_version,omitempty"`
}

// ToolSpec is a tool a client offers to the model.
type ToolSpec struct {
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Parameters     json.RawMessage `json:"parameters,omitempty"`
	SkipPermission bool            `json:"skip_permission,omitempty"`
}

// CreateSessionRequest is the body of POST .../sessions. Every field is optional.
type CreateSessionRequest struct {
	ID              string         `json:"id,omitempty"`
	Title           string         `json:"title,omitempty"`
	Model           string         `json:"model,omitempty"`
	ReasoningEffort string         `json:"reasoning_effort,omitempty"`
	SystemMessage   *SystemMessage `json:"system_message,omitempty"`
	AvailableTools  []string       `json:"available_tools,omitempty"`
	ExcludedTools   []string       `json:"excluded_tools,omitempty"`
	Provider        *Provider      `json:"provider,omitempty"`
	PermissionMode  string         `json:"permission_mode,omitempty"`
	ClientID        string         `json:"client_id,omitempty"`
	Tools           []ToolSpec     `json:"tools,omitempty"`
	// Compaction defaults to DefaultCompaction.
	Compaction *CompactionOptions `json:"compaction,omitempty"`
	// MCPServers are the session's own MCP servers, added to the
	// configuration file's: {"NAME": {"type": "stdio", "command", "args",
	// "env", "tools"} | {"type": "http", "url", "headers", "tools"}},
	// checked as the configuration file is. Their env and header values
	// (tokens, often) are kept in memory only, like a provider's api_key.
	MCPServers json.RawMessage `json:"mcp_servers,omitempty"`
	// Permissions are the session's own permission rules, decided before
	// the configuration file's (section 7's shape); a session's rules may
	// only ask or deny: allowing without asking stays the configuration's.
	Permissions []PermissionRule `json:"permissions,omitempty"`
	// SandboxOptions set what the session's commands may touch; unset
	// fields take the configuration's values (section 12).
	SandboxOptions
}

// PermissionRule is one permission rule: the first that matches a call
// decides it (contract section 7).
type PermissionRule struct {
	Tool     string `json:"tool"`
	Command  string `json:"command,omitempty"`
	Path     string `json:"path,omitempty"`
	Decision string `json:"decision"`
}

// LogRequest is the body of POST .../sessions/{sid}/log.
type LogRequest struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
}

// LogResponse is the answer to a log request.
type LogResponse struct {
	Seq int64 `json:"seq"`
}

// EventList is the body of GET .../sessions/{sid}/events.
type EventList struct {
	Events []Event `json:"events"`
}

// MessageList is the body of GET .../sessions/{sid}/messages.
type MessageList struct {
	Messages []Message `json:"messages"`
}

// SetModelRequest is the body of PUT .../sessions/{sid}/model. A missing
// reasoning_effort keeps the session's current one.
type SetModelRequest struct {
	Model           string  `json:"model"`
	ReasoningEffort *string `json:"reasoning_effort,omitempty"`
}
