// Package mcp runs the MCP servers of one workspace (or of one session) and
// offers their tools to the agent (contract section 7). It is a client built
// on the official SDK, github.com/modelcontextprotocol/go-sdk: stdio servers
// are child processes in their own process group, http servers are reached
// over MCP's streamable HTTP transport.
//
// A Manager owns its servers: it starts them on Start, discovers their tools
// at start and again when a server says its list changed, names each tool
// mcp__NAME__TOOL (filtered by the server's tools patterns), calls them, and
// stops every process group and goroutine on Close. Each change of a server's
// state is told to the Reporter given at construction, in order, from one
// goroutine: starting, connected (with its tools), failed (with why: command
// not found, no answer to the handshake, exited during a call...) and stopped.
//
// A failed server's tools leave at once and a call to one is an error result;
// nothing a server does (dying, hanging, flooding) can hang a caller whose
// context is done, nor outlive Close.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/goroutine"
	"github.com/tandem-dev/tandem/internal/rules"
)

// Server states, as mcp.server_status names them.
const (
	StatusStarting  = "starting"
	StatusConnected = "connected"
	StatusFailed    = "failed"
	StatusStopped   = "stopped"
)

// Status is a server's state after a change. It encodes as the data of the
// contract's mcp.server_status event.
type Status struct {
	// Server is the server's configured name.
	Server string `json:"name"`
	// SessionID is Options.SessionID: set for a session's own servers.
	SessionID string `json:"session_id,omitempty"`
	// Status is StatusStarting, StatusConnected, StatusFailed or StatusStopped.
	Status string `json:"status"`
	// Tools are the names offered to the model (mcp__NAME__TOOL), sorted;
	// empty (never nil) unless connected.
	Tools []string `json:"tools"`
	// Err says why the server failed.
	Err string `json:"error,omitempty"`
}

// Reporter hears of every status change. Calls come from one goroutine, in
// order; MCPStatus may call the Manager's methods but Close.
type Reporter interface {
	MCPStatus(Status)
}

// Tool is an MCP tool as the model is offered it.
type Tool struct {
	// Name is mcp__SERVER__TOOL.
	Name string
	// Server is the server's configured name; Remote the tool's own name.
	Server, Remote string
	Description    string
	// Parameters is the tool's input JSON Schema (an object schema).
	Parameters json.RawMessage
}

// Result is what a call gives the model: the tool's text content.
type Result struct {
	Content string
	IsError bool
}

// Defaults of Options.
const (
	// DefaultHandshakeTimeout bounds a server's start up to the end of its
	// first tool list. Servers started through a package runner (npx, uvx)
	// may download themselves on first use, hence the margin.
	DefaultHandshakeTimeout = 30 * time.Second
	// DefaultCallTimeout bounds one call, like bash's maximum timeout.
	DefaultCallTimeout = 10 * time.Minute
	// DefaultRetryAfter is how long a failed server waits before Start tries
	// it again, so that a server that cannot start is not restarted on every
	// prompt.
	DefaultRetryAfter = 30 * time.Second
	// DefaultMaxResult bounds the text a call keeps; the rest is cut with a
	// note. The agent cuts again to what the model is sent.
	DefaultMaxResult = 1 << 20
)

// Confine starts name with args in dir, with env and stdin, stdout and
// stderr, confined under mode (contract section 12), as the leader of a
// process group of its own, or says why it cannot.
type Confine func(mode string, env []string, dir string, stdin, stdout, stderr *os.File, name string, args ...string) (*exec.Cmd, error)

// Options configure a Manager. Only Dir is required.
type Options struct {
	// Dir is the working directory of stdio servers (the workspace root) and
	// what a relative command (one with a slash) is relative to.
	Dir string
	// SessionID is copied into every Status.
	SessionID string
	// Environ is the environment stdio servers start from, before their own
	// env; nil means os.Environ().
	Environ []string
	// LookupEnv resolves ${NAME} in args, env and header values; nil means
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger receives stdio servers' stderr (one record per line) and the
	// SDK's own log; nil discards them.
	Logger *slog.Logger
	// Reporter hears of status changes; nil ignores them.
	Reporter Reporter
	// HTTPTransport is the base of http servers' transport; nil means a
	// clone of http.DefaultTransport. The Manager closes its idle
	// connections on Close.
	HTTPTransport *http.Transport
	// ClientVersion is told to servers in the handshake.
	ClientVersion string
	// Confine starts a stdio server whose entry asks for a sandbox mode;
	// nil starts none of them (they fail, saying why).
	Confine Confine

	HandshakeTimeout time.Duration // default DefaultHandshakeTimeout
	CallTimeout      time.Duration // default DefaultCallTimeout
	RetryAfter       time.Duration // default DefaultRetryAfter
	MaxResult        int           // default DefaultMaxResult
}

// Manager runs a set of MCP servers. Its methods are safe for concurrent use.
type Manager struct {
	opts      Options
	log       *slog.Logger
	servers   map[string]*server
	names     []string
	reports   *reportQueue
	transport *http.Transport

	// ctx is canceled by Close: it stops starts and ends connections.
	ctx    context.Context
	cancel context.CancelFunc

	// goroutines runs every goroutine the Manager starts, calls included.
	goroutines goroutine.Group
	closeOnce  sync.Once
}

// New returns a Manager for servers (checked by package config; a name
// config.CheckServerName refuses is reported failed at Start). It starts
// nothing until Start.
func New(servers map[string]config.MCPServer, opts Options) *Manager {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.MaxResult <= 0 {
		opts.MaxResult = DefaultMaxResult
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := opts.HTTPTransport
	if tr == nil {
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			tr = dt.Clone()
		} else {
			tr = &http.Transport{}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		opts:      opts,
		log:       log,
		servers:   make(map[string]*server, len(servers)),
		reports:   newReportQueue(opts.Reporter),
		transport: tr,
		ctx:       ctx,
		cancel:    cancel,
	}
	for name, spec := range servers {
		m.servers[name] = newServer(m, name, spec)
		m.names = append(m.names, name)
	}
	sort.Strings(m.names)
	return m
}

// Start starts every server that is not running: never started, or failed
// at least RetryAfter ago. It returns at once; Wait waits for the starts.
// After Close it does nothing.
func (m *Manager) Start() {
	for _, name := range m.names {
		m.servers[name].start()
	}
}

// Wait waits until no server is starting and the Reporter has heard how
// each start ended, or ctx is done (its error). A run that waits before its
// first model request offers the tools of every server that could start,
// after the clients were told of them.
func (m *Manager) Wait(ctx context.Context) error {
	for _, name := range m.names {
		if ch := m.servers[name].settledChan(); ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return m.reports.flush(ctx)
}

// Tools returns the tools of every connected server, sorted by name.
func (m *Manager) Tools() []Tool {
	var out []Tool
	for _, name := range m.names {
		out = append(out, m.servers[name].currentTools()...)
	}
	return out
}

// Statuses returns every server's current state, sorted by name. A server
// never started is stopped.
func (m *Manager) Statuses() []Status {
	out := make([]Status, 0, len(m.names))
	for _, name := range m.names {
		out = append(out, m.servers[name].status())
	}
	return out
}

// Owns reports whether name is a tool name of one of this Manager's servers
// (connected or not), so that a caller can route a call without a race
// against the server's tool list.
func (m *Manager) Owns(name string) bool {
	srv, _, ok := SplitName(name)
	return ok && m.servers[srv] != nil
}

// Call calls the tool named name (mcp__SERVER__TOOL) with args, a JSON
// object. It returns when the tool answers, the server fails, or ctx is
// done, whichever is first; it never hangs past ctx.
func (m *Manager) Call(ctx context.Context, name string, args json.RawMessage) Result {
	srv, remote, ok := SplitName(name)
	s := m.servers[srv]
	if !ok || s == nil {
		return errorResult("unknown tool %q: call only the tools offered to you", name)
	}
	return s.call(ctx, remote, args)
}

// Close stops every server (a stdio server's whole process group) and waits
// for every goroutine of the Manager, reporting connected servers stopped.
// Calls in flight end with an error result. Close is idempotent.
func (m *Manager) Close() error {
	m.goroutines.Stop()
	m.cancel()
	m.goroutines.Wait()
	m.closeOnce.Do(func() {
		m.reports.close()
		m.transport.CloseIdleConnections()
	})
	return nil
}

// goTracked runs f on a goroutine Close waits for, unless the Manager is
// closed (then it reports false and runs nothing).
func (m *Manager) goTracked(f func()) bool { return m.goroutines.Go(f) }

// ToolPrefix starts every MCP tool name.
const ToolPrefix = "mcp__"

// ToolName is the name a server's tool is offered under.
func ToolName(server, tool string) string {
	return ToolPrefix + server + "__" + tool
}

// SplitName splits mcp__SERVER__TOOL. Server names hold no "__" (package
// config refuses them), so the first "__" after the prefix ends the name.
func SplitName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, ToolPrefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// maxToolName is what model APIs accept as a function name.
const maxToolName = 64

// validToolName reports whether a model API accepts name.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// filter is a server's tools patterns; nil offers every tool.
type filter []rules.Pattern

func compileFilter(patterns []string) (filter, error) {
	if patterns == nil {
		return nil, nil
	}
	f := make(filter, 0, len(patterns))
	for _, p := range patterns {
		c, err := rules.CompilePattern(p)
		if err != nil {
			return nil, fmt.Errorf("tools pattern %q: %w", p, err)
		}
		f = append(f, c)
	}
	return f, nil
}

func (f filter) allows(name string) bool {
	return f == nil || slices.ContainsFunc(f, func(p rules.Pattern) bool { return p.Match(name) })
}

func errorResult(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}
