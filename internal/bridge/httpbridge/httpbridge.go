// Package httpbridge implements bridge.Backend over Tandem's HTTP API and
// event stream, with the Go client: a protocol bridge then runs beside any
// Tandem server, and its sessions are live both ways with every other
// client of that server. The server enforces the token's role and keeps
// the audit log, as for any client.
package httpbridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/proto"
)

// historyPage is how many events one history request asks for.
const historyPage = 1000

// Backend is a bridge.Backend for one client of a protocol.
type Backend struct {
	c *client.Client
}

// Connect returns a function that makes a Backend per connection, each a
// client of the server at baseURL with the connection's client id.
func Connect(baseURL, token string) bridge.Connect {
	return func(clientID string) (bridge.Backend, error) {
		return &Backend{c: client.New(baseURL, token, client.WithClientID(clientID))}, nil
	}
}

// Authenticate returns a copilot.Config Authenticate that accepts a Tandem
// token of the server at baseURL: the connection then acts as that token's
// person, with its role, rate and audit, since every call it makes is a
// request of the HTTP API with that token. A token the server refuses is
// an error (the server audits the refusal).
func Authenticate(baseURL string) func(ctx context.Context, clientID, token string) (bridge.Backend, error) {
	return func(ctx context.Context, clientID, token string) (bridge.Backend, error) {
		c := client.New(baseURL, token, client.WithClientID(clientID))
		ctx, cancel := context.WithTimeout(ctx, authWait)
		defer cancel()
		if _, err := c.Me(ctx); err != nil {
			if client.IsCode(err, proto.CodeUnauthorized) {
				return nil, errors.New("not a Tandem token of this server")
			}
			return nil, fmt.Errorf("check the token: %w", err)
		}
		return &Backend{c: c}, nil
	}
}

// authWait bounds the check of a connection's token.
const authWait = 10 * time.Second

// wrap gives the server's error answers the contract's terms (bridge.Error).
func wrap(err error) error {
	var e *client.APIError
	if errors.As(err, &e) {
		return bridge.Wrap(err, e.Code, e.Message)
	}
	return err
}

func (b *Backend) Me(ctx context.Context) (proto.Me, error) {
	me, err := b.c.Me(ctx)
	return me, wrap(err)
}

func (b *Backend) UpdateSession(ctx context.Context, wsID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error) {
	s, err := b.c.UpdateSession(ctx, wsID, sessionID, req)
	return s, wrap(err)
}

func (b *Backend) OpenWorkspace(ctx context.Context, path string) (proto.Workspace, error) {
	ws, _, err := b.c.CreateWorkspace(ctx, path)
	return ws, wrap(err)
}

func (b *Backend) Workspaces(ctx context.Context) ([]proto.Workspace, error) {
	list, err := b.c.ListWorkspaces(ctx)
	return list, wrap(err)
}

func (b *Backend) CreateSession(ctx context.Context, wsID string, req proto.CreateSessionRequest) (proto.Session, error) {
	s, err := b.c.CreateSession(ctx, wsID, req)
	return s, wrap(err)
}

func (b *Backend) Sessions(ctx context.Context, wsID string) ([]proto.Session, error) {
	list, err := b.c.ListSessions(ctx, wsID)
	return list, wrap(err)
}

func (b *Backend) Session(ctx context.Context, wsID, sessionID string) (proto.Session, error) {
	s, err := b.c.GetSession(ctx, wsID, sessionID)
	return s, wrap(err)
}

func (b *Backend) DeleteSession(ctx context.Context, wsID, sessionID string) error {
	return wrap(b.c.DeleteSession(ctx, wsID, sessionID))
}

func (b *Backend) Resume(ctx context.Context, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	r, err := b.c.Resume(ctx, wsID, sessionID, req)
	return r, wrap(err)
}

func (b *Backend) SetModel(ctx context.Context, wsID, sessionID string, req proto.SetModelRequest) (proto.Session, error) {
	s, err := b.c.SetModel(ctx, wsID, sessionID, req)
	return s, wrap(err)
}

func (b *Backend) Log(ctx context.Context, wsID, sessionID string, req proto.LogRequest) (int64, error) {
	seq, err := b.c.Log(ctx, wsID, sessionID, req)
	return seq, wrap(err)
}

func (b *Backend) History(ctx context.Context, wsID, sessionID string, after int64) ([]proto.Event, error) {
	var all []proto.Event
	for {
		page, err := b.c.SessionEvents(ctx, wsID, sessionID, after, historyPage)
		if err != nil {
			return nil, wrap(err)
		}
		all = append(all, page...)
		if len(page) < historyPage {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}

func (b *Backend) Subscribe(ctx context.Context, wsID, sessionID string, after int64) (bridge.Stream, error) {
	st, err := b.c.Events(ctx, wsID, client.EventsOptions{SessionID: sessionID, LastEventID: after})
	if err != nil {
		return nil, wrap(err)
	}
	return st, nil
}

func (b *Backend) Prompt(ctx context.Context, wsID string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	acc, err := b.c.Prompt(ctx, wsID, req)
	return acc, wrap(err)
}

func (b *Backend) Cancel(ctx context.Context, wsID, sessionID string) error {
	_, err := b.c.Cancel(ctx, wsID, sessionID)
	return wrap(err)
}

func (b *Backend) Pending(ctx context.Context, wsID, sessionID string) (proto.PendingWork, error) {
	pw, err := b.c.Pending(ctx, wsID, sessionID)
	return pw, wrap(err)
}

func (b *Backend) AnswerPermission(ctx context.Context, wsID, requestID string, a proto.PermissionAnswer) (proto.PermissionAnswered, error) {
	r, err := b.c.AnswerPermission(ctx, wsID, requestID, a)
	if client.IsCode(err, proto.CodeAlreadyResolved) {
		return proto.PermissionAnswered{Resolved: false}, nil
	}
	return r, wrap(err)
}

func (b *Backend) AnswerToolCall(ctx context.Context, wsID, requestID string, a proto.ToolCallAnswer) (proto.ToolCallAnswered, error) {
	r, err := b.c.AnswerToolCall(ctx, wsID, requestID, a)
	if client.IsCode(err, proto.CodeAlreadyResolved) {
		return proto.ToolCallAnswered{Resolved: false}, nil
	}
	return r, wrap(err)
}

func (b *Backend) Close() { b.c.CloseIdleConnections() }
