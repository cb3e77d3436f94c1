package proto

import "encoding/json"

// Event is the envelope of every frame of the event stream that carries an id.
type Event struct {
	Seq         int64           `json:"seq"`
	Type        string          `json:"type"`
	WorkspaceID string          `json:"workspace_id"`
	SessionID   string          `json:"session_id,omitempty"`
	RunID       string          `json:"run_id,omitempty"`
	Time        Time            `json:"time"`
	Ephemeral   bool            `json:"ephemeral,omitempty"`
	Actor       *Actor          `json:"actor,omitempty"` // who caused it (section 9)
	Data        json.RawMessage `json:"data"`
}

// Event types.
const (
	// Control frames: no id, not in any log.
	EventStreamOpened  = "stream.opened"
	EventStreamReset   = "stream.reset"
	EventStreamEvicted = "stream.evicted"

	EventSessionCreated      = "session.created"
	EventSessionUpdated      = "session.updated"
	EventSessionDeleted      = "session.deleted"
	EventSessionStarted      = "session.started"
	EventSessionResumed      = "session.resumed"
	EventSessionModelChanged = "session.model_changed"
	EventSessionLog          = "session.log"
	EventSessionIdle         = "session.idle"

	EventRunAccepted  = "run.accepted"
	EventRunStarted   = "run.started"
	EventRunCompleted = "run.completed"

	EventMessageCreated = "message.created"
	EventMessageUpdated = "message.updated"
	EventMessageDelta   = "message.delta"

	EventToolStarted  = "tool.started"
	EventToolFinished = "tool.finished"

	EventPermissionRequested = "permission.requested"
	EventPermissionResolved  = "permission.resolved"
	EventToolRequested       = "tool.requested"
	EventToolResolved        = "tool.resolved"

	EventClientAttached = "client.attached"
	EventClientDetached = "client.detached"

	EventWorkspaceClosing = "workspace.closing"

	EventMCPServerStatus = "mcp.server_status"

	EventSessionCompactionStarted   = "session.compaction_started"
	EventSessionCompactionCompleted = "session.compaction_completed"
)

// IsWorkspaceLevel reports whether events of type t pass every session filter.
func IsWorkspaceLevel(t string) bool {
	switch t {
	case EventClientAttached, EventClientDetached, EventWorkspaceClosing:
		return true
	}
	return false
}

// InSessionHistory reports whether a kept event of type t belongs to its session's
// history; the session.created/updated/deleted announcements live in the
// workspace log only.
func InSessionHistory(t string) bool {
	switch t {
	case EventSessionCreated, EventSessionUpdated, EventSessionDeleted:
		return false
	}
	return true
}

// StreamOpened is the data of the first frame of every stream.
type StreamOpened struct {
	ClientID    string `json:"client_id"`
	WorkspaceID string `json:"workspace_id"`
	HeadSeq     int64  `json:"head_seq"`
}

// StreamReset tells a resuming client that its Last-Event-ID cannot be served.
type StreamReset struct {
	HeadSeq int64 `json:"head_seq"`
}

// StreamEvicted tells a client that it fell behind and is being disconnected.
type StreamEvicted struct {
	Reason string `json:"reason"`
}

// SessionDeleted is the data of session.deleted.
type SessionDeleted struct {
	SessionID string `json:"session_id"`
}

// SessionStarted is the data of session.started.
type SessionStarted struct {
	SessionID       string         `json:"session_id"`
	Model           string         `json:"model"`
	ReasoningEffort string         `json:"reasoning_effort"`
	Context         SessionContext `json:"context"`
}

// SessionLog is the data of session.log.
type SessionLog struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// ClientPresence is the data of client.attached and client.detached.
type ClientPresence struct {
	ClientID string `json:"client_id"`
	Clients  int    `json:"clients"`
	// Name is the person whose token opened the client's stream.
	Name string `json:"name,omitempty"`
}

// WorkspaceClosing is the data of workspace.closing.
type WorkspaceClosing struct {
	Reason string `json:"reason"`
}

// Empty is the data of events that carry none, such as session.idle.
type Empty struct{}

// SessionModelChanged is the data of session.model_changed.
type SessionModelChanged struct {
	Model           string `json:"model"`
	PreviousModel   string `json:"previous_model"`
	ReasoningEffort string `json:"reasoning_effort"`
}

// MCP server states of mcp.server_status.
const (
	MCPStarting  = "starting"
	MCPConnected = "connected"
	MCPFailed    = "failed"
	MCPStopped   = "stopped"
)

// MCPServerStatus is the data of mcp.server_status: an MCP server's state
// after a change, and an entry of GET /v1/workspaces/{id}/mcp.
type MCPServerStatus struct {
	// Name is the server's configured name.
	Name string `json:"name"`
	// SessionID is set for a session's own servers.
	SessionID string `json:"session_id,omitempty"`
	// Status is MCPStarting, MCPConnected, MCPFailed or MCPStopped.
	Status string `json:"status"`
	// Tools are the names offered to the model (mcp__NAME__TOOL); empty
	// unless connected.
	Tools []string `json:"tools"`
	// Error says why the server failed.
	Error string `json:"error,omitempty"`
}

// MCPServerList is the body of GET /v1/workspaces/{id}/mcp.
type MCPServerList struct {
	Servers []MCPServerStatus `json:"servers"`
}

// CompactionStarted is the data of session.compaction_started.
type CompactionStarted struct {
	// TokensBefore is the size of the request that made the run compact.
	TokensBefore int64 `json:"tokens_before"`
}

// CompactionCompleted is the data of session.compaction_completed.
type CompactionCompleted struct {
	TokensBefore int64 `json:"tokens_before"`
	// TokensAfter is the size of the next request, estimated.
	TokensAfter      int64  `json:"tokens_after"`
	SummaryMessageID string `json:"summary_message_id"`
}
