package coordinator

import (
	"os"
	"path/filepath"

	"github.com/tandem-dev/tandem/internal/config"
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
