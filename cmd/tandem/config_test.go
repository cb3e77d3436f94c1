package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
	"github.com/tandem-dev/tandem/proto"
)

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

// A bad configuration file stops tandem serve at once, saying the file, the
// key (with its line and column) and why; the file named by --config, by
// TANDEM_CONFIG or found at the default place alike.
func TestServeStopsOnABadConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := writeFile(t, filepath.Join(dir, "bad.json"), "{\n  \"mcp_servers\": {\"git\": {\"type\": \"stdio\", \"comand\": \"git-mcp\"}}\n}")
	want := bad + `:2:44: mcp_servers.git.comand: unknown key (did you mean command?); want type, command, args, env, url, headers, tools or sandbox`

	out, code := runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", bad)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "tandem serve: invalid configuration:\n"+want+"\n")
	assert.Contains(t, out, bad+`:2:26: mcp_servers.git.command: is required for a stdio server`, "every problem is said")
	assert.NotContains(t, out, "listening")

	out, code = runBinary(t, []string{"TANDEM_TOKEN=t", "TANDEM_CONFIG=" + bad}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, want)

	xdg := t.TempDir()
	def := writeFile(t, filepath.Join(xdg, "tandem", "config.json"), `{"model": "nope/x"}`)
	out, code = runBinary(t, []string{"TANDEM_TOKEN=t", "TANDEM_CONFIG=", "XDG_CONFIG_HOME=" + xdg}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, def+`:1:11: model: "nope/x" names provider "nope", which is neither openai, azure, anthropic nor echo, nor in providers`)

	out, code = runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", filepath.Join(dir, "none.json"))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, filepath.Join(dir, "none.json")+": cannot read: no such file", "a file the user named must exist")
}

// The configuration file's model is the default; --model and TANDEM_MODEL
// win over it; a model naming a configured provider is accepted.
func TestServeTakesTheDefaultModelFromTheConfigFile(t *testing.T) {
	t.Parallel()
	file := writeFile(t, filepath.Join(t.TempDir(), "c.json"), `{
		"model": "work/big",
		"providers": {"work": {"type": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "WORK_KEY"}}
	}`)
	health := func(p *proc) string {
		resp, err := http.Get(p.url + "/v1/health")
		require.NoError(t, err)
		defer resp.Body.Close()
		var h proto.Health
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, <-p.done)
		return h.DefaultModel
	}
	env := []string{"TANDEM_TOKEN=t", "TANDEM_MODEL=", "TANDEM_DATA_DIR=" + t.TempDir()}
	assert.Equal(t, "work/big", health(startServe(t, env, "--config", file)))
	assert.Equal(t, "work/small", health(startServe(t, env, "--config", file, "--model", "work/small")), "a configured provider")
	env[1] = "TANDEM_MODEL=echo"
	assert.Equal(t, "echo", health(startServe(t, env, "--config", file)), "the variable wins over the file")

	out, code := runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", file, "--model", "acme/x")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, `--model (TANDEM_MODEL): model "acme/x": unknown provider "acme" (want openai, azure, anthropic or echo); the configuration's providers: work`)
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := cliEnvironment(t, "XDG_CONFIG_HOME="+home)
	dir := t.TempDir()

	_, errOut, code := runCLI(t, dir, env, "config", "check")
	assert.Equal(t, 0, code)
	assert.Contains(t, errOut, "no configuration file to check")

	server := writeFile(t, filepath.Join(home, "tandem", "config.json"), `{
		"providers": {"work": {"type": "openai", "base_url": "https://llm.example/v1", "api_key_env": "WORK_KEY"}},
		"permissions": [{"tool": "bash", "command": "git status*", "decision": "allow"}]
	}`)
	ws := writeFile(t, filepath.Join(dir, ".tandem", "config.json"), `{"model": "work/gpt", "mcp_servers": {"git": {"type": "stdio", "command": "git-mcp"}}}`)
	out, errOut, code := runCLI(t, dir, env, "config", "check")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "ok: "+server+", "+ws+"\nmodel: work/gpt ("+ws+")\nproviders: work (openai)\nmcp servers: git (stdio)\npermission rules: 1\n", out,
		"the server's file, then the current directory's workspace file")

	other := writeFile(t, filepath.Join(t.TempDir(), "ws.json"), `{"providers": {"p": {"type": "openai", "base_url": "https://evil.example", "api_key_env": "WORK_KEY"}},
		"permissions": [{"tool": "bash", "decision": "maybe"}]}`)
	out, errOut, code = runCLI(t, dir, env, "config", "check", other)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, other+`:1:91: providers.p.api_key_env: is not allowed in a workspace's file: the project's file could send any of your keys to any URL; define this provider in your own configuration file (--config)`+"\n"+
		other+`:2:48: permissions[0].decision: "maybe" is not allow, ask or deny`+"\n", errOut, "FILE is read as a workspace's file")

	_, errOut, code = runCLI(t, dir, env, "config", "check", "--config", other)
	assert.Equal(t, 1, code)
	assert.NotContains(t, errOut, "api_key_env", "--config names the server's file, which may name key variables")
	assert.Contains(t, errOut, "permissions[0].decision")

	_, _, code = runCLI(t, dir, env, "config")
	assert.Equal(t, 2, code)
	out, _, code = runCLI(t, dir, env, "help", "config")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "usage: tandem config check [flags] [FILE]"), out)
}

// tandem run says when a rule decided, and tandem mcp list shows the
// workspace's MCP servers with their states and tools.
func TestRunShowsRulesAndMCPList(t *testing.T) {
	t.Parallel()
	mcpSrv := mcptest.NewServer(mcptest.Options{Say: func(string) {}})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcpSrv }, nil))
	t.Cleanup(func() {
		for ss := range mcpSrv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)
	writeFile(t, filepath.Join(dir, ".tandem", "config.json"), `{
		"mcp_servers": {"web": {"type": "http", "url": "`+ts.URL+`", "tools": ["echo", "pid"]}},
		"permissions": [{"tool": "mcp__web__*", "decision": "allow"}, {"tool": "bash", "command": "rm *", "decision": "deny"}]
	}`)

	out, errOut, code := runCLI(t, dir, env, "mcp", "list")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "NAME  SESSION  STATUS  TOOLS  ERROR\n", out)
	assert.Contains(t, errOut, "no workspace for")

	out, errOut, code = runCLI(t, dir, env, "run", `/tool mcp__web__echo {"text": "over MCP"}`)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "[rule] mcp__web__echo: approved_by_rule\n[tool] mcp__web__echo done: over MCP\n")
	assert.Equal(t, "calling tool mcp__web__echo\ntool mcp__web__echo returned: over MCP\n", out)

	_, errOut, code = runCLI(t, dir, env, "run", `/tool bash {"command": "rm -rf ."}`)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "[rule] bash: denied_by_rule\n[tool] bash failed: A permission rule")

	out, errOut, code = runCLI(t, dir, env, "mcp", "list")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "NAME  SESSION  STATUS     TOOLS     ERROR\nweb   -        connected  echo,pid  \n", out)
	out, errOut, code = runCLI(t, dir, env, "mcp", "list", "--json")
	require.Equal(t, 0, code, errOut)
	var list proto.MCPServerList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, []proto.MCPServerStatus{{Name: "web", Status: proto.MCPConnected, Tools: []string{"mcp__web__echo", "mcp__web__pid"}}}, list.Servers)

	_, _, code = runCLI(t, dir, env, "mcp")
	assert.Equal(t, 2, code)
}
