package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/e2e/benchkit"
	"github.com/tandem-dev/tandem/proto"
)

// The transports phase: the turn each new transport serves, beside the
// same turn over HTTP on the same server in the same sitting (issue 35,
// target 5: an ACP turn and a Copilot turn at most 1 ms more than over
// HTTP at p50, a sandboxed bash call at most 5 ms more than an unconfined
// one).
var transportTurns = flag.Int("turns", 200, "transports phase: turns measured of each kind")

// transportWarmup is the turns of each kind run before those measured.
const transportWarmup = 5

var transportsPhase = ownPhase{name: "transports", run: runTransports, metrics: transportsMetrics}

func transportsMetrics(config) []metric {
	n := *transportTurns
	return []metric{
		{"tr-http-p50", fmt.Sprintf("turn over HTTP p50 (%d turns of each kind)", n), "ns"},
		{"tr-http-p99", "turn over HTTP p99", "ns"},
		{"tr-acp-p50", "turn over ACP (tandem acp --url) p50", "ns"},
		{"tr-acp-p99", "turn over ACP p99", "ns"},
		{"tr-acp-over", "ACP turn p50 minus HTTP's (target ≤ 1 ms)", "ns"},
		{"tr-copilot-p50", "turn over the Copilot protocol (--copilot-addr) p50", "ns"},
		{"tr-copilot-p99", "turn over the Copilot protocol p99", "ns"},
		{"tr-copilot-over", "Copilot turn p50 minus HTTP's (target ≤ 1 ms)", "ns"},
		{"tr-bash-off-p50", "bash turn, sandbox off, p50", "ns"},
		{"tr-bash-off-p99", "bash turn, sandbox off, p99", "ns"},
		{"tr-bash-on-p50", "bash turn, sandbox workspace, p50", "ns"},
		{"tr-bash-on-p99", "bash turn, sandbox workspace, p99", "ns"},
		{"tr-bash-over", "sandboxed bash turn p50 minus unconfined's (target ≤ 5 ms)", "ns"},
	}
}

// runTransports starts a server that also serves the Copilot SDK protocol,
// and `tandem acp` on it, and runs turns of the fake model in rounds: in
// each, one turn over HTTP (POST the prompt, then the session's stream to
// run.completed), over ACP (session/prompt to its answer), over the
// Copilot protocol (session.send to assistant.turn_end), and a turn that
// calls bash (`true`) in a session whose sandbox is off and in one whose
// sandbox is the default, workspace. Each kind has a session of its own in
// one workspace; the rounds interleave the kinds, so that whatever else
// the host does weighs on all of them alike.
func runTransports(cfg config, bin, modelURL string, res result) error {
	n := *transportTurns
	if n < 1 {
		return fmt.Errorf("need -turns >= 1 (got %d)", n)
	}
	srv, err := startServer(bin, modelURL, "TANDEM_COPILOT_ADDR=127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.stop()
	c := newClient(srv)
	defer c.close()
	dir, err := os.MkdirTemp("", "loadbench-transports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ws, err := c.workspace(dir)
	if err != nil {
		return err
	}
	off, workspace := "off", "workspace"
	plain, err := newHTTPTurns(c, ws, proto.CreateSessionRequest{}, "")
	if err != nil {
		return err
	}
	defer plain.close()
	bashOff, err := newHTTPTurns(c, ws, proto.CreateSessionRequest{PermissionMode: "allow_all", SandboxOptions: proto.SandboxOptions{Sandbox: &off}}, off)
	if err != nil {
		return err
	}
	defer bashOff.close()
	bashOn, err := newHTTPTurns(c, ws, proto.CreateSessionRequest{PermissionMode: "allow_all", SandboxOptions: proto.SandboxOptions{Sandbox: &workspace}}, workspace)
	if err != nil {
		return err
	}
	defer bashOn.close()
	acp, err := startACP(bin, srv, dir)
	if err != nil {
		return err
	}
	defer acp.close()
	var copilotAddr string
	select {
	case copilotAddr = <-srv.copilot:
	case <-time.After(10 * time.Second):
		return errors.New("the server did not say where it serves the Copilot protocol")
	}
	cop, err := dialCopilot(copilotAddr, dir)
	if err != nil {
		return err
	}
	defer cop.close()

	kinds := []struct {
		key  string
		turn func(tag string) (time.Duration, error)
	}{
		{"http", func(tag string) (time.Duration, error) { return plain.turn("fast " + tag) }},
		{"acp", func(tag string) (time.Duration, error) { return acp.turn("fast " + tag) }},
		{"copilot", func(tag string) (time.Duration, error) { return cop.turn("fast " + tag) }},
		{"bash-off", func(string) (time.Duration, error) { return bashOff.turn("bash true") }},
		{"bash-on", func(string) (time.Duration, error) { return bashOn.turn("bash true") }},
	}
	fmt.Fprintf(os.Stderr, "transports: %d rounds of %d turns\n", transportWarmup+n, len(kinds))
	durs := make(map[string][]time.Duration, len(kinds))
	for i := range transportWarmup + n {
		for _, k := range kinds {
			d, err := k.turn(fmt.Sprintf("t%d", i))
			if err != nil {
				return fmt.Errorf("%s turn: %w", k.key, err)
			}
			if i >= transportWarmup {
				durs[k.key] = append(durs[k.key], d)
			}
		}
	}
	p50 := map[string]float64{}
	for key, ds := range durs {
		slices.Sort(ds)
		p50[key] = float64(ds[len(ds)/2])
		res["tr-"+key+"-p50"] = p50[key]
		res["tr-"+key+"-p99"] = float64(ds[min(len(ds)-1, len(ds)*99/100)])
	}
	res["tr-acp-over"] = p50["acp"] - p50["http"]
	res["tr-copilot-over"] = p50["copilot"] - p50["http"]
	res["tr-bash-over"] = p50["bash-on"] - p50["bash-off"]
	return nil
}

// httpTurns runs turns in a session of its own over HTTP, and reads their
// events on the session's stream.
type httpTurns struct {
	c       *client
	ws, sid string
	sandbox string // the setting its bash calls must run under
	conn    net.Conn
	br      *bufio.Reader
}

func newHTTPTurns(c *client, ws string, req proto.CreateSessionRequest, sandbox string) (*httpTurns, error) {
	var s proto.Session
	if err := c.post("/v1/workspaces/"+ws+"/sessions", req, &s, 201); err != nil {
		return nil, err
	}
	conn, resp, err := benchkit.Subscribe(c.srv.addr, "/v1/workspaces/"+ws+"/events?session_id="+s.ID+"&client_id="+uuid.NewString(),
		"Authorization: Bearer "+token)
	if err != nil {
		return nil, err
	}
	return &httpTurns{c: c, ws: ws, sid: s.ID, sandbox: sandbox, conn: conn, br: bufio.NewReaderSize(resp.Body, 64<<10)}, nil
}

func (h *httpTurns) close() { h.conn.Close() }

// turn posts prompt and reads the stream until its run completed; a run
// that failed, or a tool call that did, or ran under another sandbox
// setting than the session's, fails it, and so does a run of a session
// for bash calls that made none.
func (h *httpTurns) turn(prompt string) (time.Duration, error) {
	began := time.Now()
	run, err := h.c.prompt(h.ws, h.sid, prompt)
	if err != nil {
		return 0, err
	}
	_ = h.conn.SetReadDeadline(time.Now().Add(runTimeout))
	var typ string
	called := false
	for {
		line, err := h.br.ReadBytes('\n')
		if err != nil {
			return 0, fmt.Errorf("run %s: %w", run, err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if t, ok := bytes.CutPrefix(line, []byte("event: ")); ok {
			typ = string(t)
			continue
		}
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || (typ != proto.EventRunCompleted && typ != proto.EventToolFinished) {
			continue
		}
		took := time.Since(began)
		var ev proto.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return 0, fmt.Errorf("%s: %w", typ, err)
		}
		if ev.RunID != "" && ev.RunID != run {
			continue
		}
		if typ == proto.EventToolFinished {
			var tf proto.ToolFinished
			if err := json.Unmarshal(ev.Data, &tf); err != nil {
				return 0, fmt.Errorf("%s: %w", typ, err)
			}
			if tf.IsError || tf.Sandbox != h.sandbox {
				return 0, fmt.Errorf("run %s: %s ran under sandbox %q (want %q), error %v: %s", run, tf.Name, tf.Sandbox, h.sandbox, tf.IsError, tf.Content)
			}
			called = true
			continue
		}
		var rc proto.RunCompleted
		if err := json.Unmarshal(ev.Data, &rc); err != nil {
			return 0, fmt.Errorf("%s: %w", typ, err)
		}
		if rc.RunID != run {
			continue
		}
		if rc.Outcome != proto.OutcomeEndTurn {
			return 0, fmt.Errorf("run %s ended %s: %+v", run, rc.Outcome, rc.Error)
		}
		if h.sandbox != "" && !called {
			return 0, fmt.Errorf("run %s ended without the bash call it was to time", run)
		}
		return took, nil
	}
}

// acpClient is an editor's end of `tandem acp`, started as an editor
// starts it, on the server at --url, with one session.
type acpClient struct {
	cmd  *exec.Cmd
	rpc  *rpcConn
	exit chan error
	dir  string
	sid  string
	in   interface{ Close() error }
}

func startACP(bin string, srv *server, cwd string) (*acpClient, error) {
	dir, err := os.MkdirTemp("", "loadbench-acp-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "acp", "--url", srv.url, "--data-dir", filepath.Join(dir, "data"))
	// The token in the environment, not on the command line, which every
	// user of the machine reads.
	cmd.Env = append(os.Environ(), "TANDEM_TOKEN="+token, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "xdg"))
	logf, err := os.Create(filepath.Join(dir, "acp.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s acp: %w", bin, err)
	}
	a := &acpClient{cmd: cmd, rpc: newRPCConn(in, out, false), exit: make(chan error, 1), dir: dir, in: in}
	go func() { a.exit <- cmd.Wait() }()
	fail := func(err error) (*acpClient, error) {
		a.close()
		log, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("tandem acp: %w\n%s", err, log)
	}
	if err := a.rpc.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil, nil); err != nil {
		return fail(err)
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := a.rpc.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}, &s, nil); err != nil {
		return fail(err)
	}
	a.sid = s.SessionID
	return a, nil
}

// turn is session/prompt, until its answer.
func (a *acpClient) turn(prompt string) (time.Duration, error) {
	began := time.Now()
	var out struct {
		StopReason string `json:"stopReason"`
	}
	err := a.rpc.call("session/prompt", map[string]any{"sessionId": a.sid, "prompt": []any{map[string]string{"type": "text", "text": prompt}}}, &out, nil)
	took := time.Since(began)
	if err != nil {
		return 0, err
	}
	if out.StopReason != "end_turn" {
		return 0, fmt.Errorf("session/prompt: stopReason %q", out.StopReason)
	}
	return took, nil
}

// close ends tandem acp as an editor does, closing its input.
func (a *acpClient) close() {
	_ = a.in.Close()
	awaitExit(a.cmd, a.exit)
	os.RemoveAll(a.dir)
}

// copilotClient is an SDK client's connection to the server's Copilot
// protocol listener, with one session.
type copilotClient struct {
	conn net.Conn
	rpc  *rpcConn
	sid  string
}

func dialCopilot(addr, cwd string) (*copilotClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &copilotClient{conn: conn, rpc: newRPCConn(conn, conn, true)}
	if err := c.rpc.call("connect", map[string]any{"token": token}, nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.rpc.call("session.create", map[string]any{"workingDirectory": cwd}, &s, nil); err != nil {
		conn.Close()
		return nil, err
	}
	c.sid = s.SessionID
	return c, nil
}

// turn is session.send, until the turn's end (assistant.turn_end, the
// Copilot protocol's run.completed) arrives.
func (c *copilotClient) turn(prompt string) (time.Duration, error) {
	began := time.Now()
	var took time.Duration
	err := c.rpc.call("session.send", map[string]any{"sessionId": c.sid, "prompt": prompt}, nil, func(method string, params json.RawMessage) (bool, error) {
		if method != "session.event" {
			return false, nil
		}
		var p struct {
			Event struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"event"`
		}
		if err := json.Unmarshal(params, &p); err != nil {
			return false, err
		}
		switch p.Event.Type {
		case "session.error", "abort":
			return false, fmt.Errorf("%s: %s", p.Event.Type, p.Event.Data)
		case "assistant.turn_end":
			took = time.Since(began)
			return true, nil
		}
		return false, nil
	})
	return took, err
}

func (c *copilotClient) close() { c.conn.Close() }
