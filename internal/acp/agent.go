// Package acp serves the Agent Client Protocol (ACP, protocol version 1:
// JSON-RPC 2.0, one message per line) as an agent, so that editors drive
// Tandem's agent (contract section 13). It is translation only: every call
// goes to Tandem through a bridge.Backend, so an editor's session is an
// ordinary session that every other client sees and acts on live.
//
// The JSON-RPC layer is this package's own (rpc.go) rather than
// github.com/coder/acp-go-sdk's: the contract wants a line that is not
// JSON answered with -32700 and the connection kept, which that SDK's
// reader logs and skips, and its connection starts goroutines nobody
// stops.
package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/proto"
)

// Config is what a Server needs.
type Config struct {
	// Connect makes the Backend of a connection, for its client id.
	Connect bridge.Connect
	// Version is the agent's version, as initialize reports it.
	Version string
	// Logger gets diagnostics; nothing of them reaches the protocol.
	Logger *slog.Logger
}

// Server serves ACP connections.
type Server struct {
	cfg Config
	log *slog.Logger
}

// NewServer returns a Server for cfg.
func NewServer(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log}
}

// Serve serves one connection, an editor that reads w and writes r, until
// r ends or ctx does; it returns once every goroutine it started is done.
// Nothing but protocol messages is written to w.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	clientID := uuid.NewString()
	be, err := s.cfg.Connect(clientID)
	if err != nil {
		return err
	}
	defer be.Close()
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{srv: s, be: be, clientID: clientID, ctx: ctx, sessions: map[string]*attached{}}
	c.peer = newPeer(w, c.methods(), func(err error) { s.log.Warn("acp", "err", err) })
	err = c.peer.serve(ctx, r)
	// The editor is gone: its sessions' streams and prompts end with it.
	cancel()
	c.mu.Lock()
	list := make([]*attached, 0, len(c.sessions))
	for _, a := range c.sessions {
		list = append(list, a)
	}
	c.mu.Unlock()
	for _, a := range list {
		a.stop()
	}
	return err
}

// conn is one editor's connection.
type conn struct {
	srv      *Server
	peer     *peer
	be       bridge.Backend
	clientID string
	ctx      context.Context

	meOnce sync.Once
	me     proto.Me
	meErr  error

	mu       sync.Mutex
	sessions map[string]*attached
}

func (c *conn) methods() map[string]handler {
	return map[string]handler{
		"initialize":       c.initialize,
		"authenticate":     func(context.Context, json.RawMessage) (any, error) { return struct{}{}, nil },
		"session/new":      c.newSession,
		"session/load":     c.loadSession,
		"session/list":     c.listSessions,
		"session/prompt":   c.prompt,
		"session/cancel":   c.cancel,
		"session/set_mode": c.setMode,
	}
}

// decode reads a method's params, strictly enough to name what is wrong.
func decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return invalidParams("params are missing")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return invalidParams("invalid params: %v", err)
	}
	return nil
}

// identity is the person the connection acts as.
func (c *conn) identity(ctx context.Context) (proto.Me, error) {
	c.meOnce.Do(func() { c.me, c.meErr = c.be.Me(ctx) })
	return c.me, c.meErr
}

func (c *conn) initialize(_ context.Context, _ json.RawMessage) (any, error) {
	return initializeResult{
		ProtocolVersion: protocolVersion,
		AgentCapabilities: agentCapabilities{
			LoadSession:         true,
			PromptCapabilities:  promptCapabilities{Image: true, EmbeddedContext: true},
			MCPCapabilities:     mcpCapabilities{HTTP: true},
			SessionCapabilities: sessionCapabilities{List: &struct{}{}},
		},
		AgentInfo:   implementation{Name: "tandem", Version: c.srv.cfg.Version},
		AuthMethods: []any{},
	}, nil
}

// mcpConfig turns ACP's MCP servers into a session's mcp_servers, which
// only an owner may give.
func (c *conn) mcpConfig(ctx context.Context, list []mcpServer) (json.RawMessage, error) {
	if len(list) == 0 {
		return nil, nil
	}
	me, err := c.identity(ctx)
	if err != nil {
		return nil, err
	}
	if me.Role != "owner" {
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("mcpServers: giving a session MCP servers is an owner's right; %s's role is %s", me.Name, me.Role),
			Data: proto.ErrorDetail{Code: proto.CodeForbidden, Message: "role " + me.Role + " may not give sessions MCP servers"}}
	}
	out := map[string]any{}
	for _, s := range list {
		if s.Name == "" {
			return nil, invalidParams("mcpServers: a server needs a name")
		}
		if _, dup := out[s.Name]; dup {
			return nil, invalidParams("mcpServers: two servers are named %q", s.Name)
		}
		switch s.Type {
		case "", "stdio":
			env := map[string]string{}
			for _, e := range s.Env {
				env[e.Name] = e.Value
			}
			out[s.Name] = map[string]any{"type": "stdio", "command": s.Command, "args": s.Args, "env": env}
		case "http":
			headers := map[string]string{}
			for _, h := range s.Headers {
				headers[h.Name] = h.Value
			}
			out[s.Name] = map[string]any{"type": "http", "url": s.URL, "headers": headers}
		default:
			return nil, invalidParams("mcpServers: %q: MCP transport %q is not supported (stdio and http are)", s.Name, s.Type)
		}
	}
	return json.Marshal(out)
}

// modes is the mode state of a session for this connection's person.
func (c *conn) modes(ctx context.Context, current string) (*modeState, error) {
	me, err := c.identity(ctx)
	if err != nil {
		return nil, err
	}
	if current == "" {
		current = proto.PermissionModeAsk
	}
	m := &modeState{CurrentModeID: current, AvailableModes: []sessionMode{
		{ID: proto.PermissionModeAsk, Name: "Ask", Description: "Ask before a tool that changes something runs"},
		{ID: proto.PermissionModeDenyAll, Name: "Deny all", Description: "Refuse every tool that would need a permission"},
	}}
	if me.Role == "owner" {
		m.AvailableModes = append(m.AvailableModes, sessionMode{ID: proto.PermissionModeAllowAll, Name: "Allow all", Description: "Run every tool without asking"})
	}
	return m, nil
}

func (c *conn) newSession(ctx context.Context, params json.RawMessage) (any, error) {
	var p newSessionParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("cwd must be an absolute path, got %q", p.Cwd)
	}
	mcp, err := c.mcpConfig(ctx, p.MCPServers)
	if err != nil {
		return nil, err
	}
	ws, err := c.be.OpenWorkspace(ctx, filepath.Clean(p.Cwd))
	if err != nil {
		return nil, err
	}
	s, err := c.be.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{ClientID: c.clientID, MCPServers: mcp})
	if err != nil {
		return nil, err
	}
	return c.attach(ctx, ws, s, false)
}

func (c *conn) loadSession(ctx context.Context, params json.RawMessage) (any, error) {
	var p loadSessionParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return nil, invalidParams("cwd must be an absolute path, got %q", p.Cwd)
	}
	mcp, err := c.mcpConfig(ctx, p.MCPServers)
	if err != nil {
		return nil, err
	}
	ws, s, err := c.locate(ctx, p.SessionID, p.Cwd)
	if err != nil {
		return nil, err
	}
	if mcp != nil {
		if _, err := c.be.Resume(ctx, ws.ID, s.ID, proto.ResumeRequest{ClientID: c.clientID, MCPServers: mcp}); err != nil {
			return nil, err
		}
	}
	return c.attach(ctx, ws, s, true)
}

// locate finds a session by id: in the workspace of cwd first, else in
// any workspace.
func (c *conn) locate(ctx context.Context, sessionID, cwd string) (proto.Workspace, proto.Session, error) {
	if uuid.Validate(sessionID) != nil {
		return proto.Workspace{}, proto.Session{}, &rpcError{Code: codeNotFound, Message: fmt.Sprintf("no session %q", sessionID)}
	}
	list, err := c.be.Workspaces(ctx)
	if err != nil {
		return proto.Workspace{}, proto.Session{}, err
	}
	clean := filepath.Clean(cwd)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Path == clean && list[j].Path != clean })
	for _, ws := range list {
		s, err := c.be.Session(ctx, ws.ID, sessionID)
		if err == nil {
			return ws, s, nil
		}
		if !errors.Is(err, bridge.ErrNotFound) {
			return proto.Workspace{}, proto.Session{}, err
		}
	}
	return proto.Workspace{}, proto.Session{}, &rpcError{Code: codeNotFound, Message: fmt.Sprintf("no session %s", sessionID)}
}

func (c *conn) listSessions(ctx context.Context, params json.RawMessage) (any, error) {
	var p listSessionsParams
	if len(params) > 0 {
		if err := decode(params, &p); err != nil {
			return nil, err
		}
	}
	list, err := c.be.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	type entry struct {
		info sessionInfo
		at   proto.Time
	}
	var all []entry
	for _, ws := range list {
		if p.Cwd != nil && filepath.Clean(*p.Cwd) != ws.Path {
			continue
		}
		sessions, err := c.be.Sessions(ctx, ws.ID)
		if errors.Is(err, bridge.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, s := range sessions {
			all = append(all, entry{sessionInfo{SessionID: s.ID, Cwd: ws.Path, Title: s.Title, UpdatedAt: s.UpdatedAt.Format(timeFormat)}, s.UpdatedAt})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.After(all[j].at.Time) })
	out := listSessionsResult{Sessions: make([]sessionInfo, 0, len(all))}
	for _, e := range all {
		out.Sessions = append(out.Sessions, e.info)
	}
	return out, nil
}

// timeFormat is the contract's: RFC 3339 in UTC with fractional seconds.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// session returns an attached session of the connection.
func (c *conn) session(id string) (*attached, error) {
	c.mu.Lock()
	a := c.sessions[id]
	c.mu.Unlock()
	if a == nil {
		return nil, &rpcError{Code: codeNotFound, Message: fmt.Sprintf("session %q is not loaded on this connection (session/new or session/load first)", id)}
	}
	return a, nil
}

func (c *conn) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a, err := c.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	req, err := a.promptRequest(p.Prompt)
	if err != nil {
		return nil, err
	}
	req.ClientID = c.clientID
	acc, err := c.be.Prompt(ctx, a.wsID, req)
	if err != nil {
		return nil, err
	}
	done := a.waitRun(acc.RunID)
	defer a.forgetRun(acc.RunID)
	select {
	case r := <-done:
		switch r.Outcome {
		case proto.OutcomeEndTurn:
			if r.finish == proto.FinishMaxTokens {
				return promptResult{StopReason: "max_tokens"}, nil
			}
			return promptResult{StopReason: "end_turn"}, nil
		case proto.OutcomeCanceled, proto.OutcomeInterrupted:
			return promptResult{StopReason: "cancelled"}, nil
		default:
			detail := proto.ErrorDetail{Code: proto.CodeInternal, Message: "the run failed"}
			if r.Error != nil {
				detail = *r.Error
			}
			return nil, &rpcError{Code: codeInternalError, Message: detail.Message, Data: detail}
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-a.ended:
		return nil, &rpcError{Code: codeInternalError, Message: "the session's event stream ended before the run did"}
	}
}

func (c *conn) cancel(ctx context.Context, params json.RawMessage) (any, error) {
	var p sessionIDParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a, err := c.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	return nil, c.be.Cancel(ctx, a.wsID, a.id)
}

func (c *conn) setMode(ctx context.Context, params json.RawMessage) (any, error) {
	var p setModeParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	a, err := c.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	switch p.ModeID {
	case proto.PermissionModeAsk, proto.PermissionModeDenyAll, proto.PermissionModeAllowAll:
	default:
		return nil, invalidParams("no mode %q (ask, deny_all, allow_all)", p.ModeID)
	}
	mode := p.ModeID
	if _, err := c.be.UpdateSession(ctx, a.wsID, a.id, proto.UpdateSessionRequest{PermissionMode: &mode}); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// asRPCError gives an error the JSON-RPC form the editor gets: the
// contract's refusals keep their code and message in data.
func asRPCError(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	var be *bridge.Error
	if errors.As(err, &be) {
		detail := proto.ErrorDetail{Code: be.Code, Message: be.Message}
		switch {
		case errors.Is(err, bridge.ErrNotFound):
			return &rpcError{Code: codeNotFound, Message: be.Message, Data: detail}
		case be.Code == proto.CodeInvalidArgument || be.Code == proto.CodeInvalidJSON || be.Code == proto.CodeForbidden:
			return &rpcError{Code: codeInvalidParams, Message: be.Message, Data: detail}
		}
		return &rpcError{Code: codeInternalError, Message: be.Message, Data: detail}
	}
	if errors.Is(err, context.Canceled) {
		return &rpcError{Code: codeInternalError, Message: "canceled"}
	}
	return &rpcError{Code: codeInternalError, Message: err.Error()}
}
