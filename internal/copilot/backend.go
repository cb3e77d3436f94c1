package copilot

import (
	"context"
	"errors"

	"github.com/tandem-dev/tandem/proto"
)

// ErrNotFound is what a Backend's error wraps when the workspace, session or
// request it was asked about does not exist.
var ErrNotFound = errors.New("not found")

// ErrToolConflict is what a Backend's error wraps when a client tool's name
// is already offered by another client of the session.
var ErrToolConflict = errors.New("tool conflict")

// Backend is what the bridge needs of Tandem, on behalf of one client of the
// protocol (its client id is fixed when the Backend is made): sessions,
// prompts, pending answers, and an event subscription with replay. An
// adapter implements it over Tandem's domain or over its HTTP API.
type Backend interface {
	// OpenWorkspace registers (or finds) the workspace at an absolute path.
	OpenWorkspace(ctx context.Context, path string) (proto.Workspace, error)
	Workspaces(ctx context.Context) ([]proto.Workspace, error)

	CreateSession(ctx context.Context, wsID string, req proto.CreateSessionRequest) (proto.Session, error)
	Sessions(ctx context.Context, wsID string) ([]proto.Session, error)
	Session(ctx context.Context, wsID, sessionID string) (proto.Session, error)
	DeleteSession(ctx context.Context, wsID, sessionID string) error
	Resume(ctx context.Context, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error)
	SetModel(ctx context.Context, wsID, sessionID string, req proto.SetModelRequest) (proto.Session, error)
	Log(ctx context.Context, wsID, sessionID string, req proto.LogRequest) (int64, error)

	// History returns the session's kept events after seq after, in order.
	History(ctx context.Context, wsID, sessionID string, after int64) ([]proto.Event, error)
	// Subscribe streams the session's events after seq after, live.
	Subscribe(ctx context.Context, wsID, sessionID string, after int64) (Stream, error)

	Prompt(ctx context.Context, wsID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	Cancel(ctx context.Context, wsID, sessionID string) error
	Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error)
	AnswerPermission(ctx context.Context, wsID, requestID string, a proto.PermissionAnswer) (proto.PermissionAnswered, error)
	AnswerToolCall(ctx context.Context, wsID, requestID string, a proto.ToolCallAnswer) (proto.ToolCallAnswered, error)

	// Close releases what the Backend holds; it detaches the client.
	Close()
}

// Stream is a live subscription to a session's events.
type Stream interface {
	Next(ctx context.Context) (proto.Event, error)
	Close() error
}
