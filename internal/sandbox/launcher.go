package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// HelperCommand is the hidden subcommand of the tandem binary that runs
// Main: `tandem sandbox-exec SPEC -- PROGRAM ARGS...`.
const HelperCommand = "sandbox-exec"

// ProbeArg, in place of a command, makes Main confine itself as a command
// would be and exit 0, without running anything: the launcher's check at
// start that the whole policy can be enforced here.
const ProbeArg = "--probe"

// NoLandlockEnv, set to 1 in the server's environment, makes the helper
// find no Landlock, so that the refusal path can be tested on machines
// that have it. It can only make the sandbox refuse, never loosen it.
const NoLandlockEnv = "TANDEM_SANDBOX_NO_LANDLOCK"

// Status says whether commands can be confined here, and how.
type Status struct {
	Available bool
	// Mechanism names what confines them ("landlock-abi7+seccomp+pidns"),
	// or "none".
	Mechanism string
	// Reason says what is missing when not Available.
	Reason string
}

// Spec is the whole policy of one confined command: Settings and the
// directories it applies to. It travels to the helper on its command line.
type Spec struct {
	Settings
	// Root is the workspace's root, read-write (read-only in ModeReadOnly)
	// except its .tandem directory, which is read-only.
	Root string `json:"root"`
	// Tmp is the command's $TMPDIR, the session's own, read-write.
	Tmp string `json:"tmp"`
	// Cache is the workspace's build cache (GOCACHE, npm's, pip's), read-write.
	Cache string `json:"cache,omitempty"`
	// Toolchains are directories commands read beyond the system's: the
	// Go toolchain and module cache this server's user has.
	Toolchains []string `json:"toolchains,omitempty"`
}

// Secrets are the environment variables a command never sees, besides
// those a configuration names in api_key_env.
var Secrets = []string{"TANDEM_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY"}

// Launcher starts confined commands. Its zero value is not usable; make
// one with NewLauncher.
type Launcher struct {
	exe    string
	status Status
	// toolchains are found once: they do not move while the server runs.
	toolchains []string
}

// NewLauncher returns a Launcher that runs the helper from exe (the
// tandem binary, os.Executable), and checks once, by running the helper
// in probe mode, that commands can be confined here. ctx bounds the check.
func NewLauncher(ctx context.Context, exe string) *Launcher {
	l := &Launcher{exe: exe, toolchains: findToolchains()}
	l.status = l.probe(ctx)
	return l
}

// Status reports whether commands can be confined, and how.
func (l *Launcher) Status() Status { return l.status }

// UnavailableError is the error of Command when commands cannot be
// confined here: the command did not run.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf(`command not run: this server cannot confine commands (%s), and nothing runs unconfined unless its sandbox setting is "off"; an owner can set sandbox: "off" on this session (or in the configuration file) to run commands without confinement`, e.Reason)
}

// Command returns the command that runs name with args under spec, with
// env (already without secrets, see Env). Under ModeOff it is name
// itself; otherwise the helper, which confines itself, then executes name.
// It fails, running nothing, when commands cannot be confined here.
func (l *Launcher) Command(spec Spec, env []string, name string, args ...string) (*exec.Cmd, error) {
	spec.Settings = spec.Settings.Normal()
	if spec.Mode == ModeOff {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		return cmd, nil
	}
	if l == nil || !l.status.Available {
		reason := "no sandbox launcher"
		if l != nil {
			reason = l.status.Reason
		}
		return nil, &UnavailableError{Reason: reason}
	}
	spec.Toolchains = l.toolchains
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode sandbox spec: %w", err)
	}
	full := append([]string{HelperCommand, string(raw), "--", name}, args...)
	cmd := exec.Command(l.exe, full...)
	cmd.Env = env
	prepare(cmd)
	return cmd, nil
}

// Env returns environ without the server's secrets (Secrets and the
// variables named in keyEnv), with the command's own $TMPDIR and caches
// when spec confines it.
func Env(environ []string, spec Spec, keyEnv []string) []string {
	drop := append(slices.Clone(Secrets), keyEnv...)
	out := make([]string, 0, len(environ)+8)
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(drop, k) {
			continue
		}
		if spec.Normal().Mode != ModeOff && slices.Contains(cacheVars, k) {
			continue // replaced below
		}
		out = append(out, kv)
	}
	if spec.Normal().Mode == ModeOff {
		return out
	}
	if spec.Tmp != "" {
		out = append(out, "TMPDIR="+spec.Tmp)
	}
	if spec.Cache != "" {
		out = append(out,
			"GOCACHE="+filepath.Join(spec.Cache, "go-build"),
			"npm_config_cache="+filepath.Join(spec.Cache, "npm"),
			"PIP_CACHE_DIR="+filepath.Join(spec.Cache, "pip"),
			"XDG_CACHE_HOME="+filepath.Join(spec.Cache, "xdg"),
		)
	}
	return out
}

// cacheVars are the variables Env points into the workspace's cache.
var cacheVars = []string{"TMPDIR", "GOCACHE", "npm_config_cache", "PIP_CACHE_DIR", "XDG_CACHE_HOME"}

// findToolchains returns the directories of the Go toolchain on PATH and
// of the Go module cache, when they exist outside the system's
// directories: a confined `go test` then builds offline from what the
// server's user already downloaded.
func findToolchains() []string {
	var out []string
	if goBin, err := exec.LookPath("go"); err == nil {
		if real, err := filepath.EvalSymlinks(goBin); err == nil {
			out = append(out, filepath.Dir(filepath.Dir(real)))
		}
	}
	mod := os.Getenv("GOMODCACHE")
	if mod == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			if home, err := os.UserHomeDir(); err == nil {
				gopath = filepath.Join(home, "go")
			}
		}
		if gopath != "" {
			mod = filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod")
		}
	}
	if mod != "" {
		out = append(out, mod)
	}
	var kept []string
	for _, d := range out {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && filepath.IsAbs(d) {
			kept = append(kept, filepath.Clean(d))
		}
	}
	slices.Sort(kept)
	return slices.Compact(kept)
}
