package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tandem-dev/tandem/proto"
)

// Health reports the server's status; it needs no token, so it also tells a
// wrong token from a server that is down.
func (c *Client) Health(ctx context.Context) (proto.Health, error) {
	var out proto.Health
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("health"), out: &out})
	return out, err
}

// CreateWorkspace registers the project directory at absPath, or finds the
// workspace already registered for it; created tells the two apart (201 vs
// 200). Either way the server holds the workspace open for the create grace,
// long enough to open a stream on it.
func (c *Client) CreateWorkspace(ctx context.Context, absPath string) (ws proto.Workspace, created bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces"),
		in: proto.CreateWorkspaceRequest{Path: absPath}, out: &ws, auth: true})
	return ws, status == http.StatusCreated, err
}

// ListWorkspaces lists every known workspace, open or closed.
func (c *Client) ListWorkspaces(ctx context.Context) ([]proto.Workspace, error) {
	var out proto.WorkspaceList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces"), out: &out, auth: true})
	return out.Workspaces, err
}

// GetWorkspace returns one workspace.
func (c *Client) GetWorkspace(ctx context.Context, workspaceID string) (proto.Workspace, error) {
	var out proto.Workspace
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID), out: &out, auth: true})
	return out, err
}

// DeleteWorkspace closes the workspace at once, without the detach grace:
// its runs are canceled and its streams end.
func (c *Client) DeleteWorkspace(ctx context.Context, workspaceID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: path("workspaces", workspaceID), auth: true})
	return err
}

// ForgetWorkspace closes the workspace if it is open and removes it with
// everything the server keeps of it (sessions, messages, events,
// checkpoints); its directory is left alone. Owner only.
func (c *Client) ForgetWorkspace(ctx context.Context, workspaceID string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "forget"), auth: true})
	return err
}

// CreateSession opens a session in a workspace. An empty req.ClientID is
// filled with the client's own, so tools in req.Tools belong to this client.
func (c *Client) CreateSession(ctx context.Context, workspaceID string, req proto.CreateSessionRequest) (proto.Session, error) {
	if req.ClientID == "" {
		req.ClientID = c.clientID
	}
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions"),
		in: req, out: &out, auth: true})
	return out, err
}

// ListSessions lists a workspace's sessions, most recently updated first.
func (c *Client) ListSessions(ctx context.Context, workspaceID string) ([]proto.Session, error) {
	var out proto.SessionList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions"), out: &out, auth: true})
	return out.Sessions, err
}

// LastSession returns the most recently updated session's id, for a client
// that wants to pick up where it left off; ok is false when there is none.
func (c *Client) LastSession(ctx context.Context, workspaceID string) (sessionID string, ok bool, err error) {
	var out proto.LastSession
	_, err = c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", "last"), out: &out, auth: true})
	if err != nil || out.SessionID == nil {
		return "", false, err
	}
	return *out.SessionID, true, nil
}

// GetSession returns one session.
func (c *Client) GetSession(ctx context.Context, workspaceID, sessionID string) (proto.Session, error) {
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID), out: &out, auth: true})
	return out, err
}

// UpdateSession changes a session's settings (title, compaction,
// permission mode, tool lists) and returns it; a nil field keeps its value.
// Every client sees session.updated.
func (c *Client) UpdateSession(ctx context.Context, workspaceID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error) {
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodPatch, path: path("workspaces", workspaceID, "sessions", sessionID), in: req, out: &out, auth: true})
	return out, err
}

// Compact queues a compaction of the session's conversation, a run of its
// own (no user message): the model summarizes the conversation, and later
// requests carry the summary in place of what it covers. Follow it like a
// prompt's run; it ends end_turn, or error with code compaction_failed and
// the history unchanged.
func (c *Client) Compact(ctx context.Context, workspaceID, sessionID string) (proto.PromptAccepted, error) {
	var out proto.PromptAccepted
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", sessionID, "compact"), in: struct{}{}, out: &out, auth: true})
	return out, err
}

// DeleteSession deletes a session, canceling its runs and its pending
// requests; every later call about it answers session_not_found.
func (c *Client) DeleteSession(ctx context.Context, workspaceID, sessionID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: path("workspaces", workspaceID, "sessions", sessionID), auth: true})
	return err
}

// Messages returns a session's history, oldest first.
func (c *Client) Messages(ctx context.Context, workspaceID, sessionID string) ([]proto.Message, error) {
	var out proto.MessageList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "messages"), out: &out, auth: true})
	return out.Messages, err
}

// SessionEvents returns a session's kept events with seq > after, oldest
// first, at most limit of them (0: the server's default). It is how a client
// catches up after a stream.reset.
func (c *Client) SessionEvents(ctx context.Context, workspaceID, sessionID string, after int64, limit int) ([]proto.Event, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out proto.EventList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "events"),
		query: q, out: &out, auth: true})
	return out.Events, err
}

// Resume attaches this client to an existing session (registering the tools
// of req.Tools as this client's) and returns it with its pending requests.
// With req.ContinuePendingWork, work suspended while nobody was attached is
// revived and its requests announced again; without it, that work is
// interrupted. Work of a session that is still active is left alone either
// way; the session.resumed event says which case it was. An empty
// req.ClientID is filled with the client's own.
func (c *Client) Resume(ctx context.Context, workspaceID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	if req.ClientID == "" {
		req.ClientID = c.clientID
	}
	var out proto.ResumeResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", sessionID, "resume"),
		in: req, out: &out, auth: true})
	return out, err
}

// Log writes a line to a session's log, seen by every client as session.log,
// and returns its seq.
func (c *Client) Log(ctx context.Context, workspaceID, sessionID string, req proto.LogRequest) (int64, error) {
	var out proto.LogResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", sessionID, "log"),
		in: req, out: &out, auth: true})
	return out.Seq, err
}

// SetModel switches a session's model (a PROVIDER/MODEL string) for its next
// runs and returns the session; every client sees session.model_changed. A
// nil req.ReasoningEffort keeps the session's current effort (see Effort).
func (c *Client) SetModel(ctx context.Context, workspaceID, sessionID string, req proto.SetModelRequest) (proto.Session, error) {
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodPut, path: path("workspaces", workspaceID, "sessions", sessionID, "model"),
		in: req, out: &out, auth: true})
	return out, err
}

// Pending returns the permission and tool-call requests a session's runs wait on.
func (c *Client) Pending(ctx context.Context, workspaceID, sessionID string) (proto.PendingWork, error) {
	var out proto.PendingWork
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "pending"), out: &out, auth: true})
	return out, err
}

// Prompt starts (or queues) a run. It returns as soon as the server accepted
// it; follow the run on an event stream, opened before prompting so that no
// event of the run is missed. An empty req.ClientID is filled with the
// client's own.
//
// A prompt with req.IdempotencyKey set (a new UUID per prompt, say) may be
// sent again with the same key after a timeout or a 5xx, on any node of a
// cluster: if the first send was accepted, the retry answers with that
// run's id and its state now, and starts nothing.
func (c *Client) Prompt(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	if req.ClientID == "" {
		req.ClientID = c.clientID
	}
	var out proto.PromptAccepted
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "agent"), in: req, out: &out, auth: true})
	return out, err
}

// Steer sends a prompt into the session's active run (delivery steer): the
// model reads it at the run's next step, and the answer carries the run's
// id with state proto.RunSteered; the run ends with one run.completed, as
// it would have. With no active run the prompt runs on its own, as Prompt
// would run it. An empty req.ClientID is filled with the client's own.
func (c *Client) Steer(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	req.Delivery = proto.DeliverySteer
	return c.Prompt(ctx, workspaceID, req)
}

// Cancel cancels a session's active run and every run queued before the
// cancel, and returns their ids; each still ends with its run.completed.
func (c *Client) Cancel(ctx context.Context, workspaceID, sessionID string) ([]string, error) {
	var out proto.CancelResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "agent", "sessions", sessionID, "cancel"),
		out: &out, auth: true})
	return out.CanceledRuns, err
}

// AgentStatus tells whether a session is running and what is queued.
func (c *Client) AgentStatus(ctx context.Context, workspaceID, sessionID string) (proto.AgentStatus, error) {
	var out proto.AgentStatus
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "agent", "sessions", sessionID), out: &out, auth: true})
	return out, err
}

// ListPermissions lists the workspace's pending permission requests, across
// its sessions.
func (c *Client) ListPermissions(ctx context.Context, workspaceID string) ([]proto.PermissionRequest, error) {
	var out proto.PermissionList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "permissions"), out: &out, auth: true})
	return out.Permissions, err
}

// MCPServers lists the MCP servers of the workspace (its configuration's)
// and of its sessions that have run, each with its state and tools. An
// invalid workspace configuration file fails with invalid_config.
func (c *Client) MCPServers(ctx context.Context, workspaceID string) ([]proto.MCPServerStatus, error) {
	var out proto.MCPServerList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "mcp"), out: &out, auth: true})
	return out.Servers, err
}

// AnswerPermission decides a permission request announced as
// permission.requested, with one of the proto.Decision* values; the answer
// carries the result (proto.Result*). The first answer of any client wins; a
// later one fails with already_resolved. An empty a.ClientID is filled with
// the client's own.
func (c *Client) AnswerPermission(ctx context.Context, workspaceID, requestID string, a proto.PermissionAnswer) (proto.PermissionAnswered, error) {
	if a.ClientID == "" {
		a.ClientID = c.clientID
	}
	var out proto.PermissionAnswered
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "permissions", requestID),
		in: a, out: &out, auth: true})
	return out, err
}

// AnswerToolCall gives the result of a client tool call announced as
// tool.requested (build a with ToolResult or ToolError). The first answer of
// any client wins; a later one fails with already_resolved. An empty
// a.ClientID is filled with the client's own.
func (c *Client) AnswerToolCall(ctx context.Context, workspaceID, requestID string, a proto.ToolCallAnswer) (proto.ToolCallAnswered, error) {
	if a.ClientID == "" {
		a.ClientID = c.clientID
	}
	var out proto.ToolCallAnswered
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "tool-calls", requestID),
		in: a, out: &out, auth: true})
	return out, err
}
