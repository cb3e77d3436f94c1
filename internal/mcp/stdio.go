package mcp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/procgroup"
)

const (
	// stdinGrace is how long a stdio server gets to exit by itself once its
	// stdin is closed, as MCP asks servers to; then its group gets SIGTERM,
	// and termGrace later SIGKILL. Together well within the 2 s a cancel or a
	// workspace close may take.
	stdinGrace = 200 * time.Millisecond
	termGrace  = 300 * time.Millisecond
	// reapWait bounds the wait for the kernel to reap the killed process.
	reapWait = 2 * time.Second
	// stderrDrain bounds how long stderr is still read once the group is
	// dead; a process that left the group may hold the pipe forever.
	stderrDrain = 200 * time.Millisecond
	// maxStderrLine bounds one logged line of a server's stderr.
	maxStderrLine = 4 << 10
)

// process is a stdio server's process, leader of its own process group.
type process struct {
	cmd    *exec.Cmd
	group  *procgroup.Group
	stdin  *os.File // ours: the server reads the other end
	stdout *os.File
	stderr *os.File
	// exited is closed once the process is reaped; state is then set.
	exited chan struct{}
	state  *os.ProcessState
	// stderrDone is closed when the stderr reader returns.
	stderrDone chan struct{}
}

// startProcess starts the server's command and returns the transport that
// speaks MCP over its stdin and stdout.
func (c *conn) startProcess() (sdk.Transport, error) {
	s := c.s
	path, err := c.commandPath()
	if err != nil {
		return nil, err
	}
	args := make([]string, len(s.spec.Args))
	for i, a := range s.spec.Args {
		if args[i], err = config.Expand(a, s.m.opts.LookupEnv); err != nil {
			return nil, fmt.Errorf("args[%d]: %w", i, err)
		}
	}
	env, err := c.environ()
	if err != nil {
		return nil, err
	}
	// Pipes of our own rather than exec's: exec's would be closed by Wait,
	// and reads must be able to outlive the process for a moment.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	var cmd *exec.Cmd
	if mode := s.spec.Sandbox; mode != "" {
		if s.m.opts.Confine == nil {
			err = errors.New("this server runs no sandbox")
		} else {
			cmd, err = s.m.opts.Confine(mode, env, s.m.opts.Dir, inR, outW, errW, path, args...)
		}
	} else {
		cmd = exec.Command(path, args...)
		cmd.Dir = s.m.opts.Dir
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
		// Its own process group, so that stopping it stops what it started.
		procgroup.Prepare(cmd)
		err = cmd.Start()
	}
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("command not found: %s", s.spec.Command)
		}
		return nil, fmt.Errorf("cannot start %s: %v", s.spec.Command, err)
	}
	p := &process{cmd: cmd, group: procgroup.Of(cmd), stdin: inW, stdout: outR, stderr: errR, exited: make(chan struct{}), stderrDone: make(chan struct{})}
	c.proc = p
	s.log.Info("mcp server started", "pid", cmd.Process.Pid, "command", s.spec.Command)
	// These cannot be refused: teardown has not begun while starting.
	c.goTracked(func() {
		p.state, _ = cmd.Process.Wait()
		close(p.exited)
		c.end(p.exitReason())
	})
	c.goTracked(func() {
		defer close(p.stderrDone)
		logLines(errR, func(line string) { s.log.Info("mcp server stderr", "line", line) })
	})
	return &sdk.IOTransport{Reader: outR, Writer: inW}, nil
}

// commandPath resolves the command: a name is looked up in PATH, a relative
// path with a slash is relative to the workspace root.
func (c *conn) commandPath() (string, error) {
	cmd := c.s.spec.Command
	if cmd == "" {
		return "", errors.New("no command")
	}
	if !strings.ContainsRune(cmd, '/') {
		path, err := exec.LookPath(cmd)
		if err != nil {
			return "", fmt.Errorf("command not found: %s", cmd)
		}
		return path, nil
	}
	if !filepath.IsAbs(cmd) {
		cmd = filepath.Join(c.s.m.opts.Dir, cmd)
	}
	return cmd, nil
}

// environ is the base environment with the server's env on top, its
// ${NAME} references resolved.
func (c *conn) environ() ([]string, error) {
	base := c.s.m.opts.Environ
	if base == nil {
		base = os.Environ()
	}
	if len(c.s.spec.Env) == 0 {
		return base, nil
	}
	env := make([]string, 0, len(base)+len(c.s.spec.Env))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := c.s.spec.Env[k]; !over {
			env = append(env, kv)
		}
	}
	for k, v := range c.s.spec.Env {
		x, err := config.Expand(v, c.s.m.opts.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		env = append(env, k+"="+x)
	}
	return env, nil
}

// exitReason says how the process ended; call once exited is closed.
func (p *process) exitReason() string {
	if p.state == nil {
		return "exited"
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with status %d", p.state.ExitCode())
}

// stop stops the server: stdin closed (a polite server exits), then SIGTERM
// and SIGKILL to its whole group, then our ends of the pipes closed. It
// returns once the process is reaped and stderr is read, each bounded.
func (p *process) stop() {
	_ = p.stdin.Close()
	defer p.group.Release()
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if !wait(stdinGrace) {
		p.group.Terminate()
		wait(termGrace)
	}
	// Always, even when the leader is gone: what it started may not be.
	p.group.Kill()
	wait(reapWait)
	_ = p.stdout.Close()
	t := time.NewTimer(stderrDrain)
	select {
	case <-p.stderrDone:
	case <-t.C:
		// A process outside the group holds the pipe: stop reading.
	}
	t.Stop()
	_ = p.stderr.Close()
}

// logLines calls log for each line of r, long lines cut, until r ends.
func logLines(r io.Reader, log func(string)) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 || (err == nil && !isPrefix) {
			text := strings.ToValidUTF8(string(line), "\uFFFD")
			if isPrefix {
				text += " [line cut]"
				// Skip the rest of the long line.
				for isPrefix && err == nil {
					_, isPrefix, err = br.ReadLine()
				}
			}
			log(text)
		}
		if err != nil {
			return
		}
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
