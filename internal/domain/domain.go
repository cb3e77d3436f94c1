// Package domain is Tandem's API as every transport sees it: the HTTP
// layer, the cluster's node-to-node commands and (next) the Copilot
// protocol and a terminal UI call these interfaces, and know nothing of
// what implements them. The server wires the local implementations; the
// cluster wraps them in a router of the same shape, which sends a call on
// a workspace another node owns to that node.
//
// The package holds interfaces and small value types only: requests and
// answers are the contract's own (package proto), and errors are the
// contract's codes (the error type of internal/tandem), mapped to a
// transport's statuses by the transport.
//
// A new call is added in four places, each a few lines: its method on the
// role's interface here (its request and answer in proto); its local
// implementation (the session service, the coordinator, or the adapters
// in internal/server); its route in internal/httpapi (decode, call
// a.cfg.Role.Method, Respond); and, when it acts on a workspace, its
// command in internal/cluster (an op constant and a case of dispatch in
// command.go, a method on the role's router in router.go that calls
// routed). A role of its own is a new field of Services, and a method of
// Node.Domain's answer.
package domain

import (
	"context"

	"github.com/tandem-dev/tandem/proto"
)

// Services is the domain by role: one implementation of each.
type Services struct {
	Workspaces Workspaces
	Sessions   Sessions
	Runs       Runs
	Pending    Pending
	MCP        MCP
	Streams    Streams
	Rewinds    Rewinds
}

// Workspaces opens, lists, shows, closes and forgets workspaces (contract
// section 3).
type Workspaces interface {
	// Open opens the workspace of req.Path, creating it when it is new
	// (created reports that), and holds it open for the create grace.
	Open(ctx context.Context, req proto.CreateWorkspaceRequest) (ws proto.Workspace, created bool, err error)
	List(ctx context.Context) ([]proto.Workspace, error)
	Get(ctx context.Context, workspaceID string) (proto.Workspace, error)
	// Delete closes the workspace: its runs end and its streams with them.
	Delete(ctx context.Context, workspaceID string) error
	// Forget closes the workspace if it is open and removes it with all it
	// holds (sessions, messages, events, pending work, checkpoints): it is
	// listed no more and its id is not found. Its directory is not touched.
	Forget(ctx context.Context, workspaceID string) error
}

// Sessions keeps a workspace's sessions and what they hold (section 4).
type Sessions interface {
	Create(ctx context.Context, workspaceID string, req proto.CreateSessionRequest) (proto.Session, error)
	List(ctx context.Context, workspaceID string) ([]proto.Session, error)
	// Last is the id of the session last used, nil when there is none.
	Last(ctx context.Context, workspaceID string) (*string, error)
	Get(ctx context.Context, workspaceID, sessionID string) (proto.Session, error)
	Delete(ctx context.Context, workspaceID, sessionID string) error
	Messages(ctx context.Context, workspaceID, sessionID string) ([]proto.Message, error)
	// Events are the session's recorded events after seq after, at most
	// limit of them (0: the default).
	Events(ctx context.Context, workspaceID, sessionID string, after int64, limit int) ([]proto.Event, error)
	// Log records a client's line in the session and returns its seq.
	Log(ctx context.Context, workspaceID, sessionID string, req proto.LogRequest) (int64, error)
	SetModel(ctx context.Context, workspaceID, sessionID string, req proto.SetModelRequest) (proto.Session, error)
	Update(ctx context.Context, workspaceID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error)
	// AllMessages are Messages with those a rewind took out of the
	// history, marked rewound (section 11).
	AllMessages(ctx context.Context, workspaceID, sessionID string) ([]proto.Message, error)
	// Fork makes a session from a prefix of another's history.
	Fork(ctx context.Context, workspaceID, sessionID string, req proto.ForkRequest) (proto.Session, error)
	Export(ctx context.Context, workspaceID, sessionID string) (proto.Export, error)
	// Import makes a session of an exported one; only an owner's import
	// (the caller's role) keeps permission_mode allow_all.
	Import(ctx context.Context, workspaceID string, doc proto.Export) (proto.Session, error)
}

// Rewinds keeps a session's checkpoints and takes it back to one, files
// included (section 11).
type Rewinds interface {
	Checkpoints(ctx context.Context, workspaceID, sessionID string) ([]proto.Checkpoint, error)
	CheckpointDiff(ctx context.Context, workspaceID, sessionID, checkpointID string) (proto.CheckpointDiff, error)
	Rewind(ctx context.Context, workspaceID, sessionID string, req proto.RewindRequest) (proto.RewindResult, error)
}

// Runs drives the agent (section 5).
type Runs interface {
	// Prompt queues a run, or steers the running one when req.Delivery
	// is proto.DeliverySteer; it answers once the run is accepted.
	Prompt(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	// Compact queues a compaction run of the session.
	Compact(ctx context.Context, workspaceID, sessionID string) (proto.PromptAccepted, error)
	// Cancel cancels the session's running and queued runs and returns
	// their ids.
	Cancel(ctx context.Context, workspaceID, sessionID string) ([]string, error)
	Status(ctx context.Context, workspaceID, sessionID string) (proto.AgentStatus, error)
	// Resume takes a session back after its client was gone, and can
	// continue the work it left pending.
	Resume(ctx context.Context, workspaceID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error)
}

// Pending is the work that waits for a client: permissions and client
// tool calls (section 7).
type Pending interface {
	// Pending is the session's waiting work.
	Pending(ctx context.Context, workspaceID, sessionID string) (proto.PendingWork, error)
	Permissions(ctx context.Context, workspaceID string) ([]proto.PermissionRequest, error)
	// AnswerPermission resolves a permission request; the first answer
	// wins. It returns the result the run goes on with.
	AnswerPermission(ctx context.Context, workspaceID, requestID string, a proto.PermissionAnswer) (string, error)
	AnswerToolCall(ctx context.Context, workspaceID, requestID string, a proto.ToolCallAnswer) error
}

// MCP reports the MCP servers of a workspace and its sessions.
type MCP interface {
	MCPServers(ctx context.Context, workspaceID string) ([]proto.MCPServerStatus, error)
}
