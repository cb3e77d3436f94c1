package coordinator

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/workspace"
)

// sandboxSpec is what the commands of a session's run may touch: its
// settings over the configuration's, in the workspace, with a $TMPDIR of
// the session's own and the workspace's build cache.
func (c *Coordinator) sandboxSpec(ws *workspace.Workspace, sessionID string, settings session.Settings, cfg *config.Config) sandbox.Spec {
	var base sandbox.Settings
	if cfg != nil {
		base = cfg.Sandbox
	}
	spec := sandbox.Spec{Settings: settings.SandboxOf(base), Root: ws.Path}
	if c.cfg.SandboxDir != "" {
		spec.Tmp = filepath.Join(c.cfg.SandboxDir, "tmp", sessionID)
		spec.Cache = filepath.Join(c.cfg.SandboxDir, "cache", ws.ID)
	}
	return spec
}

// removeSessionTmp removes a deleted session's $TMPDIR.
func (c *Coordinator) removeSessionTmp(sessionID string) {
	if c.cfg.SandboxDir == "" || sessionID == "" {
		return
	}
	dir := filepath.Join(c.cfg.SandboxDir, "tmp", filepath.Base(sessionID))
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("remove a deleted session's temporary directory", "session_id", sessionID, "err", err)
	}
}

// DropWorkspace removes what the data dir keeps of a forgotten
// workspace: its checkpoint store and its build cache (its sessions'
// $TMPDIRs went with their fences). A failure is logged: nothing reads
// them any more.
func (c *Coordinator) DropWorkspace(wsID string) {
	if c.cfg.Checkpoints != nil {
		if err := c.cfg.Checkpoints.Drop(wsID); err != nil {
			c.log.Warn("remove a forgotten workspace's checkpoints", "workspace_id", wsID, "err", err)
		}
	}
	if c.cfg.SandboxDir == "" || wsID == "" {
		return
	}
	dir := filepath.Join(c.cfg.SandboxDir, "cache", filepath.Base(wsID))
	if err := os.RemoveAll(dir); err != nil {
		c.log.Warn("remove a forgotten workspace's build cache", "workspace_id", wsID, "err", err)
	}
}

// confineMCP starts the stdio MCP servers of a workspace (sessionID "") or
// of a session whose entries ask for a sandbox: under the mode they ask,
// with the configuration's paths and network, in the workspace, with a
// $TMPDIR of their scope's own.
func (c *Coordinator) confineMCP(ws *workspace.Workspace, sessionID string) mcp.Confine {
	return func(mode string, env []string, dir string, stdin, stdout, stderr *os.File, name string, args ...string) (*exec.Cmd, error) {
		cfg, err := c.cfg.Configs.Workspace(ws.Path)
		if err != nil {
			return nil, err
		}
		spec := c.sandboxSpec(ws, "mcp-"+ws.ID, session.Settings{}, cfg)
		if sessionID != "" {
			spec.Tmp = filepath.Join(filepath.Dir(spec.Tmp), sessionID)
		}
		spec.Mode = mode
		if err := sandbox.MakeDirs(spec); err != nil {
			return nil, err
		}
		return c.cfg.Sandbox.Start(spec, sandbox.Env(env, spec, cfg.KeyVariables()), dir, sandbox.Stdio{stdin, stdout, stderr}, name, args...)
	}
}
