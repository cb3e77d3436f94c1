package session

import (
	"context"
	"slices"
	"strings"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// SandboxPatch is the change a request's sandbox fields make.
func SandboxPatch(o proto.SandboxOptions) sandbox.Patch {
	return sandbox.Patch{Mode: o.Sandbox, Network: o.SandboxNetwork, Read: o.SandboxRead, Write: o.SandboxWrite}
}

// SandboxOf is what a session's commands run under: its own values over
// base, the configuration's.
func (st Settings) SandboxOf(base sandbox.Settings) sandbox.Settings {
	if st.Sandbox == nil {
		return base.Normal()
	}
	return st.Sandbox.Apply(base).Normal()
}

// SandboxWidening names the keys of o that would widen old, the sandbox a
// session runs under (or, for a new session, the configuration's): what
// only an owner may ask (contract section 9). None when o only narrows
// or keeps it.
func SandboxWidening(old sandbox.Settings, o proto.SandboxOptions) []string {
	return SandboxPatch(o).Apply(old).WideningKeys(old)
}

// checkWidening refuses a widening asked by a caller who is not an owner.
func checkWidening(ctx context.Context, keys []string) error {
	if len(keys) == 0 || ownerCalls(ctx) {
		return nil
	}
	c, _ := domain.CallerFrom(ctx)
	return apierr.Errorf(proto.CodeForbidden, "role %s may not widen what the agent's commands may touch (%s would widen the session's sandbox); it needs the owner role", c.Role, strings.Join(keys, ", "))
}

// validSandbox checks a request's sandbox fields.
func validSandbox(o proto.SandboxOptions) error {
	if err := SandboxPatch(o).Validate(); err != nil {
		return apierr.Invalid("%v", err)
	}
	return nil
}

// sandboxBase is the sandbox of the workspace's configuration; the
// server's when the workspace's file is invalid (which a prompt reports).
func (s *Service) sandboxBase(ws *workspace.Workspace) sandbox.Settings {
	if s.cfg.Configs == nil {
		return sandbox.Settings{}.Normal()
	}
	cfg, err := s.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		cfg = s.cfg.Configs.Server()
	}
	return sandboxOfConfig(cfg)
}

func sandboxOfConfig(cfg *config.Config) sandbox.Settings {
	if cfg == nil {
		return sandbox.Settings{}.Normal()
	}
	return cfg.Sandbox.Normal()
}

// sandboxView is s as a Session shows it.
func sandboxView(s sandbox.Settings) proto.SandboxSettings {
	s = s.Normal()
	return proto.SandboxSettings{Sandbox: s.Mode, SandboxNetwork: s.Network, SandboxRead: s.Read, SandboxWrite: s.Write}
}

// sandboxOptions is s as a request or an export gives it, every field set.
func sandboxOptions(s sandbox.Settings) proto.SandboxOptions {
	s = s.Normal()
	mode, network, read, write := s.Mode, s.Network, slices.Clone(s.Read), slices.Clone(s.Write)
	return proto.SandboxOptions{Sandbox: &mode, SandboxNetwork: &network, SandboxRead: &read, SandboxWrite: &write}
}

// storedPatch is the patch a session keeps: nil when it sets nothing.
func storedPatch(p sandbox.Patch) *sandbox.Patch {
	if p.Empty() {
		return nil
	}
	return &p
}
