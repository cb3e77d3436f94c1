package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// A call on a workspace another node owns travels to that node as a
// command: the domain call's name, its arguments (the contract's request
// structs) and its caller, in one NATS request. The owner calls its own
// domain, and answers with the call's result or its error's contract code
// and message, which becomes the same error here. Authentication happened
// once, on the node the client reached; the owner checks the lease only.
//
// A command or an answer too large for one message (a prompt's
// attachments, a long session's messages) is put in the store's blobs by
// the node that has it, and the message carries its id: every command is
// one request and one reply.

// A command carries its deadline: the moment its sender stops waiting for
// the answer (less the answer's way back). The owner refuses a command
// that arrives past it and serves the others within it, so an answer the
// sender gave up on (its client told workspace_unavailable, which says
// nothing happened) never had an effect: nothing of a late command runs.
// The nodes' clocks are taken to agree to well within a second (NTP), as
// the leases' expiry does already.

// answerRoom is the part of a command's time kept for its answer's way
// back (a quarter of a shorter time): the owner's deadline is the
// sender's less it.
const answerRoom = 2 * time.Second

// maxServing bounds the commands a node serves at once.
const maxServing = 1024

// hdrBlob, on a message without data, names the blob that holds it.
const hdrBlob = "Tandem-Blob"

// msgRoom is what a message's subject and headers may take of NATS's
// payload limit.
const msgRoom = 1 << 10

// blobMaxAge is how long a blob nobody took is kept: far past any
// command's deadline.
const blobMaxAge = 10 * time.Minute

// The commands: one per domain call that acts on a workspace, and views.
const (
	opOpen             = "workspace.open"
	opViews            = "workspace.views"
	opGetWorkspace     = "workspace.get"
	opDeleteWorkspace  = "workspace.delete"
	opForgetWorkspace  = "workspace.forget"
	opCreateSession    = "session.create"
	opListSessions     = "session.list"
	opLastSession      = "session.last"
	opGetSession       = "session.get"
	opDeleteSession    = "session.delete"
	opMessages         = "session.messages"
	opSessionEvents    = "session.events"
	opLog              = "session.log"
	opSetModel         = "session.model"
	opUpdateSession    = "session.update"
	opPrompt           = "run.prompt"
	opCompact          = "run.compact"
	opCancel           = "run.cancel"
	opStatus           = "run.status"
	opResume           = "run.resume"
	opPending          = "pending.list"
	opPermissions      = "pending.permissions"
	opAnswerPermission = "pending.permission"
	opAnswerToolCall   = "pending.tool_call"
	opMCPServers       = "mcp.servers"
	opAllMessages      = "session.all_messages"
	opFork             = "session.fork"
	opExport           = "session.export"
	opImport           = "session.import"
	opCheckpoints      = "rewind.checkpoints"
	opCheckpointDiff   = "rewind.diff"
	opRewind           = "rewind.rewind"
)

// command is a domain call on its way to the workspace's owner.
type command struct {
	Op           string `json:"op"`
	WorkspaceID  string `json:"workspace_id,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	After        int64  `json:"after,omitempty"`
	Limit        int    `json:"limit,omitempty"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	// IDs are the workspaces of a views command.
	IDs    []string       `json:"ids,omitempty"`
	Caller *domain.Caller `json:"caller,omitempty"`
	// Deadline (Unix milliseconds) is when the owner must have served
	// the command; past it, the owner refuses it.
	Deadline int64 `json:"deadline,omitempty"`
	// Body is the call's request struct.
	Body json.RawMessage `json:"body,omitempty"`
}

// answer is a command's result, or its error.
type answer struct {
	Result json.RawMessage    `json:"result,omitempty"`
	Error  *proto.ErrorDetail `json:"error,omitempty"`
}

// errOwnerGone marks a command that reached no node: the owner this node
// knew of is gone (stopped, or dead), and nothing of the command ran, so
// it may be routed again.
var errOwnerGone = errors.New("the workspace's owner is gone")

func commandSubject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".command"
}

// send makes the call c (with body, its request struct) on owner and
// decodes its result into out.
func (n *Node) send(ctx context.Context, owner string, c *command, body, out any) error {
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s: %w", c.Op, err)
		}
		c.Body = raw
	}
	if who, ok := domain.CallerFrom(ctx); ok {
		c.Caller = &who
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ForwardTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	c.Deadline = deadline.Add(-min(answerRoom, time.Until(deadline)/4)).UnixMilli()
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode %s: %w", c.Op, err)
	}
	m, err := n.message(ctx, commandSubject(owner), data)
	if err != nil {
		return err
	}
	reply, err := n.cfg.NATS.RequestMsgWithContext(ctx, m)
	if err != nil {
		// No responders, or no answer in time: the owner died or left,
		// and its lease runs out soon.
		n.forget(c.WorkspaceID)
		n.log.Warn("send command", "op", c.Op, "workspace_id", c.WorkspaceID, "owner", owner, "err", err)
		n.dropBlob(ctx, m)
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%w: %w", errOwnerGone, errUnavailable(c.WorkspaceID))
		}
		return errUnavailable(c.WorkspaceID)
	}
	if data, err = n.payload(ctx, reply); err != nil {
		return err
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("decode the answer to %s: %w", c.Op, err)
	}
	if a.Error != nil {
		switch a.Error.Code {
		case proto.CodeWorkspaceUnavailable, proto.CodeWorkspaceNotFound:
			// It may have lost the workspace, or forgotten it: ask the
			// store again next time.
			n.forget(c.WorkspaceID)
		}
		return remoteError(*a.Error)
	}
	if out != nil && len(a.Result) > 0 {
		if err := json.Unmarshal(a.Result, out); err != nil {
			return fmt.Errorf("decode the answer to %s: %w", c.Op, err)
		}
	}
	return nil
}

// message is data as a message to subj: in it when it fits, else in a
// blob the message names.
func (n *Node) message(ctx context.Context, subj string, data []byte) (*nats.Msg, error) {
	m := nats.NewMsg(subj)
	if int64(len(data)) <= n.cfg.NATS.MaxPayload()-msgRoom {
		m.Data = data
		return m, nil
	}
	id := uuid.NewString()
	if err := n.cfg.Store.PutBlob(ctx, id, data); err != nil {
		return nil, err
	}
	m.Header.Set(hdrBlob, id)
	return m, nil
}

// dropBlob deletes the blob m names, which nobody will take now that its
// command failed: a dead owner's commands are not left for the sweep.
func (n *Node) dropBlob(ctx context.Context, m *nats.Msg) {
	id := m.Header.Get(hdrBlob)
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.Tick)
	defer cancel()
	if _, err := n.cfg.Store.TakeBlob(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("drop the blob of a failed command", "err", err)
	}
}

// payload is what m carries, taken from its blob when it names one.
func (n *Node) payload(ctx context.Context, m *nats.Msg) ([]byte, error) {
	id := m.Header.Get(hdrBlob)
	if id == "" {
		return m.Data, nil
	}
	data, err := n.cfg.Store.TakeBlob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(proto.CodeWorkspaceUnavailable, "a command between nodes was lost on its way; try again")
	}
	return data, err
}

// remoteError is the error an owner answered, as the caller's own: the
// same code and message, so it maps to the same status on any node.
func remoteError(d proto.ErrorDetail) error {
	switch {
	case d.Code == proto.CodeStorageUnavailable && d.Message == "":
		return fmt.Errorf("on the workspace's owner: %w", store.ErrUnavailable)
	case d.Code == proto.CodeInternal:
		return errors.New("the workspace's owner failed to serve the call (its log says why)")
	}
	return &apierr.Error{Code: d.Code, Message: d.Message}
}

// errorDetail is err as an answer: the contract's code and message of a
// domain error; a storage failure or an unexpected one, whose detail stays
// in this node's log, by its code only.
func (n *Node) errorDetail(c *command, err error) *proto.ErrorDetail {
	var te *apierr.Error
	switch {
	case errors.As(err, &te):
		return &proto.ErrorDetail{Code: te.Code, Message: te.Message}
	case errors.Is(err, store.ErrUnavailable):
		n.log.Warn("command failed: storage unavailable", "op", c.Op, "workspace_id", c.WorkspaceID, "err", err)
		return &proto.ErrorDetail{Code: proto.CodeStorageUnavailable}
	}
	n.log.Error("command failed", "op", c.Op, "workspace_id", c.WorkspaceID, "err", err)
	return &proto.ErrorDetail{Code: proto.CodeInternal}
}

// serveCommand serves a command another node sent, off the
// subscription's goroutine, unless too many are being served.
func (n *Node) serveCommand(m *nats.Msg) {
	select {
	case n.serving <- struct{}{}:
	default:
		n.respond(m, nil, errBusy())
		return
	}
	if !n.spawn(func() {
		defer func() { <-n.serving }()
		n.serve(m)
	}) {
		<-n.serving
		n.respond(m, nil, errBusy())
	}
}

func errBusy() error {
	return apierr.Errorf(proto.CodeWorkspaceUnavailable, "the workspace's owner cannot take the call now; try again")
}

func (n *Node) serve(m *nats.Msg) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ForwardTimeout)
	defer cancel()
	c, err := n.receive(ctx, m)
	if err != nil {
		n.respond(m, c, err)
		return
	}
	if c.Deadline != 0 {
		deadline := time.UnixMilli(c.Deadline)
		if !time.Now().Before(deadline) {
			n.log.Warn("refused a command past its deadline", "op", c.Op, "workspace_id", c.WorkspaceID,
				"late", time.Since(deadline).Round(time.Millisecond))
			n.respond(m, c, apierr.Errorf(proto.CodeWorkspaceUnavailable, "the call reached the workspace's owner after its deadline; nothing was done"))
			return
		}
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
		defer cancelDeadline()
	}
	if c.Op != opOpen && c.Op != opViews && !n.owns(c.WorkspaceID) {
		// Lost (or never had) it since the sender looked; or it was
		// forgotten here, and the sender still takes this node for its
		// owner.
		err := errUnavailable(c.WorkspaceID)
		if _, gerr := n.cfg.Store.GetWorkspace(ctx, c.WorkspaceID); errors.Is(gerr, store.ErrNotFound) {
			err = apierr.Errorf(proto.CodeWorkspaceNotFound, "workspace %s not found", c.WorkspaceID)
		}
		n.respond(m, c, err)
		return
	}
	if c.Caller != nil {
		ctx = domain.WithCaller(ctx, *c.Caller)
	}
	res, err := n.dispatch(ctx, c)
	if err != nil {
		n.respond(m, c, err)
		return
	}
	n.respondResult(ctx, m, c, res)
}

func (n *Node) receive(ctx context.Context, m *nats.Msg) (*command, error) {
	c := &command{}
	data, err := n.payload(ctx, m)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, c); err != nil {
		return c, apierr.Invalid("malformed command: %v", err)
	}
	return c, nil
}

// respond answers m with err.
func (n *Node) respond(m *nats.Msg, c *command, err error) {
	if c == nil {
		c = &command{}
	}
	data, _ := json.Marshal(answer{Error: n.errorDetail(c, err)})
	if err := m.Respond(data); err != nil {
		n.log.Warn("answer command", "op", c.Op, "err", err)
	}
}

// respondResult answers m with res, through a blob when it is too large
// for one message.
func (n *Node) respondResult(ctx context.Context, m *nats.Msg, c *command, res any) {
	var a answer
	if res != nil {
		raw, err := json.Marshal(res)
		if err != nil {
			n.respond(m, c, fmt.Errorf("encode the answer to %s: %w", c.Op, err))
			return
		}
		a.Result = raw
	}
	data, _ := json.Marshal(a)
	reply, err := n.message(ctx, m.Reply, data)
	if err != nil {
		n.respond(m, c, err)
		return
	}
	if err := m.RespondMsg(reply); err != nil {
		n.log.Warn("answer command", "op", c.Op, "err", err)
	}
}

// sweepBlobs deletes, now and then, the blobs nobody took (their taker
// died or gave up).
func (n *Node) sweepBlobs() {
	if time.Since(n.swept) < blobMaxAge/10 {
		return
	}
	n.swept = time.Now()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Tick)
	defer cancel()
	if err := n.cfg.Store.DeleteBlobsOlderThan(ctx, blobMaxAge); err != nil {
		n.log.Warn("sweep blobs", "err", err)
	}
}

// dispatch makes the call c on this node's domain.
func (n *Node) dispatch(ctx context.Context, c *command) (any, error) {
	d, ws, sid := n.cfg.Local, c.WorkspaceID, c.SessionID
	switch c.Op {
	case opOpen:
		return with(c, func(req proto.CreateWorkspaceRequest) (any, error) {
			w, _, err := d.Workspaces.Open(ctx, req)
			return w, err
		})
	case opViews:
		return n.views(ctx, c.IDs), nil
	case opGetWorkspace:
		return d.Workspaces.Get(ctx, ws)
	case opDeleteWorkspace:
		return nil, d.Workspaces.Delete(ctx, ws)
	case opForgetWorkspace:
		return nil, n.forgetHere(ctx, ws)
	case opCreateSession:
		return with(c, func(req proto.CreateSessionRequest) (any, error) { return d.Sessions.Create(ctx, ws, req) })
	case opListSessions:
		return d.Sessions.List(ctx, ws)
	case opLastSession:
		return d.Sessions.Last(ctx, ws)
	case opGetSession:
		return d.Sessions.Get(ctx, ws, sid)
	case opDeleteSession:
		return nil, d.Sessions.Delete(ctx, ws, sid)
	case opMessages:
		return d.Sessions.Messages(ctx, ws, sid)
	case opSessionEvents:
		return d.Sessions.Events(ctx, ws, sid, c.After, c.Limit)
	case opLog:
		return with(c, func(req proto.LogRequest) (any, error) { return d.Sessions.Log(ctx, ws, sid, req) })
	case opSetModel:
		return with(c, func(req proto.SetModelRequest) (any, error) { return d.Sessions.SetModel(ctx, ws, sid, req) })
	case opUpdateSession:
		return with(c, func(req proto.UpdateSessionRequest) (any, error) { return d.Sessions.Update(ctx, ws, sid, req) })
	case opPrompt:
		return with(c, func(req proto.PromptRequest) (any, error) { return d.Runs.Prompt(ctx, ws, req) })
	case opCompact:
		return d.Runs.Compact(ctx, ws, sid)
	case opCancel:
		return d.Runs.Cancel(ctx, ws, sid)
	case opStatus:
		return d.Runs.Status(ctx, ws, sid)
	case opResume:
		return with(c, func(req proto.ResumeRequest) (any, error) { return d.Runs.Resume(ctx, ws, sid, req) })
	case opPending:
		return d.Pending.Pending(ctx, ws, sid)
	case opPermissions:
		return d.Pending.Permissions(ctx, ws)
	case opAnswerPermission:
		return with(c, func(req proto.PermissionAnswer) (any, error) {
			return d.Pending.AnswerPermission(ctx, ws, c.RequestID, req)
		})
	case opAnswerToolCall:
		return with(c, func(req proto.ToolCallAnswer) (any, error) {
			return nil, d.Pending.AnswerToolCall(ctx, ws, c.RequestID, req)
		})
	case opMCPServers:
		return d.MCP.MCPServers(ctx, ws)
	case opAllMessages:
		return d.Sessions.AllMessages(ctx, ws, sid)
	case opFork:
		return with(c, func(req proto.ForkRequest) (any, error) { return d.Sessions.Fork(ctx, ws, sid, req) })
	case opExport:
		return d.Sessions.Export(ctx, ws, sid)
	case opImport:
		return with(c, func(doc proto.Export) (any, error) { return d.Sessions.Import(ctx, ws, doc) })
	case opCheckpoints:
		return d.Rewinds.Checkpoints(ctx, ws, sid)
	case opCheckpointDiff:
		return d.Rewinds.CheckpointDiff(ctx, ws, sid, c.CheckpointID)
	case opRewind:
		return with(c, func(req proto.RewindRequest) (any, error) { return d.Rewinds.Rewind(ctx, ws, sid, req) })
	}
	return nil, apierr.Invalid("unknown command %q", c.Op)
}

// with decodes c's request struct and calls f with it.
func with[Req any](c *command, f func(Req) (any, error)) (any, error) {
	var req Req
	if err := json.Unmarshal(c.Body, &req); err != nil {
		return nil, apierr.Invalid("malformed %s command: %v", c.Op, err)
	}
	return f(req)
}
