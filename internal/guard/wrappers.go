package guard

import (
	"context"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/proto"
)

type workspaces struct {
	g *guard
	d domain.Workspaces
}

func (w workspaces) Open(ctx context.Context, req proto.CreateWorkspaceRequest) (proto.Workspace, bool, error) {
	if err := check(ctx, auth.WorkspaceOpen); err != nil {
		return proto.Workspace{}, false, err
	}
	path, err := w.g.openPath(ctx, w.d, req.Path)
	if err != nil {
		return proto.Workspace{}, false, err
	}
	req.Path = path
	return w.d.Open(ctx, req)
}

func (w workspaces) List(ctx context.Context) ([]proto.Workspace, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return w.d.List(ctx)
}

func (w workspaces) Get(ctx context.Context, id string) (proto.Workspace, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.Workspace{}, err
	}
	return w.d.Get(ctx, id)
}

func (w workspaces) Delete(ctx context.Context, id string) error {
	if err := check(ctx, auth.WorkspaceDelete); err != nil {
		return err
	}
	return w.d.Delete(ctx, id)
}

func (w workspaces) Forget(ctx context.Context, id string) error {
	if err := check(ctx, auth.WorkspaceDelete); err != nil {
		return err
	}
	return w.d.Forget(ctx, id)
}

type sessions struct {
	g *guard
	d domain.Sessions
}

func (s sessions) Create(ctx context.Context, wid string, req proto.CreateSessionRequest) (proto.Session, error) {
	acts := append([]auth.Action{auth.SessionCreate}, CreateWidening(req)...)
	if role(ctx) < auth.Owner {
		acts = append(acts, SandboxWidening(s.g.sandboxBase(ctx, wid), req.SandboxOptions)...)
	}
	if err := check(ctx, acts...); err != nil {
		return proto.Session{}, err
	}
	return s.d.Create(ctx, wid, req)
}

func (s sessions) List(ctx context.Context, wid string) ([]proto.Session, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.List(ctx, wid)
}

func (s sessions) Last(ctx context.Context, wid string) (*string, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.Last(ctx, wid)
}

func (s sessions) Get(ctx context.Context, wid, sid string) (proto.Session, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.Session{}, err
	}
	return s.d.Get(ctx, wid, sid)
}

func (s sessions) Delete(ctx context.Context, wid, sid string) error {
	if err := check(ctx, auth.SessionDelete); err != nil {
		return err
	}
	return s.d.Delete(ctx, wid, sid)
}

func (s sessions) Messages(ctx context.Context, wid, sid string) ([]proto.Message, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.Messages(ctx, wid, sid)
}

func (s sessions) Events(ctx context.Context, wid, sid string, after int64, limit int) ([]proto.Event, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.Events(ctx, wid, sid, after, limit)
}

func (s sessions) Log(ctx context.Context, wid, sid string, req proto.LogRequest) (int64, error) {
	if err := check(ctx, auth.SessionLog); err != nil {
		return 0, err
	}
	return s.d.Log(ctx, wid, sid, req)
}

func (s sessions) SetModel(ctx context.Context, wid, sid string, req proto.SetModelRequest) (proto.Session, error) {
	if err := check(ctx, auth.SessionUpdate); err != nil {
		return proto.Session{}, err
	}
	return s.d.SetModel(ctx, wid, sid, req)
}

func (s sessions) Update(ctx context.Context, wid, sid string, req proto.UpdateSessionRequest) (proto.Session, error) {
	wide := UpdateWidening(req, func() bool { return s.g.allowAll(ctx, wid, sid) })
	if role(ctx) < auth.Owner {
		wide = append(wide, SandboxWidening(s.g.sandboxOf(ctx, wid, sid), req.SandboxOptions)...)
	}
	if err := check(ctx, append([]auth.Action{auth.SessionUpdate}, wide...)...); err != nil {
		return proto.Session{}, err
	}
	return s.d.Update(ctx, wid, sid, req)
}

func (s sessions) AllMessages(ctx context.Context, wid, sid string) ([]proto.Message, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.AllMessages(ctx, wid, sid)
}

func (s sessions) Fork(ctx context.Context, wid, sid string, req proto.ForkRequest) (proto.Session, error) {
	if err := check(ctx, auth.SessionFork); err != nil {
		return proto.Session{}, err
	}
	return s.d.Fork(ctx, wid, sid, req)
}

func (s sessions) Export(ctx context.Context, wid, sid string) (proto.Export, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.Export{}, err
	}
	return s.d.Export(ctx, wid, sid)
}

func (s sessions) Import(ctx context.Context, wid string, doc proto.Export) (proto.Session, error) {
	if err := check(ctx, auth.SessionImport); err != nil {
		return proto.Session{}, err
	}
	return s.d.Import(ctx, wid, doc)
}

type runs struct {
	g *guard
	d domain.Runs
}

func (r runs) Prompt(ctx context.Context, wid string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	act := auth.Prompt
	if req.Delivery == proto.DeliverySteer {
		act = auth.Steer
	}
	if err := check(ctx, act); err != nil {
		return proto.PromptAccepted{}, err
	}
	return r.d.Prompt(ctx, wid, req)
}

func (r runs) Compact(ctx context.Context, wid, sid string) (proto.PromptAccepted, error) {
	if err := check(ctx, auth.Compact); err != nil {
		return proto.PromptAccepted{}, err
	}
	return r.d.Compact(ctx, wid, sid)
}

func (r runs) Cancel(ctx context.Context, wid, sid string) ([]string, error) {
	if err := check(ctx, auth.Cancel); err != nil {
		return nil, err
	}
	return r.d.Cancel(ctx, wid, sid)
}

func (r runs) Status(ctx context.Context, wid, sid string) (proto.AgentStatus, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.AgentStatus{}, err
	}
	return r.d.Status(ctx, wid, sid)
}

func (r runs) Resume(ctx context.Context, wid, sid string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	wide := ResumeWidening(req, func() bool { return r.g.allowAll(ctx, wid, sid) })
	if err := check(ctx, append([]auth.Action{auth.SessionResume}, wide...)...); err != nil {
		return proto.ResumeResponse{}, err
	}
	return r.d.Resume(ctx, wid, sid, req)
}

type pending struct{ d domain.Pending }

func (p pending) Pending(ctx context.Context, wid, sid string) (proto.PendingWork, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.PendingWork{}, err
	}
	return p.d.Pending(ctx, wid, sid)
}

func (p pending) Permissions(ctx context.Context, wid string) ([]proto.PermissionRequest, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return p.d.Permissions(ctx, wid)
}

func (p pending) AnswerPermission(ctx context.Context, wid, rid string, a proto.PermissionAnswer) (string, error) {
	if err := check(ctx, auth.PermissionAnswer); err != nil {
		return "", err
	}
	return p.d.AnswerPermission(ctx, wid, rid, a)
}

func (p pending) AnswerToolCall(ctx context.Context, wid, rid string, a proto.ToolCallAnswer) error {
	if err := check(ctx, auth.ToolAnswer); err != nil {
		return err
	}
	return p.d.AnswerToolCall(ctx, wid, rid, a)
}

type mcp struct{ d domain.MCP }

func (m mcp) MCPServers(ctx context.Context, wid string) ([]proto.MCPServerStatus, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return m.d.MCPServers(ctx, wid)
}

type streams struct{ d domain.Streams }

func (s streams) Subscribe(ctx context.Context, wid string, req domain.StreamRequest) (domain.Stream, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return s.d.Subscribe(ctx, wid, req)
}

type rewinds struct{ d domain.Rewinds }

func (r rewinds) Checkpoints(ctx context.Context, wid, sid string) ([]proto.Checkpoint, error) {
	if err := check(ctx, auth.Read); err != nil {
		return nil, err
	}
	return r.d.Checkpoints(ctx, wid, sid)
}

func (r rewinds) CheckpointDiff(ctx context.Context, wid, sid, cid string) (proto.CheckpointDiff, error) {
	if err := check(ctx, auth.Read); err != nil {
		return proto.CheckpointDiff{}, err
	}
	return r.d.CheckpointDiff(ctx, wid, sid, cid)
}

func (r rewinds) Rewind(ctx context.Context, wid, sid string, req proto.RewindRequest) (proto.RewindResult, error) {
	if err := check(ctx, auth.SessionRewind); err != nil {
		return proto.RewindResult{}, err
	}
	return r.d.Rewind(ctx, wid, sid, req)
}
