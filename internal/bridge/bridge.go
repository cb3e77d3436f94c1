// Package bridge is what a protocol bridge (the Copilot SDK's, ACP's)
// needs of Tandem, on behalf of one client of that protocol: sessions,
// prompts, pending answers and an event subscription with replay. A bridge
// is translation only; it reaches Tandem through a Backend, which an
// adapter implements over the HTTP API (package httpbridge, for a bridge
// beside any server) or over the domain in this process (package
// localbridge, with no loopback HTTP). A new protocol is one more package
// of translation over this interface.
package bridge

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

// Backend is Tandem for one client of a protocol (its client id is fixed
// when the Backend is made), acting as one person: the token it was made
// with, whose role Me names and the server enforces.
type Backend interface {
	// Me is the person the Backend acts as.
	Me(ctx context.Context) (proto.Me, error)

	// OpenWorkspace registers (or finds) the workspace at an absolute path.
	OpenWorkspace(ctx context.Context, path string) (proto.Workspace, error)
	Workspaces(ctx context.Context) ([]proto.Workspace, error)

	CreateSession(ctx context.Context, wsID string, req proto.CreateSessionRequest) (proto.Session, error)
	Sessions(ctx context.Context, wsID string) ([]proto.Session, error)
	Session(ctx context.Context, wsID, sessionID string) (proto.Session, error)
	UpdateSession(ctx context.Context, wsID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error)
	DeleteSession(ctx context.Context, wsID, sessionID string) error
	Resume(ctx context.Context, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error)
	SetModel(ctx context.Context, wsID, sessionID string, req proto.SetModelRequest) (proto.Session, error)
	Log(ctx context.Context, wsID, sessionID string, req proto.LogRequest) (int64, error)

	// History returns the session's kept events after seq after, in order.
	History(ctx context.Context, wsID, sessionID string, after int64) ([]proto.Event, error)
	// Subscribe streams the session's events after seq after (live only
	// when after is 0), and attaches the client to the session while the
	// stream is open.
	Subscribe(ctx context.Context, wsID, sessionID string, after int64) (Stream, error)

	Prompt(ctx context.Context, wsID string, req proto.PromptRequest) (proto.PromptAccepted, error)
	Cancel(ctx context.Context, wsID, sessionID string) error
	Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error)
	// AnswerPermission and AnswerToolCall answer Resolved false, and no
	// error, when another answer came first.
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

// Connect makes the Backend of one client of a protocol, for its client id.
type Connect func(clientID string) (Backend, error)

// Error is a Backend call the server refused, in the contract's terms: its
// error code (proto.Code*) and message. It is ErrNotFound for the "not
// found" codes and ErrToolConflict for tool_conflict (errors.Is).
type Error struct {
	Code    string
	Message string
	// Err is the adapter's own error.
	Err error
}

// Wrap returns err as an *Error with the contract's code and message; err
// itself when code is empty (no answer of the server's).
func Wrap(err error, code, message string) error {
	if err == nil || code == "" {
		return err
	}
	return &Error{Code: code, Message: message, Err: err}
}

func (e *Error) Error() string {
	switch {
	case e.notFound():
		return ErrNotFound.Error() + ": " + e.Err.Error()
	case e.Code == proto.CodeToolConflict:
		return ErrToolConflict.Error() + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes the not-found codes ErrNotFound and tool_conflict ErrToolConflict.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.notFound()
	case ErrToolConflict:
		return e.Code == proto.CodeToolConflict
	}
	return false
}

func (e *Error) notFound() bool {
	switch e.Code {
	case proto.CodeNotFound, proto.CodeSessionNotFound, proto.CodeWorkspaceNotFound, proto.CodeRequestNotFound:
		return true
	}
	return false
}
