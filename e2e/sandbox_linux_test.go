//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/proto"
)

// bashCall is the echo model's call of bash with command.
func bashCall(command string) string {
	args, _ := json.Marshal(map[string]string{"command": command})
	return "/tool bash " + string(args)
}

// sandboxEnv is a server with a workspace, an allow_all session in it and
// a stream, to run commands in and read their tool.finished.
type sandboxEnv struct {
	*env
	ws   proto.Workspace
	s    *stream
	sess proto.Session
}

func newSandboxEnv(t *testing.T) *sandboxEnv {
	e := startEnv(t)
	ws := e.createWorkspace()
	return &sandboxEnv{env: e, ws: ws, s: e.openStream(ws.ID, newClientID(), ""), sess: e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})}
}

// run runs command in session sid (the env's own when "") and returns what
// bash answered.
func (e *sandboxEnv) run(sid, command string) proto.ToolFinished {
	e.t.Helper()
	if sid == "" {
		sid = e.sess.ID
	}
	tf, _ := e.ruleRun(e.s, e.ws.ID, sid, bashCall(command), "")
	return tf
}

// refused asserts that command fails, showing nothing of secret, and that
// control, the same command on the workspace's side, works and shows
// want: a missing program or a wrong path cannot pass for a refusal.
func (e *sandboxEnv) refused(command, secret, control, want string) proto.ToolFinished {
	e.t.Helper()
	tf := e.run("", command)
	assert.True(e.t, tf.IsError, "%s was not refused: %s", command, tf.Content)
	if secret != "" {
		assert.NotContains(e.t, tf.Content, secret, "%s", command)
	}
	assert.Equal(e.t, sandbox.ModeWorkspace, tf.Sandbox)
	ok := e.run("", control)
	assert.False(e.t, ok.IsError, "the control %s failed: %s", control, ok.Content)
	assert.Contains(e.t, ok.Content, want, "the control %s", control)
	return tf
}

// secretFile writes a file holding a secret of its own.
func secretFile(t *testing.T, dir, name string) (path, secret string) {
	t.Helper()
	secret = "SECRET-" + strings.ToUpper(strings.TrimSuffix(name, filepath.Ext(name))) + "-" + newClientID()[:8]
	path = filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(path, []byte(secret+"\n"), 0o600))
	return path, secret
}

// countingListener is a TCP listener that counts the connections it accepts.
func countingListener(t *testing.T) (port string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted = new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

// Under the default sandbox a command, and what it starts, reads and
// writes the workspace and its $TMPDIR, and nothing of the server, the
// home directory, other directories, other workspaces or the network.
func TestSandboxConfinesCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home) // the server's, which its commands inherit
	t.Setenv("OPENAI_API_KEY", "sk-sandbox-test-key")
	sshKey, sshSecret := secretFile(t, filepath.Join(home, ".ssh"), "id_rsa")
	e := newSandboxEnv(t)

	var health proto.Health
	e.must(http.StatusOK, "GET", "/v1/health", nil, &health)
	require.True(t, health.Sandbox.Available, "%+v", health.Sandbox)
	assert.Contains(t, health.Sandbox.Mechanism, "landlock")
	assert.Equal(t, proto.SandboxSettings{Sandbox: "workspace", SandboxRead: []string{}, SandboxWrite: []string{}}, e.sess.SandboxSettings)

	dataDir := e.cfg.DataDir
	token, tokenSecret := secretFile(t, dataDir, "token")
	db := filepath.Join(dataDir, "tandem.db")
	require.FileExists(t, db)
	other := t.TempDir()
	otherFile, otherSecret := secretFile(t, other, "secret.txt")
	otherWSDir := t.TempDir()
	otherWSFile, otherWSSecret := secretFile(t, otherWSDir, "notes.txt")
	var otherWS proto.Workspace
	e.must(http.StatusCreated, "POST", "/v1/workspaces", proto.CreateWorkspaceRequest{Path: otherWSDir}, &otherWS)
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "control.txt"), []byte("CONTROL\n"), 0o644))
	require.NoError(t, os.Symlink(other, filepath.Join(e.workDir, "link")))

	t.Run("the workspace and TMPDIR are writable", func(t *testing.T) {
		tf := e.run("", `echo inside > made.txt && cat made.txt && echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "TMPDIR=$TMPDIR"`)
		require.False(t, tf.IsError, "%s", tf.Content)
		assert.Equal(t, sandbox.ModeWorkspace, tf.Sandbox)
		assert.Contains(t, tf.Content, "inside\ntmp\n")
		assert.Contains(t, tf.Content, "TMPDIR="+filepath.Join(dataDir, "tmp", e.sess.ID))
		assert.FileExists(t, filepath.Join(e.workDir, "made.txt"))
	})

	t.Run("reading outside fails", func(t *testing.T) {
		for _, c := range []struct{ path, secret string }{
			{token, tokenSecret}, {db, ""}, {otherFile, otherSecret}, {sshKey, sshSecret}, {otherWSFile, otherWSSecret},
			{filepath.Join(e.workDir, "link", "secret.txt"), otherSecret},
		} {
			tf := e.refused("cat "+c.path, c.secret, "cat control.txt", "CONTROL")
			assert.Contains(t, tf.Content, "Permission denied", "%s", c.path)
		}
		e.refused("ls "+dataDir, "tandem.db", "ls .", "control.txt")
	})

	t.Run("writing outside fails", func(t *testing.T) {
		outsideTmp, err := os.MkdirTemp("", "tandem-sandbox-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(outsideTmp) })
		for _, dir := range []string{dataDir, other, filepath.Join(home, ".ssh"), outsideTmp, os.TempDir(), otherWSDir, filepath.Join(e.workDir, "link")} {
			name := "pwned-" + newClientID()[:8]
			e.refused(fmt.Sprintf("echo x > %s", filepath.Join(dir, name)), "", fmt.Sprintf("echo x > %s && echo wrote", name), "wrote")
			assert.NoFileExists(t, filepath.Join(dir, name))
			assert.FileExists(t, filepath.Join(e.workDir, name))
		}
		e.refused("rm "+otherFile, "", "echo y > gone.txt && rm gone.txt && echo removed", "removed")
		assert.FileExists(t, otherFile)
	})

	t.Run("children are confined too", func(t *testing.T) {
		e.refused(fmt.Sprintf("sh -c 'cat %s'", otherFile), otherSecret, "sh -c 'cat control.txt'", "CONTROL")
		e.refused(fmt.Sprintf(`/usr/bin/python3 -c 'print(open("%s").read())'`, sshKey), sshSecret,
			`/usr/bin/python3 -c 'print(open("control.txt").read())'`, "CONTROL")
		e.refused(fmt.Sprintf(`/usr/bin/python3 -c 'open("%s", "w").write("x")'`, filepath.Join(other, "py-pwned")), "",
			`/usr/bin/python3 -c 'open("py-made", "w").write("x"); print("made")'`, "made")
		assert.NoFileExists(t, filepath.Join(other, "py-pwned"))
		e.refused(fmt.Sprintf("(sleep 0.1; cat %s) & wait $!", otherFile), otherSecret, "(sleep 0.1; cat control.txt) & wait $!", "CONTROL")
	})

	t.Run("the workspace's .tandem is read-only", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(e.workDir, ".tandem", "config.json"), []byte("{}\n"), 0o644))
		tf := e.refused("echo '{\"sandbox\":\"off\"}' > .tandem/config.json", "", "cat .tandem/config.json && echo '{}' > not-tandem.json && echo ok", "ok")
		assert.Contains(t, tf.Content, "Read-only file system")
		e.refused("mv .tandem tandem-moved", "", "mkdir d1 && mv d1 d2 && echo moved", "moved")
		e.refused("touch .tandem/new", "", "touch new && echo touched", "touched")
		data, err := os.ReadFile(filepath.Join(e.workDir, ".tandem", "config.json"))
		require.NoError(t, err)
		assert.Equal(t, "{}\n", string(data))
	})

	t.Run("no network", func(t *testing.T) {
		port, accepted := countingListener(t)
		u, err := url.Parse(e.ts.URL)
		require.NoError(t, err)
		for _, p := range []string{port, u.Port()} {
			tf := e.refused(fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%s && echo connected", p), "connected", "exec 3<control.txt && echo opened", "opened")
			assert.Contains(t, tf.Content, "sandbox_network", "the result says which setting lifts it")
			e.refused(fmt.Sprintf(`/usr/bin/python3 -c 'import socket; socket.create_connection(("127.0.0.1", %s)); print("connected")'`, p), "connected",
				`/usr/bin/python3 -c 'import socket; a, b = socket.socketpair(); a.send(b"x"); print("paired", b.recv(1))'`, "paired")
		}
		// A listen() without bind() binds a port all the same.
		e.refused(`/usr/bin/python3 -c 'import socket; s = socket.socket(); s.listen(); print("listening", s.getsockname())'`, "listening",
			`/usr/bin/python3 -c 'import socket; print("made", socket.socketpair()[0].family)'`, "made")
		assert.Zero(t, accepted.Load(), "the listener saw a connection")
	})

	t.Run("no signal reaches the server", func(t *testing.T) {
		pid := os.Getpid()
		for _, sig := range []string{"-0", "-STOP"} {
			e.refused(fmt.Sprintf("kill %s %d && echo signaled", sig, pid), "signaled",
				fmt.Sprintf("sleep 30 & p=$!; kill %s $p && kill -CONT $p && kill $p && echo signaled", sig), "signaled")
		}
		e.refused(fmt.Sprintf("cat /proc/%d/cmdline /proc/%d/environ", pid, pid), "sk-sandbox-test-key", "cat /proc/self/cmdline && echo read", "read")
	})

	t.Run("no capability, no secret", func(t *testing.T) {
		tf := e.run("", `grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status; echo "key=[${OPENAI_API_KEY:-}] token=[${TANDEM_TOKEN:-}] home=[$HOME]"`)
		require.False(t, tf.IsError, "%s", tf.Content)
		for _, set := range []string{"CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			assert.Contains(t, tf.Content, set+":\t0000000000000000", "%s", tf.Content)
		}
		assert.Contains(t, tf.Content, "key=[] token=[] home=["+home+"]")
	})

	t.Run("read-only", func(t *testing.T) {
		var s proto.Session
		e.must(http.StatusOK, "PATCH", "/v1/workspaces/"+e.ws.ID+"/sessions/"+e.sess.ID, map[string]any{"sandbox": "read-only"}, &s)
		assert.Equal(t, "read-only", s.Sandbox)
		tf := e.run("", "echo x > ro.txt")
		assert.True(t, tf.IsError, "%s", tf.Content)
		assert.Equal(t, sandbox.ModeReadOnly, tf.Sandbox)
		assert.NoFileExists(t, filepath.Join(e.workDir, "ro.txt"))
		ok := e.run("", `cat control.txt && echo x > "$TMPDIR/ro.txt" && echo tmp-ok`)
		assert.False(t, ok.IsError, "%s", ok.Content)
		assert.Contains(t, ok.Content, "CONTROL\ntmp-ok")
		e.must(http.StatusOK, "PATCH", "/v1/workspaces/"+e.ws.ID+"/sessions/"+e.sess.ID, map[string]any{"sandbox": "workspace"}, &s)
	})

	t.Run("an owner's off and network", func(t *testing.T) {
		off := e.createSession(e.ws.ID, map[string]any{"permission_mode": "allow_all", "sandbox": "off"})
		tf := e.run(off.ID, "cat "+otherFile)
		require.False(t, tf.IsError, "%s", tf.Content)
		assert.Contains(t, tf.Content, otherSecret)
		assert.Equal(t, sandbox.ModeOff, tf.Sandbox)

		port, accepted := countingListener(t)
		netSess := e.createSession(e.ws.ID, map[string]any{"permission_mode": "allow_all", "sandbox_network": true})
		assert.True(t, netSess.SandboxNetwork)
		tf = e.run(netSess.ID, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%s && echo connected", port))
		require.False(t, tf.IsError, "%s", tf.Content)
		assert.Contains(t, tf.Content, "connected")
		assert.Equal(t, int64(1), accepted.Load())
		still := e.run(netSess.ID, "cat "+otherFile) // the network, not the files
		assert.True(t, still.IsError, "%s", still.Content)
	})

	t.Run("deleting the session removes its TMPDIR", func(t *testing.T) {
		tmp := filepath.Join(dataDir, "tmp", e.sess.ID)
		require.DirExists(t, tmp)
		e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+e.ws.ID+"/sessions/"+e.sess.ID, nil, nil)
		assert.NoDirExists(t, tmp)
	})
}

// Widening the sandbox is the owner's: a member's create or PATCH that
// widens is 403 and changes nothing, a member's narrowing works, and a
// member's fork or import of an owner's wider session gets the defaults.
func TestSandboxWideningIsTheOwners(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	_, member := e.person("mia", "member")
	base := "/v1/workspaces/" + ws.ID + "/sessions"

	for _, body := range []map[string]any{
		{"sandbox": "off"}, {"sandbox_network": true}, {"sandbox_read": []string{"/srv"}}, {"sandbox_write": []string{"/srv"}},
	} {
		status, raw := e.as(member, "POST", base, body, nil)
		require.Equal(t, http.StatusForbidden, status, "%v: %s", body, raw)
		assert.Equal(t, proto.CodeForbidden, errorCode(t, raw))
		assert.Contains(t, string(raw), "role member may not")
	}
	var list proto.SessionList
	e.must(http.StatusOK, "GET", base, nil, &list)
	assert.Empty(t, list.Sessions, "a refused create made a session")

	var mine proto.Session
	status, raw := e.as(member, "POST", base, map[string]any{"sandbox": "read-only"}, &mine)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	assert.Equal(t, "read-only", mine.Sandbox)
	for _, body := range []map[string]any{{"sandbox": "workspace"}, {"sandbox": "off"}, {"sandbox_network": true}} {
		status, raw = e.as(member, "PATCH", base+"/"+mine.ID, body, nil)
		require.Equal(t, http.StatusForbidden, status, "%v: %s", body, raw)
	}
	e.must(http.StatusOK, "GET", base+"/"+mine.ID, nil, &mine)
	assert.Equal(t, "read-only", mine.Sandbox, "a refused PATCH changed the session")

	// The owner widens; the member may narrow again.
	wide := e.createSession(ws.ID, map[string]any{"sandbox": "off", "sandbox_network": true, "sandbox_read": []string{"/srv"}})
	assert.Equal(t, proto.SandboxSettings{Sandbox: "off", SandboxNetwork: true, SandboxRead: []string{"/srv"}, SandboxWrite: []string{}}, wide.SandboxSettings)
	var narrowed proto.Session
	status, raw = e.as(member, "PATCH", base+"/"+wide.ID, map[string]any{"sandbox_network": false}, &narrowed)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	assert.False(t, narrowed.SandboxNetwork)
	assert.Equal(t, "off", narrowed.Sandbox)

	var fork proto.Session
	status, raw = e.as(member, "POST", base+"/"+wide.ID+"/fork", map[string]any{}, &fork)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	assert.Equal(t, proto.SandboxSettings{Sandbox: "workspace", SandboxRead: []string{}, SandboxWrite: []string{}}, fork.SandboxSettings)
	var ownerFork proto.Session
	e.must(http.StatusCreated, "POST", base+"/"+wide.ID+"/fork", map[string]any{}, &ownerFork)
	assert.Equal(t, "off", ownerFork.Sandbox)

	var doc proto.Export
	e.must(http.StatusOK, "GET", base+"/"+wide.ID+"/export", nil, &doc)
	require.NotNil(t, doc.Settings.Sandbox)
	assert.Equal(t, "off", *doc.Settings.Sandbox)
	var imported proto.Session
	status, raw = e.as(member, "POST", base+"/import", doc, &imported)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	assert.Equal(t, "workspace", imported.Sandbox)
	var ownerImport proto.Session
	e.must(http.StatusCreated, "POST", base+"/import", doc, &ownerImport)
	assert.Equal(t, "off", ownerImport.Sandbox)
}

// A workspace's .tandem/config.json may narrow the sandbox, not widen it.
func TestSandboxWorkspaceConfigOnlyNarrows(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	dir := filepath.Join(e.workDir, ".tandem")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"sandbox": "read-only"}`), 0o644))
	s := e.createSession(ws.ID, nil)
	assert.Equal(t, "read-only", s.Sandbox)

	for _, body := range []string{`{"sandbox": "off"}`, `{"sandbox_network": true}`, `{"sandbox_write": ["/srv"]}`} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(body), 0o644))
		status, raw := e.do("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", body, raw)
		assert.Equal(t, proto.CodeInvalidConfig, errorCode(t, raw))
		assert.Contains(t, string(raw), filepath.Join(".tandem", "config.json"))
	}
}

// Where the helper finds no Landlock, a command under the default sandbox
// does not run, and its result says why and names sandbox "off"; an
// owner's "off" runs it.
func TestSandboxRefusesWithoutLandlock(t *testing.T) {
	t.Setenv(sandbox.NoLandlockEnv, "1")
	e := newSandboxEnv(t)
	var health proto.Health
	e.must(http.StatusOK, "GET", "/v1/health", nil, &health)
	assert.False(t, health.Sandbox.Available)
	assert.Equal(t, "none", health.Sandbox.Mechanism)
	assert.Contains(t, health.Sandbox.Reason, "Landlock")

	tf := e.run("", "touch ran.txt")
	assert.True(t, tf.IsError)
	assert.Contains(t, tf.Content, "Landlock")
	assert.Contains(t, tf.Content, `sandbox: "off"`)
	assert.NoFileExists(t, filepath.Join(e.workDir, "ran.txt"), "the command ran")

	var s proto.Session
	e.must(http.StatusOK, "PATCH", "/v1/workspaces/"+e.ws.ID+"/sessions/"+e.sess.ID, map[string]any{"sandbox": "off"}, &s)
	tf = e.run("", "touch ran.txt && echo ran")
	assert.False(t, tf.IsError, "%s", tf.Content)
	assert.Equal(t, sandbox.ModeOff, tf.Sandbox)
	assert.FileExists(t, filepath.Join(e.workDir, "ran.txt"))
}

// A stdio MCP server whose entry says "sandbox": "workspace" runs confined
// as the agent's commands do: it reads the workspace, not a directory
// outside, and sees no other process.
func TestSandboxConfinesAnMCPServerThatAsks(t *testing.T) {
	other := t.TempDir()
	otherFile, otherSecret := secretFile(t, other, "secret.txt")
	bin, err := filepath.Abs(os.Args[0])
	require.NoError(t, err)
	e := startEnv(t, withConfigFile(t, `{
		"sandbox_read": [`+strconvQuote(filepath.Dir(bin))+`],
		"permissions": [{"tool": "mcp__*", "decision": "allow"}]
	}`))
	control := filepath.Join(e.workDir, "control.txt")
	require.NoError(t, os.WriteFile(control, []byte("CONTROL\n"), 0o644))
	var entry map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdioServer("serve")), &entry))
	entry["sandbox"] = "workspace"
	free := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(stdioServer("serve")), &free))
	servers, err := json.Marshal(map[string]any{"boxed": entry, "free": free})
	require.NoError(t, err)
	writeWorkspaceConfig(t, e.workDir, `{"mcp_servers": `+string(servers)+`}`)

	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		if n == 0 {
			return step{toolCalls: []scriptedCall{
				{ID: "boxed_out", Name: "mcp__boxed__read", Args: fmt.Sprintf(`{"path": %q}`, otherFile)},
				{ID: "boxed_in", Name: "mcp__boxed__read", Args: fmt.Sprintf(`{"path": %q}`, control)},
				{ID: "boxed_pid", Name: "mcp__boxed__pid", Args: `{}`},
				{ID: "free_out", Name: "mcp__free__read", Args: fmt.Sprintf(`{"path": %q}`, otherFile)},
			}}
		}
		return step{text: []string{"done"}}
	})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	acc := e.prompt(ws.ID, sess.ID, "read them")
	rc, _ := s.collect(acc.RunID, func(pr proto.PermissionRequest) { t.Errorf("asked: %+v", pr) })
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	reqs := fake.Requests()
	require.Len(t, reqs, 2)
	got := toolResults(reqs[1])
	assert.Contains(t, got["boxed_out"], "permission denied")
	assert.NotContains(t, got["boxed_out"], otherSecret)
	assert.Equal(t, "CONTROL\n", got["boxed_in"], "the confined server reads the workspace")
	assert.Equal(t, "1", got["boxed_pid"], "the confined server is the first process of its own PID namespace")
	assert.Contains(t, got["free_out"], otherSecret, "a server that does not ask runs as its owner configured it")
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A canceled run's confined command tree is gone within 2 s: the shell,
// a child that ignores SIGTERM, and one that left the process group with
// setsid (which the PID namespace still holds).
func TestSandboxCancelKillsTheWholeTree(t *testing.T) {
	e := newSandboxEnv(t)
	marker := "tandem-sbx-" + newClientID()[:8]
	cmd := fmt.Sprintf(`setsid bash -c 'exec -a %[1]s-setsid sleep 100' & (trap '' TERM; exec -a %[1]s-deaf sleep 100) & exec -a %[1]s-shell sleep 100`, marker)
	acc := e.prompt(e.ws.ID, e.sess.ID, bashCall(cmd))
	e.s.until(proto.EventToolStarted)
	for _, p := range []string{"-setsid", "-deaf", "-shell"} {
		eventually(t, func() bool { return processRunning(marker + p) }, "the tree runs: "+p)
	}
	e.cancel(e.ws.ID, e.sess.ID)
	canceledAt := time.Now()
	rc, _ := e.s.completion(acc.RunID)
	assert.Equal(t, proto.OutcomeCanceled, rc.Outcome)
	assert.Less(t, time.Since(canceledAt), 2*time.Second, "tools die within 2 s of a cancel")
	assert.False(t, processRunning(marker), "a process of the tree outlived the cancel")
}
