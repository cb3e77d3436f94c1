package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/procgroup"
	"github.com/tandem-dev/tandem/internal/sandbox"
)

const (
	bashDefaultTimeout = 2 * time.Minute
	bashMaxTimeout     = 10 * time.Minute
	// bashGrace is how long the process group gets between SIGTERM and
	// SIGKILL: enough for a well-behaved program to clean up, short enough
	// that a cancel finishes well within the 2 s the contract allows.
	bashGrace = 200 * time.Millisecond
	// bashPipeDelay bounds how long output is still read after the group is
	// gone. A process that left the group (setsid, a daemon) may keep the
	// pipe open forever; without a bound, Run would never return.
	bashPipeDelay = 500 * time.Millisecond
	// bashReapWait bounds the wait for Wait itself after SIGKILL, so that Run
	// returns even if the kernel is slow to reap (e.g. a process stuck in
	// uninterruptible I/O).
	bashReapWait = time.Second
)

type bashTool struct{}

type bashArgs struct {
	Command   string `json:"command"`
	TimeoutMS optInt `json:"timeout_ms"`
}

func (bashTool) Name() string { return "bash" }

func (bashTool) Description() string {
	return `Run a shell command with bash -c in the workspace root and return its combined stdout and stderr.
- Each call starts a fresh shell in the workspace root: cd, exported variables and shell state do not carry over between calls; chain commands with && instead.
- stdin is /dev/null, so interactive commands (editors, pagers, prompts) will not work; pass flags such as --yes or --no-pager.
- timeout_ms: default 120000 (2 minutes), maximum 600000 (10 minutes). On timeout or cancel the whole process group is killed.
- Output is capped at about 30 kB (the beginning and the end are kept); redirect long output to a file and search it with grep or page it with view.
- Background processes (cmd &) are killed when the command finishes.
- A non-zero exit status is reported as an error together with the output.
- Commands usually run in a sandbox: they read and write the workspace and $TMPDIR (use it for scratch files, not /tmp), read the system's directories, and cannot reach other files, the network or other processes. What it refuses fails with "Permission denied", "Read-only file system" or similar; do not retry that the same way, and say so if the task needs more.
Prefer the view, ls, glob, grep, edit and write tools over cat, find, grep, sed or echo > file.`
}

func (bashTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command to run (bash -c), in the workspace root."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds. Default 120000, maximum 600000."}
  },
  "required": ["command"],
  "additionalProperties": false
}`)
}

func (bashTool) Permission() string { return PermissionShell }

func (bashTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a bashArgs
	if err := decodeArgs(args, &a, "command"); err != nil {
		return invalidSummary("bash", args, err)
	}
	return "Run: " + oneLine(a.Command, 120), map[string]any{
		"command":    a.Command,
		"timeout_ms": bashTimeout(a.TimeoutMS).Milliseconds(),
		"cwd":        env.Root,
	}
}

func bashTimeout(t optInt) time.Duration {
	if !t.set || t.v <= 0 {
		return bashDefaultTimeout
	}
	if t.v >= bashMaxTimeout.Milliseconds() {
		return bashMaxTimeout
	}
	return time.Duration(t.v) * time.Millisecond
}

func (bashTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a bashArgs
	if err := decodeArgs(args, &a, "command"); err != nil {
		return errorf("%v", err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return errorf("invalid arguments: command must not be empty")
	}
	sp, err := env.open()
	if err != nil {
		return resolveErr(err)
	}
	root := sp.dir
	sp.Close()
	if err := ctx.Err(); err != nil {
		return errorf("command not started: %v", err)
	}
	timeout := bashTimeout(a.TimeoutMS)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newHeadTail(maxOutput/2, maxOutput/2)
	// Our own pipe, not an io.Writer, so that Wait returns as soon as the
	// shell exits: then leftovers of the group can be killed at once, and
	// reading can be abandoned if something outside the group (setsid, a
	// daemon) keeps the pipe open forever.
	pr, pw, err := os.Pipe()
	if err != nil {
		return errorf("starting command: %v", err)
	}
	defer pr.Close()
	// exec.Command rather than CommandContext: on cancel the whole group must
	// be stopped, and CommandContext only kills the shell itself.
	shell, shellArgs := shellCommand(a.Command)
	var cmd *exec.Cmd
	setting := ""
	extra := []string{"PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0"}
	if env.Sandbox == nil {
		cmd = exec.Command(shell, shellArgs...)
		cmd.Env = append(os.Environ(), extra...)
		cmd.Dir = root
		cmd.Stdin = nil // the null device
		cmd.Stdout = pw
		cmd.Stderr = pw // one pipe for both keeps their interleaving
		procgroup.Prepare(cmd)
		err = cmd.Start()
	} else {
		setting = env.Sandbox.Setting()
		cmd, err = env.Sandbox.Start(root, extra, pw, shell, shellArgs...)
	}
	pw.Close() // the children hold their copies; ours would keep EOF away
	if err != nil {
		return Result{Content: startError(err), IsError: true, Sandbox: setting}
	}
	group := procgroup.Of(cmd)
	defer group.Release()

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var waitErr error
	var stopped string
	select {
	case waitErr = <-done:
		// The shell is done; anything it left running in its group goes
		// too, so nothing outlives the call unnoticed.
		group.Stop(bashGrace)
	case <-tctx.Done():
		if ctx.Err() != nil {
			stopped = "command canceled; its process group was killed"
		} else {
			stopped = fmt.Sprintf("command timed out after %s; its process group was killed", timeout)
		}
		group.Stop(bashGrace)
		select {
		case waitErr = <-done:
		case <-time.After(bashReapWait):
			waitErr = errors.New("process did not exit after SIGKILL")
		}
	}
	incomplete := false
	select {
	case <-copied:
	case <-time.After(bashPipeDelay):
		// Closing unblocks the pending Read (os.Pipe is pollable).
		incomplete = true
		pr.Close()
		<-copied
	}

	text := out.String()
	var notes []string
	isErr := false
	if stopped != "" {
		notes = append(notes, stopped)
		isErr = true
	} else if waitErr != nil {
		isErr = true
		var ee *exec.ExitError
		switch {
		case errors.As(waitErr, &ee) && ee.Exited():
			notes = append(notes, fmt.Sprintf("exit code: %d", ee.ExitCode()))
		case errors.As(waitErr, &ee):
			notes = append(notes, exitNote(ee))
		default:
			notes = append(notes, waitErr.Error())
		}
	}
	if incomplete {
		notes = append(notes, "output may be incomplete: a process outside the command's process group kept the output open")
	}
	if isErr && stopped == "" && env.Sandbox != nil {
		if n := env.Sandbox.Explain(text); n != "" {
			notes = append(notes, n)
		}
	}
	if text == "" && len(notes) == 0 {
		text = "(no output)"
	}
	for _, n := range notes {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "[" + n + "]"
	}
	return Result{Content: text, IsError: isErr, Sandbox: setting}
}

// startError is the result of a command that did not start: the
// sandbox's refusal says itself what to do.
func startError(err error) string {
	var ue *sandbox.UnavailableError
	if errors.As(err, &ue) {
		return err.Error()
	}
	return fmt.Sprintf("starting command: %v", err)
}

// headTail keeps the first head and the last tail bytes written and counts
// the rest: the start of output usually says what ran, the end how it failed,
// and the middle is what can go.
type headTail struct {
	mu         sync.Mutex
	head, tail []byte
	headCap    int
	tailCap    int
	total      int64
}

func newHeadTail(headCap, tailCap int) *headTail {
	return &headTail{headCap: headCap, tailCap: tailCap}
}

// Write never fails, so that a chatty command is never killed by SIGPIPE
// just because its output is no longer being kept.
func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	if room := h.headCap - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= h.tailCap {
		h.tail = append(h.tail[:0], p[len(p)-h.tailCap:]...)
		return n, nil
	}
	h.tail = append(h.tail, p...)
	// Compact only once the buffer has doubled, so appends stay amortized
	// O(1) rather than copying the tail on every write.
	if len(h.tail) > 2*h.tailCap {
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-h.tailCap:]...)
	}
	return n, nil
}

// String returns the kept output as valid UTF-8, with a note where bytes
// were dropped.
func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := h.tail
	if len(tail) > h.tailCap {
		tail = tail[len(tail)-h.tailCap:]
	}
	kept := int64(len(h.head) + len(tail))
	if kept == h.total {
		return strings.ToValidUTF8(string(h.head)+string(tail), "\uFFFD")
	}
	// Cutting may split a rune at either edge; ToValidUTF8 replaces the
	// pieces rather than emit invalid UTF-8.
	return strings.ToValidUTF8(string(h.head), "\uFFFD") +
		fmt.Sprintf("\n[... output truncated: %d bytes omitted; to read all of it, redirect the command's output to a file and read that with view (offset, limit) ...]\n", h.total-kept) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}
