package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The end-to-end tests of `tandem acp` drive the real binary with the
// official ACP TypeScript SDK's client (@agentclientprotocol/sdk from npm,
// in e2e/acp: `npm ci --prefix e2e/acp` installs it), through a small
// driver script that the test commands over its stdio.

var (
	tandemOnce sync.Once
	tandemBin  string
	tandemErr  error
)

// tandemBinary builds the tandem command once per test process, with the
// race detector, beside the sandbox's helper (TestMain removes both).
func tandemBinary(t testing.TB) string {
	t.Helper()
	tandemOnce.Do(func() {
		tandemBin = filepath.Join(filepath.Dir(sandboxHelper), "tandem-race")
		if runtime.GOOS == "windows" {
			tandemBin += ".exe"
		}
		cmd := exec.Command("go", "build", "-race", "-o", tandemBin, "./cmd/tandem")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			tandemErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, tandemErr)
	return tandemBin
}

// servedTandem is a `tandem serve` process on the echo model.
type servedTandem struct {
	url, token, dataDir string
}

// serveTandem starts `tandem serve` on a free port, stopped with the test.
func serveTandem(t *testing.T) *servedTandem {
	t.Helper()
	s := &servedTandem{token: "acp-e2e-owner-token", dataDir: t.TempDir()}
	cmd := exec.Command(tandemBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", s.dataDir, "--token", s.token, "--model", "echo")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "tandem listening on "); ok {
				lines <- u
			}
		}
		close(lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("tandem serve did not stop within %v", wait)
		}
	})
	select {
	case u, ok := <-lines:
		require.True(t, ok, "tandem serve ended before it listened")
		s.url = u
	case <-time.After(wait):
		t.Fatalf("tandem serve did not listen within %v", wait)
	}
	return s
}

// report is one line of the driver's.
type report struct {
	Ev     string          `json:"ev"`
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *acpError       `json:"error"`
	Params json.RawMessage `json:"params"`
	RID    int             `json:"rid"`
	Line   string          `json:"line"`
	Code   *int            `json:"code"`
}

type acpError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// editor is the SDK's client connected to one `tandem acp` process.
type editor struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	log     []report // every report but results, in order
	results map[int]chan report
	changed chan struct{}
	nextID  int
	done    chan struct{}
}

// startEditor starts the driver with `tandem acp ARGS...`.
func startEditor(t *testing.T, env []string, args ...string) *editor {
	t.Helper()
	if _, err := os.Stat(filepath.Join("acp", "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		t.Fatalf("the ACP SDK is not installed: run `npm ci --prefix e2e/acp` (%v)", err)
	}
	node, err := exec.LookPath("node")
	require.NoError(t, err, "the ACP tests need Node.js")
	cmdArgs := append([]string{filepath.Join("acp", "driver.mjs"), tandemBinary(t), "acp"}, args...)
	cmd := exec.Command(node, cmdArgs...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	e := &editor{t: t, cmd: cmd, stdin: stdin, results: map[int]chan report{}, changed: make(chan struct{}), done: make(chan struct{})}
	go e.read(stdout)
	t.Cleanup(e.close)
	return e
}

func (e *editor) read(r io.Reader) {
	defer close(e.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var rep report
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			e.t.Errorf("driver wrote %q: %v", sc.Text(), err)
			continue
		}
		e.mu.Lock()
		if rep.Ev == "result" || rep.Ev == "error" {
			if ch := e.results[rep.ID]; ch != nil {
				ch <- rep
				delete(e.results, rep.ID)
			}
		} else {
			e.log = append(e.log, rep)
		}
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
	}
}

// close ends the driver (and with it tandem acp) and checks that tandem
// acp wrote nothing but JSON-RPC messages on its stdout.
func (e *editor) close() {
	_ = e.stdin.Close()
	select {
	case <-e.done:
	case <-time.After(wait):
		_ = e.cmd.Process.Kill()
		<-e.done
		e.t.Errorf("the editor did not end within %v of closing its input", wait)
	}
	_ = e.cmd.Wait()
	for _, rep := range e.reports("wire") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(rep.Line), &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
			e.t.Errorf("tandem acp wrote a line that is not a JSON-RPC message on stdout: %q", rep.Line)
		}
	}
}

// send sends a driver command and waits for its result.
func (e *editor) send(cmd map[string]any) report {
	e.t.Helper()
	e.mu.Lock()
	e.nextID++
	id := e.nextID
	ch := make(chan report, 1)
	e.results[id] = ch
	e.mu.Unlock()
	cmd["id"] = id
	b, err := json.Marshal(cmd)
	require.NoError(e.t, err)
	_, err = e.stdin.Write(append(b, '\n'))
	require.NoError(e.t, err)
	select {
	case rep := <-ch:
		return rep
	case <-time.After(wait):
		e.t.Fatalf("no answer to %s within %v", b, wait)
	}
	return report{}
}

// request sends an ACP request and returns its result, failing on an error.
func (e *editor) request(method string, params any) json.RawMessage {
	e.t.Helper()
	rep := e.send(map[string]any{"op": "request", "method": method, "params": params})
	require.Nil(e.t, rep.Error, "%s answered an error", method)
	return rep.Result
}

// requestErr sends an ACP request that must fail and returns its error.
func (e *editor) requestErr(method string, params any) *acpError {
	e.t.Helper()
	rep := e.send(map[string]any{"op": "request", "method": method, "params": params})
	require.NotNil(e.t, rep.Error, "%s answered %s, not an error", method, rep.Result)
	return rep.Error
}

// requestAsync sends an ACP request without waiting: the answer arrives on
// the channel.
func (e *editor) requestAsync(method string, params any) <-chan report {
	e.mu.Lock()
	e.nextID++
	id := e.nextID
	ch := make(chan report, 1)
	e.results[id] = ch
	e.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"id": id, "op": "request", "method": method, "params": params})
	_, err := e.stdin.Write(append(b, '\n'))
	require.NoError(e.t, err)
	return ch
}

// await waits for an answer sent with requestAsync.
func (e *editor) await(ch <-chan report) report {
	e.t.Helper()
	select {
	case rep := <-ch:
		return rep
	case <-time.After(wait):
		e.t.Fatalf("no answer within %v", wait)
	}
	return report{}
}

// mark is where the log is now, for waitFor to look after.
func (e *editor) mark() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.log)
}

// waitFor waits for a report at or after index from that matches, and
// returns it with its index.
func (e *editor) waitFor(from int, what string, match func(report) bool) (report, int) {
	e.t.Helper()
	deadline := time.After(wait)
	for {
		e.mu.Lock()
		for i := from; i < len(e.log); i++ {
			if match(e.log[i]) {
				rep := e.log[i]
				e.mu.Unlock()
				return rep, i
			}
		}
		changed := e.changed
		e.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			e.t.Fatalf("no %s within %v", what, wait)
		}
	}
}

// reports are the log's reports of one kind.
func (e *editor) reports(ev string) []report {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []report
	for _, r := range e.log {
		if r.Ev == ev {
			out = append(out, r)
		}
	}
	return out
}

// sessionUpdate is the update of a session/update report.
type sessionUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`
	Content       struct {
		Type string `json:"type"`
		Text string `json:"text"`
		URI  string `json:"uri"`
	} `json:"content"`
	CurrentModeID string `json:"currentModeId"`
}

// updates are the session's updates from index from on, decoded.
func (e *editor) updates(from int, sessionID string) []sessionUpdate {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sessionUpdate
	for _, r := range e.log[from:] {
		if r.Ev != "update" {
			continue
		}
		var p struct {
			SessionID string        `json:"sessionId"`
			Update    sessionUpdate `json:"update"`
		}
		if json.Unmarshal(r.Params, &p) == nil && p.SessionID == sessionID {
			out = append(out, p.Update)
		}
	}
	return out
}

// text joins the text of the updates of one kind.
func text(ups []sessionUpdate, kind string) string {
	var b strings.Builder
	for _, u := range ups {
		if u.SessionUpdate == kind {
			b.WriteString(u.Content.Text)
		}
	}
	return b.String()
}

// isUpdate matches a session/update of the session whose raw params
// contain all of the given strings.
func isUpdate(sessionID string, contains ...string) func(report) bool {
	return func(r report) bool {
		if r.Ev != "update" || !strings.Contains(string(r.Params), `"sessionId":"`+sessionID+`"`) {
			return false
		}
		for _, s := range contains {
			if !strings.Contains(string(r.Params), s) {
				return false
			}
		}
		return true
	}
}
