package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-dev/tandem/internal/config"
)

// Bounds on what a server may offer.
const (
	maxTools       = 256
	maxDescription = 4 << 10
	maxSchema      = 64 << 10
	// exitWait bounds how long a failed call waits to learn that a stdio
	// server exited, so that its error can say how.
	exitWait = 500 * time.Millisecond
	// finishWait bounds how long a call that saw its server break waits
	// for the server to be marked failed (a teardown waits up to
	// httpCloseGrace for an http server's answer).
	finishWait = 2 * time.Second
	// httpCloseGrace is how long an http server's connection gets to close
	// politely (cancellations sent, session deleted) before its requests are
	// cut.
	httpCloseGrace = time.Second
)

// server is one configured server across its connections: a failed server
// started again gets a new conn.
type server struct {
	m    *Manager
	name string
	spec config.MCPServer
	log  *slog.Logger
	// redact hides the secret parts of the server's URL from the errors
	// that quote it (see redactor).
	redact func(string) string

	mu       sync.Mutex
	state    string // "" until first started
	err      string
	failedAt time.Time
	tools    []Tool
	conn     *conn
	// settled is closed when the current start leaves StatusStarting.
	settled chan struct{}
}

func newServer(m *Manager, name string, spec config.MCPServer) *server {
	log := m.log.With("mcp_server", name)
	if m.opts.SessionID != "" {
		log = log.With("session_id", m.opts.SessionID)
	}
	return &server{m: m, name: name, spec: spec, log: log, redact: redactor(spec.URL)}
}

// redactor hides what of rawURL may be a secret (its query, a user name)
// from texts that quote it: a transport error names the URL it failed on,
// and a server's errors go to logs, to clients, into events kept on disk
// and to the model.
func redactor(rawURL string) func(string) string {
	u, err := url.Parse(rawURL)
	if rawURL == "" || err != nil || (u.RawQuery == "" && u.User == nil) {
		return func(s string) string { return s }
	}
	shown := *u
	shown.User = nil
	if shown.RawQuery != "" {
		shown.RawQuery = "..."
	}
	pairs := []string{rawURL, shown.String()}
	if u.User != nil {
		pairs = append(pairs, u.Redacted(), shown.String())
	}
	return strings.NewReplacer(pairs...).Replace
}

// statusLocked is the server's Status; s.mu is held.
func (s *server) statusLocked() Status {
	st := Status{Server: s.name, SessionID: s.m.opts.SessionID, Status: s.state, Tools: []string{}, Err: s.redact(s.err)}
	if st.Status == "" {
		st.Status = StatusStopped
	}
	if s.state == StatusConnected {
		for _, t := range s.tools {
			st.Tools = append(st.Tools, t.Name)
		}
	}
	return st
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *server) currentTools() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

func (s *server) settledChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != StatusStarting {
		return nil
	}
	return s.settled
}

func (s *server) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case StatusStarting, StatusConnected, StatusStopped:
		return
	case StatusFailed:
		if time.Since(s.failedAt) < s.m.opts.RetryAfter {
			return
		}
	}
	prev, settled := s.state, make(chan struct{})
	s.state, s.err, s.settled = StatusStarting, "", settled
	if !s.m.goTracked(func() { s.run(settled) }) {
		s.state = prev
		close(settled)
		return
	}
	// Pushed under s.mu, like every report of this server, so that the
	// reports keep the order of the changes.
	s.m.reports.push(s.statusLocked())
}

// run is a start and, once connected, the connection's life: tool list
// refreshes until the connection ends or the Manager closes.
func (s *server) run(settled chan struct{}) {
	c, tools, err := s.connect()
	if err != nil {
		s.finish(nil, settled, err)
		return
	}
	s.mu.Lock()
	s.state, s.conn, s.tools = StatusConnected, c, tools
	s.m.reports.push(s.statusLocked())
	close(settled)
	s.mu.Unlock()
	s.log.Info("mcp server connected", "tools", len(tools))

	for {
		select {
		case <-c.changed:
			ctx, cancel := context.WithTimeout(c.ctx, s.m.opts.HandshakeTimeout)
			tools, err := s.listTools(ctx, c)
			cancel()
			if err != nil {
				if !isWireError(err) && c.ctx.Err() == nil {
					c.end(c.describe("listing its tools failed: " + err.Error()))
				} else {
					s.log.Warn("mcp server tool list refresh failed", "err", s.redact(err.Error()))
				}
				continue
			}
			s.mu.Lock()
			if s.conn == c {
				s.tools = tools
				s.m.reports.push(s.statusLocked())
			}
			s.mu.Unlock()
		case <-c.ended:
			s.finish(c, nil, errors.New(c.reasonNow()))
			return
		case <-s.m.ctx.Done():
			s.finish(c, nil, nil)
			return
		}
	}
}

// finish ends a start (settled) or a connection (c): the tools leave at once,
// then the connection is torn down, then the state (failed with err, or
// stopped when the Manager is closing) is reported.
func (s *server) finish(c *conn, settled chan struct{}, err error) {
	s.mu.Lock()
	if c != nil && s.conn == c {
		s.conn, s.tools = nil, nil
	}
	s.mu.Unlock()
	if c != nil {
		c.teardown()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && s.m.ctx.Err() == nil {
		s.state, s.err, s.failedAt = StatusFailed, err.Error(), time.Now()
		s.log.Warn("mcp server failed", "err", s.redact(s.err))
	} else {
		s.state, s.err = StatusStopped, ""
	}
	s.m.reports.push(s.statusLocked())
	if settled != nil {
		close(settled)
	}
	if c != nil {
		close(c.finished)
	}
}

// broken returns what a call that saw c break answers, once the server
// has dealt with the end (or finishWait passed): the model's next step
// must not be offered the tools of a server it was just told failed.
func (s *server) broken(ctx context.Context, c *conn, res Result) Result {
	t := time.NewTimer(finishWait)
	defer t.Stop()
	select {
	case <-c.finished:
	case <-ctx.Done():
	case <-t.C:
	}
	return res
}

// connect starts the server and reads its tools; on failure nothing of it
// is left running.
func (s *server) connect() (*conn, []Tool, error) {
	if err := config.CheckServerName(s.name); err != nil {
		return nil, nil, err
	}
	if _, err := compileFilter(s.spec.Tools); err != nil {
		return nil, nil, err
	}
	c := newConn(s)
	var transport sdk.Transport
	var err error
	switch s.spec.Type {
	case config.TransportStdio:
		transport, err = c.startProcess()
	case config.TransportHTTP:
		transport, err = c.httpTransport()
	default:
		err = fmt.Errorf("unknown server type %q", s.spec.Type)
	}
	if err != nil {
		c.teardown()
		return nil, nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "tandem", Version: s.m.opts.ClientVersion}, &sdk.ClientOptions{
		Logger: s.log,
		// Tandem offers no roots, sampling or elicitation.
		Capabilities: &sdk.ClientCapabilities{},
		// The handler runs on the connection's read path: it must not call
		// the server back, so it only wakes the run loop.
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(c.ctx, s.m.opts.HandshakeTimeout)
	defer cancel()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		err = c.startError("handshake", ctx, err)
		c.teardown()
		return nil, nil, err
	}
	c.session = cs
	c.goTracked(func() {
		reason := "the connection closed"
		if err := cs.Wait(); err != nil {
			reason += ": " + err.Error()
		}
		c.end(c.describe(reason))
	})
	tools, err := s.listTools(ctx, c)
	if err != nil {
		err = c.startError("tool list", ctx, err)
		c.teardown()
		return nil, nil, err
	}
	return c, tools, nil
}

// listTools reads the server's tools, filtered, named and bounded.
func (s *server) listTools(ctx context.Context, c *conn) ([]Tool, error) {
	f, err := compileFilter(s.spec.Tools)
	if err != nil {
		return nil, err
	}
	var tools []Tool
	n := 0
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if n++; n > maxTools {
			s.log.Warn("mcp server offers too many tools; the rest are not offered", "max", maxTools)
			break
		}
		if !f.allows(t.Name) {
			continue
		}
		name := ToolName(s.name, t.Name)
		if !validToolName(name) {
			s.log.Warn("mcp tool not offered: its name is not one a model accepts (letters, digits, _ and -, at most 64)", "tool", t.Name, "name", name)
			continue
		}
		params, err := toolSchema(t.InputSchema)
		if err != nil {
			s.log.Warn("mcp tool not offered", "tool", t.Name, "err", err)
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		tools = append(tools, Tool{Name: name, Server: s.name, Remote: t.Name, Description: cut(desc, maxDescription), Parameters: params})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// toolSchema is a tool's input schema as the model is offered it: a JSON
// object schema of bounded size.
func toolSchema(schema any) (json.RawMessage, error) {
	if schema == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("its input schema cannot be encoded: %w", err)
	}
	if len(raw) > maxSchema {
		return nil, fmt.Errorf("its input schema is %d bytes, more than %d", len(raw), maxSchema)
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, errors.New("its input schema is not a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Errorf("its input schema's type is %v, not object", t)
	}
	return raw, nil
}

// call runs one tool call on the current connection; an error result says
// nothing of the URL's secrets.
func (s *server) call(ctx context.Context, remote string, args json.RawMessage) Result {
	res := s.callOnce(ctx, remote, args)
	if res.IsError {
		res.Content = s.redact(res.Content)
	}
	return res
}

func (s *server) callOnce(ctx context.Context, remote string, args json.RawMessage) Result {
	s.mu.Lock()
	c, state, why := s.conn, s.state, s.err
	if state == "" {
		state = "not started"
	}
	known := false
	for _, t := range s.tools {
		if t.Remote == remote {
			known = true
			break
		}
	}
	s.mu.Unlock()
	if c == nil {
		if why != "" {
			return errorResult("MCP server %s is not available (%s: %s); its tools cannot be called", s.name, state, why)
		}
		return errorResult("MCP server %s is not available (%s); its tools cannot be called", s.name, state)
	}
	if !known {
		return errorResult("unknown tool %q: MCP server %s offers no such tool", ToolName(s.name, remote), s.name)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return errorResult("invalid arguments: expected a JSON object")
	}

	callCtx, cancel := context.WithTimeout(ctx, s.m.opts.CallTimeout)
	defer cancel()
	// The connection ending (the server failed, the Manager closes) ends
	// the call too.
	defer context.AfterFunc(c.ctx, cancel)()
	type outcome struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	if !c.goTracked(func() {
		res, err := c.session.CallTool(callCtx, &sdk.CallToolParams{Name: remote, Arguments: args})
		done <- outcome{res, err}
	}) {
		return errorResult("MCP server %s stopped; the call did not run", s.name)
	}
	// The SDK returns as soon as callCtx is done; waiting on callCtx too
	// makes sure a stuck transport cannot hold the caller.
	var o outcome
	select {
	case o = <-done:
	case <-callCtx.Done():
		o.err = callCtx.Err()
	}
	switch {
	case o.err == nil && o.res != nil:
		return Result{Content: resultText(o.res, s.m.opts.MaxResult), IsError: o.res.IsError}
	case ctx.Err() != nil:
		return errorResult("the call was canceled")
	case c.ctx.Err() != nil:
		if r := c.reasonNow(); r != "" {
			return s.broken(ctx, c, errorResult("MCP server %s failed during the call: %s", s.name, r))
		}
		return s.broken(ctx, c, errorResult("MCP server %s stopped during the call", s.name))
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return errorResult("the call timed out after %s", s.m.opts.CallTimeout)
	case isWireError(o.err):
		// The server is alive and refused the call.
		return errorResult("MCP server %s: %v", s.name, o.err)
	case o.err == nil:
		return errorResult("MCP server %s sent no result", s.name)
	}
	// The transport broke: the server is gone or unreachable.
	reason := c.describe("the call failed: " + o.err.Error())
	c.end(reason)
	return s.broken(ctx, c, errorResult("MCP server %s failed during the call: %s", s.name, c.reasonNow()))
}

// isWireError reports whether err is the server's own JSON-RPC error answer
// (it is alive and refused the request), rather than the SDK's word that the
// transport failed or the connection is closing.
func isWireError(err error) bool {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return false
	}
	switch we.Code {
	case codeRejected, codeClientClosing, codeServerClosing:
		return false
	}
	return true
}

// Codes the SDK's JSON-RPC layer gives its own transport errors.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)
