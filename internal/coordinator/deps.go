package coordinator

import (
	"context"
	"time"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/toolset"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// The coordinator's dependencies, each the methods it calls and no more:
// the server passes the concrete ones (a store, *workspace.Manager,
// *session.Service, *agent.Runner, *pending.Broker, *toolset.Set,
// *config.Loader), and its tests pass fakes.

// Store is what the coordinator reads of the store: sessions (a fence
// after a delete), the workspaces' logs (Recover) and the attachments kept
// for runs, the prompts' idempotency keys.
type Store interface {
	GetSession(ctx context.Context, workspaceID, id string) (store.Session, error)
	GetWorkspace(ctx context.Context, id string) (store.Workspace, error)
	ListWorkspaces(ctx context.Context) ([]store.Workspace, error)
	ListSessions(ctx context.Context, workspaceID string) ([]store.Session, error)
	WorkspaceEvents(ctx context.Context, workspaceID string, afterSeq, upToSeq int64, limit int) ([]store.Event, error)
	SetRecoveredThrough(ctx context.Context, workspaceID string, seq int64) error
	RunAttachments(ctx context.Context, runID string) ([]store.Attachments, error)
	ListPending(ctx context.Context, workspaceID string) ([]store.Pending, error)
	PromptByKey(ctx context.Context, sessionID, key string, since time.Time) (runID string, err error)
}

// Workspaces finds the open workspaces runs belong to.
type Workspaces interface {
	Get(ctx context.Context, id string) (*workspace.Workspace, error)
}

// Sessions is the session service as runs use it: settings, provider keys,
// own MCP servers and the clients attached.
type Sessions interface {
	// Changes counts the changes to any session's settings.
	Changes() uint64
	Lookup(ctx context.Context, wsID, sessionID string) (*workspace.Workspace, store.Session, error)
	LookupSettings(ctx context.Context, wsID, sessionID string) (*workspace.Workspace, store.Session, error)
	Get(ctx context.Context, wsID, sessionID string) (proto.Session, error)
	NameFromPrompt(ctx context.Context, wsID, sessionID, prompt string) error
	APIKey(sessionID string) string
	MCPServers(sessionID string) (servers map[string]config.MCPServer, ok bool)
	SetProvider(ctx context.Context, wsID, sessionID string, p *proto.Provider) error
	SetMCPServers(ctx context.Context, wsID, sessionID string, servers map[string]config.MCPServer) error
	Join(ws *workspace.Workspace, sessionID, clientID string)
	OtherClientAttached(ws *workspace.Workspace, sessionID, clientID string) bool
}

// Runner does the work of a run once it has started.
type Runner interface {
	// Execute runs (or revives) the run until it ends or is suspended;
	// unless suspended, it has emitted run.completed when it returns.
	Execute(ctx context.Context, run *agent.Run) agent.Result
	// EndUnstarted ends runs of one session canceled before they started.
	EndUnstarted(ctx context.Context, runs []*agent.Run)
}

// Broker holds the pending work (permissions, client tool calls) runs
// park on.
type Broker interface {
	Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error)
	UnfinishedRuns(ctx context.Context, wsID, sessionID string) ([]string, error)
	AnswerPermission(ctx context.Context, ws *workspace.Workspace, requestID string, a proto.PermissionAnswer) (string, error)
	AnswerToolCall(ctx context.Context, ws *workspace.Workspace, requestID string, a proto.ToolCallAnswer) error
	Interrupt(ctx context.Context, ws *workspace.Workspace, runID string) error
	CancelRun(ctx context.Context, ws *workspace.Workspace, runID string) error
	CancelSession(ctx context.Context, ws *workspace.Workspace, sessionID string)
}

// Tools is the tool set: client tools by session, and each run's rules
// and MCP servers while it runs.
type Tools interface {
	Register(workspaceID, sessionID, clientID string, specs []proto.ToolSpec) error
	Bind(runID string, rc toolset.RunConfig) (unbind func())
	ForgetSession(sessionID string)
}

// Configs gives each workspace its configuration.
type Configs interface {
	// Workspace is the configuration of the workspace at root, read again
	// when its file changed.
	Workspace(root string) (*config.Config, error)
	// Server is the server's configuration alone.
	Server() *config.Config
}
