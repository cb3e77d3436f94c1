package tui

import (
	"context"

	"github.com/tandem-dev/tandem/proto"
)

// API is what the TUI asks of the server; *client.Client has it. The model
// calls it only from tea.Cmds, never while drawing.
type API interface {
	ClientID() string
	ListSessions(ctx context.Context, workspaceID string) ([]proto.Session, error)
	GetSession(ctx context.Context, workspaceID, sessionID string) (proto.Session, error)
	CreateSession(ctx context.Context, workspaceID string, req proto.CreateSessionRequest) (proto.Session, error)
	UpdateSession(ctx context.Context, workspaceID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error)
	Messages(ctx context.Context, workspaceID, sessionID string) ([]proto.Message, error)
	Pending(ctx context.Context, workspaceID, sessionID string) (proto.PendingWork, error)
	AgentStatus(ctx context.Context, workspaceID, sessionID string) (proto.AgentStatus, error)
	Prompt(ctx context.Context, workspaceID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	Cancel(ctx context.Context, workspaceID, sessionID string) ([]string, error)
	SetModel(ctx context.Context, workspaceID, sessionID string, req proto.SetModelRequest) (proto.Session, error)
	Compact(ctx context.Context, workspaceID, sessionID string) (proto.PromptAccepted, error)
	AnswerPermission(ctx context.Context, workspaceID, requestID string, a proto.PermissionAnswer) (proto.PermissionAnswered, error)
	ForkSession(ctx context.Context, workspaceID, sessionID string, req proto.ForkRequest) (proto.Session, error)
	ExportSession(ctx context.Context, workspaceID, sessionID string) (proto.Export, error)
	Checkpoints(ctx context.Context, workspaceID, sessionID string) ([]proto.Checkpoint, error)
	CheckpointDiff(ctx context.Context, workspaceID, sessionID, checkpointID string) (proto.CheckpointDiff, error)
	Rewind(ctx context.Context, workspaceID, sessionID string, req proto.RewindRequest) (proto.RewindResult, error)
}
