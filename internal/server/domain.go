package server

import (
	"context"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/coordinator"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// localDomain is the domain this process serves itself: the session
// service and the coordinator as they are, the workspace manager and the
// streams behind the small adapters below.
func localDomain(ws *workspace.Manager, sessions *session.Service, runs *coordinator.Coordinator) domain.Services {
	return domain.Services{
		Workspaces: workspaces{ws, sessions, runs},
		Sessions:   sessions,
		Runs:       runs,
		Pending:    runs,
		MCP:        runs,
		Streams:    streams{ws, sessions},
		Rewinds:    runs,
	}
}

// workspaces is domain.Workspaces over the manager; a forget goes
// through the session service, which fences the sessions, and the
// coordinator, which keeps the workspace's files in the data dir.
type workspaces struct {
	m        *workspace.Manager
	sessions *session.Service
	runs     *coordinator.Coordinator
}

func (w workspaces) Open(ctx context.Context, req proto.CreateWorkspaceRequest) (proto.Workspace, bool, error) {
	ws, created, err := w.m.Open(ctx, req.Path)
	if err != nil {
		return proto.Workspace{}, false, err
	}
	return ws.Info(), created, nil
}

func (w workspaces) List(ctx context.Context) ([]proto.Workspace, error) { return w.m.List(ctx) }

func (w workspaces) Get(ctx context.Context, id string) (proto.Workspace, error) {
	ws, err := w.m.Get(ctx, id)
	if err != nil {
		return proto.Workspace{}, err
	}
	return ws.Info(), nil
}

func (w workspaces) Delete(ctx context.Context, id string) error {
	ws, err := w.m.Get(ctx, id)
	if err != nil {
		return err
	}
	ws.Close("deleted")
	return nil
}

func (w workspaces) Forget(ctx context.Context, id string) error {
	if err := w.sessions.ForgetWorkspace(ctx, id); err != nil {
		return err
	}
	w.runs.DropWorkspace(id)
	return nil
}

// streams is domain.Streams over the workspaces' topics: any node serves
// a workspace's stream, from the bus when another node owns it.
type streams struct {
	m        *workspace.Manager
	sessions *session.Service
}

func (s streams) Subscribe(ctx context.Context, id string, req domain.StreamRequest) (domain.Stream, error) {
	ws, err := s.m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := apierr.CheckUUID("client_id", req.ClientID); err != nil {
		return nil, err
	}
	if req.SessionID != "" {
		if err := apierr.CheckUUID("session_id", req.SessionID); err != nil {
			return nil, err
		}
		// Only whether the session is there: a reconnect storm asks it
		// once per stream, so it is answered from memory when it can.
		if _, _, err := s.sessions.LookupSettings(ctx, ws.ID, req.SessionID); err != nil {
			return nil, err
		}
		s.sessions.Join(ws, req.SessionID, req.ClientID)
	}
	return &stream{ws: ws, opts: workspace.StreamOptions{
		ClientID: req.ClientID, SessionID: req.SessionID, LastEventID: req.LastEventID, Resume: req.Resume, Name: req.Name,
	}}, nil
}

// stream is one subscribed stream, served by its workspace.
type stream struct {
	ws   *workspace.Workspace
	opts workspace.StreamOptions
}

func (s *stream) Serve(ctx context.Context, sink domain.Sink) error {
	return s.ws.Stream(ctx, sink, &s.opts)
}
