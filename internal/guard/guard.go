// Package guard holds every call of the domain to its caller's role
// (contract section 9). It wraps domain.Services, so whatever reaches the
// domain (an HTTP request, a Copilot or ACP connection, a cluster node's
// command for a workspace this node owns) is judged here on the typed
// request the domain will act on: the value the check reads is the value
// the call applies, and no transport can forget the check, read its body
// differently from the handler, or skip what widens the agent's powers.
//
// The wrappers implement each method of the domain's interfaces by hand and
// embed nothing, so a method added to an interface fails to compile here
// until it names the action it takes.
package guard

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/proto"
)

// Config is what the guard judges by besides roles.
type Config struct {
	// DataDir is the server's data dir: nobody opens it, a directory in it
	// or one that holds it as a workspace.
	DataDir string
	// Roots returns the directories members may open workspaces in (the
	// server configuration's workspace_roots); nil: none.
	Roots func() []string
	// SandboxBase returns the sandbox a new session of the workspace gets
	// (its configuration's), which a create's sandbox fields are judged
	// against; nil: the defaults.
	SandboxBase func(ctx context.Context, workspaceID string) sandbox.Settings
}

// Wrap returns d with every call checked against its caller's role.
func Wrap(d domain.Services, cfg Config) domain.Services {
	g := &guard{cfg: cfg, sessions: d.Sessions}
	if cfg.DataDir != "" {
		if dir, err := filepath.EvalSymlinks(cfg.DataDir); err == nil {
			g.dataDir = dir
		} else {
			g.dataDir = filepath.Clean(cfg.DataDir)
		}
	}
	return domain.Services{
		Workspaces: workspaces{g, d.Workspaces},
		Sessions:   sessions{g, d.Sessions},
		Runs:       runs{g, d.Runs},
		Pending:    pending{d.Pending},
		MCP:        mcp{d.MCP},
		Streams:    streams{d.Streams},
		Rewinds:    rewinds{d.Rewinds},
	}
}

type guard struct {
	cfg      Config
	dataDir  string
	sessions domain.Sessions
}

// check refuses a call whose caller may not take every action of acts. A
// call with no authenticated caller is refused too: every transport
// authenticates before it calls the domain.
func check(ctx context.Context, acts ...auth.Action) error {
	for _, a := range acts {
		if err := auth.CheckContext(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// role is the caller's role (a viewer's when there is none: check has
// refused such a call already).
func role(ctx context.Context) auth.Role {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Viewer
	}
	return id.Role
}

// allowAll reports whether the session runs its tools without asking; a
// session that cannot be read counts as one, so that an error cannot
// lift the check (the call itself then answers the error).
func (g *guard) allowAll(ctx context.Context, wid, sid string) bool {
	s, err := g.sessions.Get(ctx, wid, sid)
	return err != nil || s.PermissionMode == proto.PermissionModeAllowAll
}

// hasServers reports whether raw names any MCP server; what does not
// decode as an object counts as naming some, the decoder refusing it.
func hasServers(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return string(raw) != "null"
	}
	return len(m) > 0
}

// CreateWidening names what a session's create request asks beyond
// creating it: the actions only an owner may take.
func CreateWidening(req proto.CreateSessionRequest) []auth.Action {
	var out []auth.Action
	if req.PermissionMode == proto.PermissionModeAllowAll {
		out = append(out, auth.AllowAll)
	}
	if hasServers(req.MCPServers) {
		out = append(out, auth.MCPServers)
	}
	return out
}

// UpdateWidening names what a session update asks beyond updating it,
// given whether the session runs without asking (allowAll reports it;
// it is asked only when the answer matters). An empty list of available
// or excluded tools is a change too: it lifts a restriction.
func UpdateWidening(req proto.UpdateSessionRequest, allowAll func() bool) []auth.Action {
	var out []auth.Action
	if req.PermissionMode != nil && *req.PermissionMode == proto.PermissionModeAllowAll {
		out = append(out, auth.AllowAll)
	}
	if (req.AvailableTools != nil || req.ExcludedTools != nil) && allowAll() {
		out = append(out, auth.AllowAllTools)
	}
	return out
}

// SandboxWidening names the action of sandbox fields that widen old, the
// sandbox a session runs under (a new one: its configuration's): a wider
// mode, the network, a path to read or write that old does not cover
// (sandbox.Settings.Widens).
func SandboxWidening(old sandbox.Settings, o proto.SandboxOptions) []auth.Action {
	p := sandbox.Patch{Mode: o.Sandbox, Network: o.SandboxNetwork, Read: o.SandboxRead, Write: o.SandboxWrite}
	if p.Empty() || !p.Apply(old).Widens(old) {
		return nil
	}
	return []auth.Action{auth.SandboxWiden}
}

// sandboxOf is the sandbox a session shows it runs under; a session that
// cannot be read has the narrowest, so that an error cannot lift the
// check (the call itself then answers the error).
func (g *guard) sandboxOf(ctx context.Context, wid, sid string) sandbox.Settings {
	s, err := g.sessions.Get(ctx, wid, sid)
	if err != nil {
		return sandbox.Settings{Mode: sandbox.ModeReadOnly}
	}
	return sandbox.Settings{Mode: s.Sandbox, Network: s.SandboxNetwork, Read: s.SandboxRead, Write: s.SandboxWrite}
}

// sandboxBase is the sandbox a new session of the workspace gets.
func (g *guard) sandboxBase(ctx context.Context, wid string) sandbox.Settings {
	if g.cfg.SandboxBase == nil {
		return sandbox.Settings{}
	}
	return g.cfg.SandboxBase(ctx, wid)
}

// ResumeWidening names what a resume asks beyond resuming.
func ResumeWidening(req proto.ResumeRequest, allowAll func() bool) []auth.Action {
	var out []auth.Action
	if hasServers(req.MCPServers) {
		out = append(out, auth.MCPServers)
	}
	if len(req.Tools) > 0 && allowAll() {
		out = append(out, auth.AllowAllTools)
	}
	return out
}

// openPath checks where a workspace may be opened: never at, in or around
// the data dir (for anyone: 400), and for members only inside a root or
// where a workspace already is (403). It returns the path resolved, which
// is what is opened, so that a symlink swapped after the check opens
// nothing else.
func (g *guard) openPath(ctx context.Context, ws domain.Workspaces, path string) (string, error) {
	if path == "" || !filepath.IsAbs(path) {
		return path, nil // the workspace manager names what is wrong
	}
	resolved, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil {
		return path, nil
	}
	if g.dataDir != "" && (within(resolved, g.dataDir) || within(g.dataDir, resolved)) {
		return "", apierr.Invalid("path %q may not be opened as a workspace: it is, holds or lies inside the server's data dir %s", path, g.dataDir)
	}
	if role(ctx) >= auth.Owner {
		return resolved, nil
	}
	var roots []string
	if g.cfg.Roots != nil {
		roots = g.cfg.Roots()
	}
	for _, root := range roots {
		if r, err := filepath.EvalSymlinks(root); err == nil && within(resolved, r) {
			return resolved, nil
		}
	}
	list, err := ws.List(ctx)
	if err != nil {
		return "", err
	}
	for _, w := range list {
		if w.Path == resolved {
			return resolved, nil
		}
	}
	if len(roots) == 0 {
		return "", apierr.Errorf(proto.CodeForbidden, "role %s may not open %s: this server gives members no workspace roots, so members work in the workspaces an owner opened", role(ctx), path)
	}
	return "", apierr.Errorf(proto.CodeForbidden, "role %s may not open %s: members open workspaces only inside %s", role(ctx), path, strings.Join(roots, ", "))
}

// within reports whether path is dir or inside it (both clean and absolute).
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
