package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/procgroup"
)

// HelperCommand is the hidden subcommand of the tandem binary that runs
// Main: `tandem sandbox-exec --wait` (the command comes on descriptor 3)
// or `tandem sandbox-exec SPEC --probe`.
const HelperCommand = "sandbox-exec"

// WaitArg makes Main wait for its command on descriptor 3.
const WaitArg = "--wait"

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
// one with NewLauncher, and Close it.
type Launcher struct {
	exe    string
	status Status
	// toolchains are found once: they do not move while the server runs.
	toolchains []string
	// warm holds helpers started ahead, each waiting for the one command
	// it will confine and become: starting the tandem binary costs tens
	// of milliseconds, which a command then does not wait for.
	warm chan *helper
	stop chan struct{}
	done chan struct{}
	// starting is the helper keepWarm waits for, which Close interrupts.
	mu       sync.Mutex
	starting *helper
}

// warmHelpers is how many helpers wait ahead: commands that start
// together (several sessions) each find one.
const warmHelpers = 2

// NewLauncher returns a Launcher that runs the helper from exe (the
// tandem binary, os.Executable), and checks once, by running the helper
// in probe mode, that commands can be confined here. ctx bounds the check.
func NewLauncher(ctx context.Context, exe string) *Launcher {
	l := &Launcher{exe: exe, toolchains: findToolchains(), warm: make(chan *helper, warmHelpers),
		stop: make(chan struct{}), done: make(chan struct{})}
	l.status = l.probe(ctx)
	if l.status.Available {
		go l.keepWarm()
	} else {
		close(l.done)
	}
	return l
}

// Close stops the helpers waiting ahead; commands already started go on.
func (l *Launcher) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	if l.starting != nil {
		l.starting.interrupt() // its ready() returns now
	}
	l.mu.Unlock()
	<-l.done
	for {
		select {
		case h := <-l.warm:
			h.discard()
		default:
			return
		}
	}
}

// keepWarm keeps warmHelpers helpers waiting until Close.
func (l *Launcher) keepWarm() {
	defer close(l.done)
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-retry.C:
		}
		h, err := l.spawn()
		if err == nil {
			err = l.await(h)
		}
		if err != nil {
			retry.Reset(time.Second) // a command starts its own meanwhile
			continue
		}
		select {
		case l.warm <- h:
			retry.Reset(0)
		case <-l.stop:
			h.discard()
			return
		}
	}
}

// await waits for a helper keepWarm started to be ready, unless Close
// comes first; either way a helper it does not return is discarded.
func (l *Launcher) await(h *helper) error {
	l.mu.Lock()
	select {
	case <-l.stop:
		l.mu.Unlock()
		h.discard()
		return errors.New("closed")
	default:
	}
	l.starting = h
	l.mu.Unlock()
	err := h.ready()
	l.mu.Lock()
	l.starting = nil
	l.mu.Unlock()
	if err != nil {
		h.discard()
	}
	return err
}

// take returns a waiting helper, or a new one when none waits.
func (l *Launcher) take() (*helper, error) {
	select {
	case h := <-l.warm:
		return h, nil
	default:
	}
	h, err := l.spawn()
	if err != nil {
		return nil, err
	}
	if err := h.ready(); err != nil {
		h.discard()
		return nil, err
	}
	return h, nil
}

// Status reports whether commands can be confined, and how.
func (l *Launcher) Status() Status { return l.status }

// UnavailableError is the error of Start when commands cannot be
// confined here: the command did not run.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf(`command not run: this server cannot confine commands (%s), and nothing runs unconfined unless its sandbox setting is "off"; an owner can set sandbox: "off" on this session (or in the configuration file) to run commands without confinement`, e.Reason)
}

// Stdio are a command's standard input, output and error; nil is the
// null device.
type Stdio [3]*os.File

// Start starts name with args in dir under spec, with env (already
// without secrets, see Env) and stdio, as the leader of a process group
// of its own (see package procgroup), and returns it started: the caller
// waits for it. Under ModeOff it is name itself; otherwise a helper that
// confined itself, then executed name. It fails, starting nothing, when
// commands cannot be confined here.
func (l *Launcher) Start(spec Spec, env []string, dir string, stdio Stdio, name string, args ...string) (*exec.Cmd, error) {
	spec.Settings = spec.Settings.Normal()
	if spec.Mode == ModeOff {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, dir
		if stdio[0] != nil {
			cmd.Stdin = stdio[0]
		}
		if stdio[1] != nil {
			cmd.Stdout = stdio[1]
		}
		if stdio[2] != nil {
			cmd.Stderr = stdio[2]
		}
		procgroup.Prepare(cmd)
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return cmd, nil
	}
	if l == nil || !l.status.Available {
		reason := "no sandbox helper"
		if l != nil {
			reason = l.status.Reason
		}
		return nil, &UnavailableError{Reason: reason}
	}
	if spec.Root == "" || spec.Tmp == "" {
		return nil, errors.New("command not run: its sandbox has no workspace or no temporary directory")
	}
	spec.Toolchains = l.toolchains
	return l.startConfined(request{Spec: spec, Argv: append([]string{name}, args...), Env: env, Dir: dir}, stdio)
}

// request is what a waiting helper is sent: the command it becomes.
type request struct {
	Spec Spec     `json:"spec"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
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
