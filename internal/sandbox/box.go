package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
)

// Box is the sandbox of one run's commands: a Launcher, the Spec they run
// under, which a change of the session's settings replaces (Set) between
// two commands, and the configuration's key variables, which they never
// see.
type Box struct {
	l      *Launcher
	keyEnv []string

	mu   sync.Mutex
	spec Spec
}

// Box returns a Box running commands under spec, without the variables
// keyEnv names (api_key_env) in their environment.
func (l *Launcher) Box(spec Spec, keyEnv []string) *Box {
	spec.Settings = spec.Settings.Normal()
	return &Box{l: l, keyEnv: keyEnv, spec: spec}
}

// Set replaces the spec of the commands started from now on.
func (b *Box) Set(spec Spec) {
	spec.Settings = spec.Settings.Normal()
	b.mu.Lock()
	b.spec = spec
	b.mu.Unlock()
}

// Spec is the spec commands run under now.
func (b *Box) Spec() Spec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spec
}

// Start starts name with args in dir confined by the current spec (see
// Launcher.Start), with extraEnv added to its environment, stdin from the
// null device and stdout and stderr to out; its $TMPDIR and cache are
// made first.
func (b *Box) Start(dir string, extraEnv []string, out *os.File, name string, args ...string) (*exec.Cmd, error) {
	spec := b.Spec()
	if err := MakeDirs(spec); err != nil {
		return nil, err
	}
	env := append(Env(os.Environ(), spec, b.keyEnv), extraEnv...)
	return b.l.Start(spec, env, dir, Stdio{nil, out, out}, name, args...)
}

// MakeDirs makes the $TMPDIR and the cache of a confined spec.
func MakeDirs(spec Spec) error {
	if spec.Normal().Mode == ModeOff {
		return nil
	}
	for _, d := range []string{spec.Tmp, spec.Cache} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("command not run: making its directory %s: %w", d, err)
		}
	}
	return nil
}

// Setting is the mode commands run under.
func (b *Box) Setting() string { return b.Spec().Mode }

// networkFailure matches what common programs print when they could not
// reach the network: name resolution, a refused socket or connect.
var networkFailure = regexp.MustCompile(`(?i)(could not resolve|couldn't resolve|temporary failure in name resolution|name or service not known|no address associated|getaddrinfo|eai_again|enotfound|network is unreachable|failed to connect|couldn't connect|could not connect|connection refused|econnrefused|dial (tcp|udp|unix)|failed to establish a new connection|address family not supported|(socket|connect|bind|listen)\S*:? (permission denied|operation not permitted)|permission denied.{0,40}(socket|connect))`)

// Explain returns a note for a failed command's output when the network
// rule may be why: the model and the person read why, and which setting
// lifts it.
func (b *Box) Explain(output string) string {
	spec := b.Spec()
	if spec.Mode == ModeOff || spec.Network || !networkFailure.MatchString(output) {
		return ""
	}
	return `sandbox: this session's commands may not use the network (no TCP or UDP connection, no listening socket, no Unix socket outside the workspace); if the command needs it, an owner can set sandbox_network: true on the session`
}
