package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// cliDeadline bounds every wait of these tests; the binary is built with
// -race, so it is generous.
const cliDeadline = 30 * time.Second

// watchedBuffer collects a process's output and lets a test wait, with a
// deadline, for a piece of text to appear: deltas carry no newline, so
// waiting for lines would not do.
type watchedBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newWatchedBuffer() *watchedBuffer { return &watchedBuffer{changed: make(chan struct{})} }

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor waits until the output contains s.
func (w *watchedBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(cliDeadline)
	for {
		w.mu.Lock()
		found := strings.Contains(w.b.String(), s)
		changed := w.changed
		w.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %q in the output after %s; got %q", s, cliDeadline, w.String())
		}
	}
}

// cliProc is a tandem client command running as a process.
type cliProc struct {
	cmd    *exec.Cmd
	stdout *watchedBuffer
	stderr *watchedBuffer
	done   chan struct{}
}

// cliEnvironment is the environment of a client command: the process's own
// without any TANDEM_ setting, a home of its own so nothing touches the real
// one, and extra.
func cliEnvironment(t *testing.T, extra ...string) []string {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TANDEM_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_DATA_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "xdg"))
	return append(env, extra...)
}

func startCLI(t *testing.T, dir string, env []string, args ...string) *cliProc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = env
	p := &cliProc{cmd: cmd, stdout: newWatchedBuffer(), stderr: newWatchedBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exitCode waits for the process to end and returns its exit status.
func (p *cliProc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(cliDeadline):
		t.Fatalf("%v did not end; stdout %q, stderr %q", p.cmd.Args[1:], p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// runCLI runs a client command to its end.
func runCLI(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startCLI(t, dir, env, args...)
	code = p.exitCode(t)
	return p.stdout.String(), p.stderr.String(), code
}

// cliServer is a tandem serve for client tests, and an SDK client of it to
// check what the commands did.
type cliServer struct {
	*proc
	token string
	c     *client.Client
}

func startCLIServer(t *testing.T) *cliServer {
	t.Helper()
	const token = "cli-test-token"
	p := startServe(t, []string{"TANDEM_TOKEN=" + token, "TANDEM_DATA_DIR=" + t.TempDir(), "TANDEM_MODEL=echo"})
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
	})
	c := client.New(p.url, token)
	t.Cleanup(c.CloseIdleConnections)
	return &cliServer{proc: p, token: token, c: c}
}

// env is the environment that points a command at this server.
func (s *cliServer) env(t *testing.T) []string {
	return cliEnvironment(t, "TANDEM_URL="+s.url, "TANDEM_TOKEN="+s.token)
}

// sessions lists dir's sessions through the CLI, as a user would.
func sessionsOf(t *testing.T, dir string, env []string) []proto.Session {
	t.Helper()
	out, errOut, code := runCLI(t, dir, env, "sessions", "--json")
	require.Equal(t, 0, code, errOut)
	var list proto.SessionList
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	return list.Sessions
}

// lastFinish is the reason of the finish part ending the session's last
// message.
func (s *cliServer) lastFinish(t *testing.T, dir, sessionID string) string {
	t.Helper()
	ctx := context.Background()
	ws, _, err := s.c.CreateWorkspace(ctx, dir)
	require.NoError(t, err)
	msgs, err := s.c.Messages(ctx, ws.ID, sessionID)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	last := msgs[len(msgs)-1]
	require.NotEmpty(t, last.Parts)
	part := last.Parts[len(last.Parts)-1]
	require.Equal(t, proto.PartFinish, part.Type, "last message: %+v", last)
	return part.Reason
}

func TestRunAnswersAndContinuesTheLastSession(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	out, errOut, code := runCLI(t, dir, env, "run", "hello")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: hello\n", out, "stdout holds the answer and nothing else")

	out, errOut, code = runCLI(t, dir, env, "run", "again")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: again\n", out)

	sessions := sessionsOf(t, dir, env)
	require.Len(t, sessions, 1, "the second run continues the first one's session")
	assert.Equal(t, 4, sessions[0].MessageCount)
	first := sessions[0].ID

	// Flags may follow the prompt, as people type them.
	out, errOut, code = runCLI(t, dir, env, "run", "fresh", "start", "--new")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: fresh start\n", out)
	sessions = sessionsOf(t, dir, env)
	require.Len(t, sessions, 2)
	assert.NotEqual(t, first, sessions[0].ID, "--new made a session, now the most recent")
	assert.Equal(t, 2, sessions[0].MessageCount)

	// --session picks an older one over the last.
	_, errOut, code = runCLI(t, dir, env, "run", "--session", first, "third")
	require.Equal(t, 0, code, errOut)
	sessions = sessionsOf(t, dir, env)
	assert.Equal(t, first, sessions[0].ID)
	assert.Equal(t, 6, sessions[0].MessageCount)

	out, errOut, code = runCLI(t, dir, env, "sessions")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, first)
	assert.Contains(t, out, "MESSAGES")

	out, errOut, code = runCLI(t, dir, env, "workspaces", "--json")
	require.Equal(t, 0, code, errOut)
	var wl proto.WorkspaceList
	require.NoError(t, json.Unmarshal([]byte(out), &wl))
	require.Len(t, wl.Workspaces, 1)
	assert.Equal(t, dir, wl.Workspaces[0].Path)
	out, _, code = runCLI(t, dir, env, "workspaces")
	require.Equal(t, 0, code)
	assert.Contains(t, out, dir)

	_, errOut, code = runCLI(t, dir, env, "run", "--session", "0b3a0d7e-4a55-4a39-9b1a-5b7c1c0e7a11", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no session")

	_, errOut, code = runCLI(t, dir, cliEnvironment(t, "TANDEM_URL="+srv.url, "TANDEM_TOKEN=wrong"), "run", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "refused the token")

	out, errOut, code = runCLI(t, dir, env, "run", "--json", "as json")
	require.Equal(t, 0, code, errOut)
	var types []string
	for line := range strings.Lines(out) {
		var ev proto.Event
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		assert.Positive(t, ev.Seq)
		types = append(types, ev.Type)
	}
	assert.Contains(t, types, proto.EventMessageDelta)
	assert.Equal(t, proto.EventRunCompleted, types[len(types)-1], "run --json ends with the run's completion")
}

func TestRunCtrlCCancelsTheRun(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	p := startCLI(t, dir, env, "run", "/slow 200 20")
	p.stdout.waitFor(t, "tick 1 ")
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	assert.Equal(t, 130, p.exitCode(t), "stderr: %s", p.stderr)
	assert.NotContains(t, p.stdout.String(), "tick 200 ", "the run stopped before its end")
	assert.Contains(t, p.stderr.String(), "canceled")

	sessions := sessionsOf(t, dir, env)
	require.Len(t, sessions, 1)
	assert.Equal(t, proto.FinishCanceled, srv.lastFinish(t, dir, sessions[0].ID))
}

func TestRunYesApprovesPermissions(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	out, errOut, code := runCLI(t, dir, env, "run", "--yes", `/tool write {"path":"yes.txt","content":"ok"}`)
	require.Equal(t, 0, code, errOut)
	raw, err := os.ReadFile(filepath.Join(dir, "yes.txt"))
	require.NoError(t, err, "the approved write ran")
	assert.Equal(t, "ok", string(raw))
	assert.Contains(t, out, "tool write returned")
	assert.Contains(t, errOut, "[tool] write", "tool activity goes to stderr")
	assert.Contains(t, errOut, proto.ResultApproved)
}

func TestRunWithoutTerminalAnswersUserNotAvailable(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	// exec gives the process /dev/null as stdin: not a terminal.
	out, errOut, code := runCLI(t, dir, env, "run", `/tool write {"path":"no.txt","content":"ok"}`)
	require.Equal(t, 0, code, "the run still ends its turn; stderr: %s", errOut)
	_, err := os.Stat(filepath.Join(dir, "no.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the write was refused")
	assert.Contains(t, errOut, proto.ResultDeniedNoClient)
	assert.Contains(t, out, "tool write failed")
	assert.NotContains(t, errOut, "allow?", "nobody was asked")
}

func TestAttachJSONPrintsEnvelopes(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	att := startCLI(t, dir, env, "attach", "--json")
	att.stderr.waitFor(t, "attached to workspace")
	_, errOut, code := runCLI(t, dir, env, "run", "hello")
	require.Equal(t, 0, code, errOut)
	att.stdout.waitFor(t, `"type":"run.completed"`)
	require.NoError(t, att.cmd.Process.Signal(os.Interrupt))
	assert.Equal(t, 0, att.exitCode(t), "Ctrl-C is how attach ends; stderr: %s", att.stderr)

	var types []string
	var last int64
	sc := bufio.NewScanner(strings.NewReader(att.stdout.String()))
	for sc.Scan() {
		var ev proto.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), "line %q", sc.Text())
		assert.Greater(t, ev.Seq, last, "seqs increase")
		last = ev.Seq
		assert.NotEmpty(t, ev.WorkspaceID)
		assert.False(t, ev.Time.IsZero())
		types = append(types, ev.Type)
	}
	for _, want := range []string{proto.EventRunAccepted, proto.EventMessageDelta, proto.EventRunCompleted} {
		assert.Contains(t, types, want)
	}
	assert.NotContains(t, types, proto.EventStreamOpened, "control frames are not envelopes")
}

func TestAttachPrintsReadableLines(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	att := startCLI(t, dir, env, "attach")
	att.stderr.waitFor(t, "attached to workspace")
	_, errOut, code := runCLI(t, dir, env, "run", "hello world")
	require.Equal(t, 0, code, errOut)
	att.stdout.waitFor(t, "session.idle")
	require.NoError(t, att.cmd.Process.Signal(os.Interrupt))
	assert.Equal(t, 0, att.exitCode(t))
	out := att.stdout.String()
	assert.Contains(t, out, "text: echo: hello world\n", "a message's deltas make one line")
	assert.Regexp(t, `run\.completed +[0-9a-f]{8} run [0-9a-f]{8} end_turn`, out)
	// v1.2: who caused each event, and who is attached.
	assert.Regexp(t, `run\.accepted +[0-9a-f]{8} run [0-9a-f]{8} running \(position 0\) \(by owner\)`, out)
	assert.Contains(t, out, "owner, client ")
}

func TestRunStartsAServerWhenNoneAnswers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	env := cliEnvironment(t)
	var home string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_DATA_HOME="); ok {
			home = v
		}
	}

	out, errOut, code := runCLI(t, dir, env, "run", "--url", url, "hello")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: hello\n", out)
	assert.Contains(t, errOut, "running one in this process")
	_, err = os.Stat(filepath.Join(home, "tandem", "token"))
	assert.NoError(t, err, "the in-process server uses the default data dir and its token file")

	// What it left is there for the next command, which starts its own.
	sessions := sessionsOf(t, dir, append(env, "TANDEM_URL="+url))
	require.Len(t, sessions, 1)
	assert.Equal(t, 2, sessions[0].MessageCount)

	// Nothing is started in place of a remote server.
	_, errOut, code = runCLI(t, dir, env, "attach", "--url", url)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no tandem server")
}

// TestRunAsksOnATerminal drives the interactive path in-process: a scripted
// stdin that passes for a terminal answers the question.
func TestRunAsksOnATerminal(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	cases := []struct {
		name, input, result string
		written             bool
		feedback            string
	}{
		{name: "yes", input: "y\n", result: proto.ResultApproved, written: true},
		{name: "always", input: "\nalways\n", result: proto.ResultApprovedForSession, written: true},
		{name: "feedback", input: "no, name it other.txt\n", result: proto.ResultDeniedByUser, feedback: "no, name it other.txt"},
		{name: "eof", input: "", result: proto.ResultDeniedNoClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			vars := map[string]string{"TANDEM_URL": srv.url, "TANDEM_TOKEN": srv.token, "HOME": t.TempDir()}
			var stdout, stderr syncBuffer
			env := &cliEnv{
				getenv:   func(k string) string { return vars[k] },
				stdin:    strings.NewReader(tc.input),
				stdout:   &stdout,
				stderr:   &stderr,
				stdinTTY: true,
				signals: func() (<-chan os.Signal, func()) {
					return make(chan os.Signal), func() {}
				},
				getwd: func() (string, error) { return dir, nil },
			}
			code := runCommand([]string{`/tool write {"path":"a.txt","content":"hi"}`}, env)
			require.Equal(t, 0, code, stderr.String())
			assert.Contains(t, stderr.String(), "allow?")
			assert.Contains(t, stderr.String(), "+hi", "the question shows the diff")
			assert.Contains(t, stderr.String(), ": "+tc.result+"\n")
			_, err := os.Stat(filepath.Join(dir, "a.txt"))
			assert.Equal(t, tc.written, err == nil, "file written: %v", err)
			if tc.feedback != "" {
				assert.Contains(t, stdout.String(), tc.feedback, "the model got the feedback")
			}
		})
	}
}

func TestParseDecision(t *testing.T) {
	for in, want := range map[string][2]string{
		"y":          {proto.DecisionApproveOnce, ""},
		" YES ":      {proto.DecisionApproveOnce, ""},
		"a":          {proto.DecisionApproveSession, ""},
		"always":     {proto.DecisionApproveSession, ""},
		"n":          {proto.DecisionReject, ""},
		"use b.txt ": {proto.DecisionReject, "use b.txt"},
	} {
		d, fb, ok := parseDecision(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, [2]string{d, fb}, in)
	}
	_, _, ok := parseDecision("  ")
	assert.False(t, ok, "an empty line is no answer")
}

func TestParseRunFlags(t *testing.T) {
	env := &cliEnv{getenv: func(string) string { return "" }, stderr: &syncBuffer{}, stdinTTY: true}
	o, err := parseRun([]string{"fix", "--yes", "the bug", "--model", "echo/x", "--", "--now"}, env)
	require.NoError(t, err)
	assert.Equal(t, "fix the bug --now", o.prompt)
	assert.True(t, o.yes)
	assert.Equal(t, "echo/x", o.model)
	assert.Empty(t, o.url, "without --url the data dir's server.json, else the default, is looked up on connect")

	_, err = parseRun([]string{"--new", "--session", "x", "hi"}, env)
	assert.ErrorContains(t, err, "exclude")
	o, err = parseRun([]string{"--steer", "and the tests"}, env)
	require.NoError(t, err)
	assert.True(t, o.steer)
	assert.Equal(t, "and the tests", o.prompt, "--steer takes no value: the prompt is the argument")
	_, err = parseRun([]string{"--steer", "--new", "x"}, env)
	assert.ErrorContains(t, err, "--new session has none")
	_, err = parseRun(nil, env)
	assert.ErrorContains(t, err, "no prompt")

	piped := &cliEnv{getenv: func(string) string { return "" }, stderr: &syncBuffer{}, stdin: strings.NewReader("from a pipe\n")}
	o, err = parseRun(nil, piped)
	require.NoError(t, err)
	assert.Equal(t, "from a pipe\n", o.prompt)

	_, err = parseRun([]string{"--nope"}, env)
	assert.True(t, errors.As(err, new(reportedError)), "the flag package printed it already")
}

// A workspace whose directory was deleted behind the server's back is
// listed as missing, not as merely closed.
func TestWorkspacesListsAGoneDirectoryAsMissing(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	env := srv.env(t)
	kept, gone := t.TempDir(), filepath.Join(t.TempDir(), "scratch")
	require.NoError(t, os.Mkdir(gone, 0o700))
	for _, dir := range []string{kept, gone} {
		_, errOut, code := runCLI(t, dir, env, "run", "hello")
		require.Equal(t, 0, code, errOut)
	}
	require.NoError(t, os.RemoveAll(gone))

	out, errOut, code := runCLI(t, kept, env, "workspaces", "--json")
	require.Equal(t, 0, code, errOut)
	var wl proto.WorkspaceList
	require.NoError(t, json.Unmarshal([]byte(out), &wl))
	missing := map[string]bool{}
	for _, ws := range wl.Workspaces {
		missing[ws.Path] = ws.Missing
	}
	assert.Equal(t, map[string]bool{kept: false, gone: true}, missing)

	out, _, code = runCLI(t, kept, env, "workspaces")
	require.Equal(t, 0, code)
	assert.Regexp(t, regexp.QuoteMeta(gone)+`\s+missing\s`, out)
	assert.Regexp(t, regexp.QuoteMeta(kept)+`\s+(open|closed)\s`, out)
}

// tandem workspaces forget takes a workspace's path (even one that no
// longer exists) or its id, and the server lists it no more; a name it
// does not know is an error that changes nothing.
func TestWorkspacesForget(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	env := srv.env(t)
	kept, gone := t.TempDir(), filepath.Join(t.TempDir(), "scratch")
	require.NoError(t, os.Mkdir(gone, 0o700))
	for _, dir := range []string{kept, gone} {
		_, errOut, code := runCLI(t, dir, env, "run", "hello")
		require.Equal(t, 0, code, errOut)
	}
	require.NoError(t, os.RemoveAll(gone))
	list := func() map[string]string {
		out, errOut, code := runCLI(t, kept, env, "workspaces", "--json")
		require.Equal(t, 0, code, errOut)
		var wl proto.WorkspaceList
		require.NoError(t, json.Unmarshal([]byte(out), &wl))
		ids := map[string]string{}
		for _, ws := range wl.Workspaces {
			ids[ws.Path] = ws.ID
		}
		return ids
	}
	ids := list()
	require.Len(t, ids, 2)

	out, errOut, code := runCLI(t, kept, env, "workspaces", "forget", gone)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "forgot workspace "+ids[gone])
	assert.Equal(t, map[string]string{kept: ids[kept]}, list())

	_, errOut, code = runCLI(t, kept, env, "workspaces", "forget", gone)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "no workspace")

	_, errOut, code = runCLI(t, kept, env, "workspaces", "forget", ids[kept])
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, list())

	_, errOut, code = runCLI(t, kept, env, "workspaces", "forget")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "give one workspace id or path")
}
