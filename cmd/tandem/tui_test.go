package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// The tests of tandem tui run the real binary in a real terminal: tmux,
// which they drive with send-keys and read with capture-pane. Without tmux
// they fail: the TUI is not tested without one.

// screenWait bounds the wait for something to show on a TUI's screen.
const screenWait = 15 * time.Second

// term is one tmux server of a test, holding the TUIs as its sessions.
type term struct {
	t    *testing.T
	sock string
	env  []string
}

func newTerm(t *testing.T, env []string) *term {
	t.Helper()
	_, err := exec.LookPath("tmux")
	require.NoError(t, err, "the TUI's end-to-end tests need tmux (Debian package tmux; .ci/run installs it)")
	// A short path: a Unix socket's path is limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "tt")
	require.NoError(t, err)
	tm := &term{t: t, sock: filepath.Join(dir, "s"), env: env}
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-S", tm.sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	return tm
}

func (tm *term) tmux(args ...string) string {
	tm.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...)
	cmd.Env = tm.env
	out, err := cmd.CombinedOutput()
	require.NoError(tm.t, err, "tmux %v: %s", args, out)
	return string(out)
}

// start runs the binary with args in directory dir, in a new tmux session
// name of w columns and h lines. When it exits, the pane says how.
func (tm *term) start(name, dir string, w, h int, args ...string) {
	tm.t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf("cd '%s' && '%s' %s; echo \"tandem exited $?\"; sleep 600", dir, binary, strings.Join(quoted, " "))
	tm.tmux("new-session", "-d", "-s", name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), "sh", "-c", script)
}

func (tm *term) screen(name string) string {
	return tm.tmux("capture-pane", "-p", "-t", name)
}

// waitFor waits until the screen of name shows every string of want, and
// returns it.
func (tm *term) waitFor(name string, want ...string) string {
	tm.t.Helper()
	return tm.waitUntil(name, fmt.Sprintf("%q", want), func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	})
}

// waitUntil waits until ok accepts the screen of name, and returns it.
func (tm *term) waitUntil(name, what string, ok func(string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(screenWait)
	for {
		s := tm.screen(name)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("screen of %s never showed %s; it shows:\n%s", name, what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drawnLines is how many lines of the screen s the TUI drew: up to its last
// non-blank one, which is the input's.
func drawnLines(s string) int {
	return len(strings.Split(strings.TrimRight(s, "\n "), "\n"))
}

// waitGone waits until the screen of name no longer shows s.
func (tm *term) waitGone(name, s string) string {
	tm.t.Helper()
	deadline := time.Now().Add(screenWait)
	for {
		scr := tm.screen(name)
		if !strings.Contains(scr, s) {
			return scr
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("screen of %s still shows %q:\n%s", name, s, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typeLine types text and presses Enter.
func (tm *term) typeLine(name, text string) {
	tm.t.Helper()
	tm.tmux("send-keys", "-t", name, "-l", text)
	tm.tmux("send-keys", "-t", name, "Enter")
}

func (tm *term) keys(name string, keys ...string) {
	tm.t.Helper()
	tm.tmux(append([]string{"send-keys", "-t", name}, keys...)...)
}

// tuiServer is a tandem serve with the echo model, and an SDK client of
// it: the third client of the tests, curl's stand-in.
type tuiServer struct {
	*proc
	token string
	dir   string
	c     *client.Client
	ws    proto.Workspace
}

func startTUIServer(t *testing.T, dataDir string, args ...string) *tuiServer {
	t.Helper()
	const token = "tui-test-token"
	p := startServe(t, cliEnvironment(t, "TANDEM_TOKEN="+token, "TANDEM_DATA_DIR="+dataDir), args...)
	s := &tuiServer{proc: p, token: token, dir: t.TempDir(), c: client.New(p.url, token)}
	t.Cleanup(s.c.CloseIdleConnections)
	var err error
	s.ws, _, err = s.c.CreateWorkspace(context.Background(), s.dir)
	require.NoError(t, err)
	return s
}

func (s *tuiServer) tuiArgs(extra ...string) []string {
	return append([]string{"tui", "--url", s.url, "--token", s.token}, extra...)
}

// Two people in two terminals and a third client on one session: each one's
// prompt shows in both TUIs live; a permission asked shows in both and an
// answer in one closes both; Esc cancels a run; a prompt queues behind a
// running one; model output cannot drive the terminal.
func TestTUITwoTerminalsAndACurlClientOnOneSession(t *testing.T) {
	srv := startTUIServer(t, t.TempDir())
	ctx := context.Background()
	sess, err := srv.c.CreateSession(ctx, srv.ws.ID, proto.CreateSessionRequest{Title: "pairing"})
	require.NoError(t, err)
	events, err := srv.c.Events(ctx, srv.ws.ID, client.EventsOptions{SessionID: sess.ID})
	require.NoError(t, err)
	defer events.Close()

	tm := newTerm(t, cliEnvironment(t))
	tm.start("a", srv.dir, 100, 30, srv.tuiArgs()...)
	tm.start("b", srv.dir, 80, 24, srv.tuiArgs("--session", sess.ID)...)
	tm.waitFor("a", "pairing", "live")
	tm.waitFor("b", "pairing", "live")

	tm.typeLine("a", "hello from a")
	tm.waitFor("a", "echo: hello from a")
	scr := tm.waitFor("b", "echo: hello from a")
	assert.NotContains(t, scr, "▍you\nhello from a", "in b, a's prompt is not b's own")
	tm.typeLine("b", "hello from b")
	tm.waitFor("a", "echo: hello from b")
	tm.waitFor("b", "▍you", "echo: hello from b")
	_, err = srv.c.Prompt(ctx, srv.ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "hello from curl"})
	require.NoError(t, err)
	tm.waitFor("a", "echo: hello from curl")
	tm.waitFor("b", "echo: hello from curl")

	// A permission, shown in both, answered in b, closed in both.
	tm.typeLine("a", `/tool write {"path":"b.txt","content":"hi there"}`)
	tm.waitFor("a", "Permission: write", "+hi there")
	tm.waitFor("b", "Permission: write", "+hi there")
	tm.keys("b", "a")
	tm.waitGone("a", "Permission: write")
	tm.waitGone("b", "Permission: write")
	scr = tm.waitFor("a", "write: approved by ")
	assert.NotContains(t, scr, "approved by you", "in a, b's answer is b's")
	tm.waitFor("b", "write: approved by you")
	raw, err := os.ReadFile(filepath.Join(srv.dir, "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hi there", string(raw))

	// A prompt queued behind a running one, then Esc in b cancels the run.
	tm.typeLine("a", "/slow 100 100")
	tm.waitFor("b", "tick 2")
	tm.typeLine("b", "after the slow one")
	tm.waitFor("a", "queued 1: after the slow one")
	tm.waitFor("b", "queued 1: after the slow one")
	pressed := time.Now()
	tm.keys("b", "Escape")
	rc := waitCompleted(t, events, proto.OutcomeCanceled)
	assert.Less(t, time.Since(pressed), 2*time.Second, "the run %s ended canceled within 2 s of Esc", rc.RunID)
	for _, name := range []string{"a", "b"} {
		scr := tm.waitFor(name, "· canceled")
		assert.NotContains(t, scr, "run canceled", "the cancel is said once, on the message it cut")
	}

	// Model output carrying a title change and a clear screen is shown, not
	// obeyed.
	_, err = srv.c.Prompt(ctx, srv.ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "evil \x1b]0;PWNED\x07 and \x1b[2J done"})
	require.NoError(t, err)
	for _, name := range []string{"a", "b"} {
		scr := tm.waitFor(name, "echo: evil ␛]0;PWNED␇ and ␛[2J done")
		assert.True(t, strings.HasPrefix(strings.TrimLeft(scr, " "), srv.dir[:min(len(srv.dir), 20)]) || strings.Contains(strings.SplitN(scr, "\n", 2)[0], "pairing"),
			"the header is still on the first line:\n%s", scr)
		title := tm.tmux("display-message", "-p", "-t", name, "#{pane_title}")
		assert.NotContains(t, title, "PWNED", "the pane's title did not change")
	}
}

// waitCompleted reads the stream until a run.completed with outcome.
func waitCompleted(t *testing.T, s *client.EventStream, outcome string) proto.RunCompleted {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), screenWait)
	defer cancel()
	for {
		ev, err := s.Next(ctx)
		require.NoError(t, err, "no run.completed %s", outcome)
		if ev.Type != proto.EventRunCompleted {
			continue
		}
		rc, err := client.DecodeData[proto.RunCompleted](ev)
		require.NoError(t, err)
		if rc.Outcome == outcome {
			return rc
		}
	}
}

// The session commands, in a real terminal: /model, /new, /sessions.
func TestTUISessionCommands(t *testing.T) {
	srv := startTUIServer(t, t.TempDir())
	tm := newTerm(t, cliEnvironment(t))
	tm.start("a", srv.dir, 80, 24, srv.tuiArgs("--new")...)
	tm.waitFor("a", "live")
	tm.typeLine("a", "/rename First")
	tm.waitFor("a", "· First")
	tm.typeLine("a", "/model echo/other")
	tm.waitFor("a", "echo/other")
	tm.typeLine("a", "/new Second")
	tm.waitFor("a", "· Second")
	tm.typeLine("a", "in the second")
	tm.waitFor("a", "echo: in the second")
	tm.typeLine("a", "/sessions")
	tm.waitFor("a", "Sessions", "First", "Second")
	tm.tmux("send-keys", "-t", "a", "-l", "Fir")
	tm.waitGone("a", "Second  ")
	tm.keys("a", "Enter")
	tm.waitFor("a", "· First", "echo/other")
	tm.waitGone("a", "echo: in the second")
}

// A server restart mid-session: the TUI says reconnecting…, comes back
// live, and shows every message once.
func TestTUISurvivesAServerRestart(t *testing.T) {
	dataDir := t.TempDir()
	srv := startTUIServer(t, dataDir)
	tm := newTerm(t, cliEnvironment(t))
	tm.start("a", srv.dir, 80, 24, srv.tuiArgs()...)
	tm.waitFor("a", "live")
	tm.typeLine("a", "before the restart")
	tm.waitFor("a", "echo: before the restart")

	addr := strings.TrimPrefix(srv.url, "http://")
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	<-srv.done
	tm.waitFor("a", "reconnecting…")
	again := startServe(t, cliEnvironment(t, "TANDEM_TOKEN="+srv.token, "TANDEM_DATA_DIR="+dataDir), "--addr", addr)
	_ = again
	tm.waitFor("a", "live")
	tm.typeLine("a", "after the restart")
	scr := tm.waitFor("a", "echo: after the restart")
	assert.Equal(t, 1, strings.Count(scr, "echo: before the restart"), "no message is shown twice:\n%s", scr)
}

// With no server, tandem (bare, on a terminal) starts one in-process that
// others can reach through server.json, redraws on resize, and asks before
// quitting while a run goes on.
func TestTUIInProcessServerResizeAndQuit(t *testing.T) {
	dataDir := t.TempDir()
	dir := t.TempDir()
	// The usual address (TANDEM_ADDR, as tandem serve's) is a free port
	// here, so that no other server on 7433 is found instead.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	tm := newTerm(t, cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir, "TANDEM_ADDR="+addr))
	tm.start("a", dir, 80, 24)
	scr := tm.waitFor("a", "live", "hosting "+addr)
	assert.Equal(t, 24, drawnLines(scr), "the whole 80x24 screen is used")

	info := serverJSON(t, dataDir)
	assert.Equal(t, "http://"+addr, info["url"], "others find it in server.json")
	token, err := os.ReadFile(filepath.Join(dataDir, "token"))
	require.NoError(t, err)
	c := client.New(info["url"].(string), strings.TrimSpace(string(token)))
	defer c.CloseIdleConnections()
	ctx := context.Background()
	ws, _, err := c.CreateWorkspace(ctx, dir)
	require.NoError(t, err)
	last, ok, err := c.LastSession(ctx, ws.ID)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: last, Prompt: "from another client"})
	require.NoError(t, err)
	tm.waitFor("a", "echo: from another client")

	for _, sz := range [][2]int{{120, 40}, {80, 24}, {100, 30}} {
		tm.tmux("resize-window", "-t", "a", "-x", fmt.Sprint(sz[0]), "-y", fmt.Sprint(sz[1]))
		scr = tm.waitUntil("a", fmt.Sprintf("a redraw at %dx%d", sz[0], sz[1]), func(s string) bool {
			return drawnLines(s) == sz[1] && strings.Contains(s, "echo: from another client")
		})
		for _, l := range strings.Split(scr, "\n") {
			assert.LessOrEqual(t, len([]rune(l)), sz[0])
		}
	}

	tm.typeLine("a", "/slow 200 100")
	tm.waitFor("a", "tick 1")
	tm.keys("a", "C-c")
	tm.waitFor("a", "Quit? y/n")
	tm.keys("a", "y")
	tm.waitFor("a", "tandem exited 0")
	_, err = c.Health(ctx)
	assert.Error(t, err, "quitting stopped the server the TUI hosted")
}

// Given --url, the TUI connects only there: while nothing listens it says
// it is connecting, and it comes up when the server does.
func TestTUIWithURLWaitsForItsServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	dataDir := t.TempDir()
	dir := t.TempDir()
	tm := newTerm(t, cliEnvironment(t, "TANDEM_DATA_DIR="+dataDir))
	tm.start("a", dir, 80, 24, "tui", "--url", "http://"+addr, "--token", "tui-test-token")
	tm.waitFor("a", "connecting…")
	_, err = os.Stat(filepath.Join(dataDir, "server.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no server was started in its stead")

	startServe(t, cliEnvironment(t, "TANDEM_TOKEN=tui-test-token", "TANDEM_DATA_DIR="+dataDir), "--addr", addr)
	tm.waitFor("a", "live")
	tm.typeLine("a", "made it")
	tm.waitFor("a", "echo: made it")
}

// /rewind in a real terminal: a run writes a file (its permission approved
// in the TUI), someone edits the file by hand, and /rewind shows the diff,
// is refused over the hand edit, is forced with f, and puts the file back;
// the second TUI on the session sees the history change.
func TestTUIRewindRestoresTheFileAndEveryTUISeesIt(t *testing.T) {
	srv := startTUIServer(t, t.TempDir())
	ctx := context.Background()
	file := filepath.Join(srv.dir, "f.txt")
	require.NoError(t, os.WriteFile(file, []byte("old text\n"), 0o644))
	sess, err := srv.c.CreateSession(ctx, srv.ws.ID, proto.CreateSessionRequest{Title: "going back"})
	require.NoError(t, err)

	tm := newTerm(t, cliEnvironment(t))
	tm.start("a", srv.dir, 100, 30, srv.tuiArgs("--session", sess.ID)...)
	tm.start("b", srv.dir, 80, 24, srv.tuiArgs("--session", sess.ID)...)
	tm.waitFor("a", "going back", "live")
	tm.waitFor("b", "going back", "live")

	tm.typeLine("a", "before the change")
	tm.waitFor("b", "echo: before the change")
	tm.typeLine("a", `/tool write {"path":"f.txt","content":"agent text\n"}`)
	tm.waitFor("a", "Permission: write")
	tm.keys("a", "a")
	tm.waitFor("a", "tool write returned")
	tm.waitFor("b", "tool write returned")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "agent text\n", string(raw))
	require.NoError(t, os.WriteFile(file, []byte("hand edit\n"), 0o644))

	tm.typeLine("a", "/rewind")
	tm.waitFor("a", "Rewind", "undoes: f.txt (modified)", "-old text", "+hand edit")
	tm.keys("a", "Enter")
	tm.waitFor("a", "refused:", "f.txt", "f force the rewind")
	raw, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "hand edit\n", string(raw), "a refused rewind changes nothing")
	tm.keys("a", "f")
	tm.waitFor("a", "rewound")
	raw, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "old text\n", string(raw), "the rewind put the file back")

	// The history reloads: the write's run leaves, what came before stays.
	for _, name := range []string{"a", "b"} {
		tm.waitUntil(name, "the history without the write's run", func(s string) bool {
			return !strings.Contains(s, "tool write returned") && strings.Contains(s, "echo: before the change")
		})
	}
	tm.waitFor("b", "rewound the session")
	msgs, err := srv.c.Messages(ctx, srv.ws.ID, sess.ID)
	require.NoError(t, err)
	assert.Len(t, msgs, 2, "the prompt before the write and its answer")
}
