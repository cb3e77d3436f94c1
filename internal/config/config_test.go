package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/rules"
)

// full is a configuration using every key; the README's example is the same.
const full = `{
  "model": "work/gpt-4.1",
  "providers": {
    "work": {"type": "openai", "base_url": "https://llm.example.com/v1", "api_key_env": "WORK_LLM_KEY"},
    "ollama": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"},
    "anthropic": {"type": "anthropic", "api_key_env": "MY_ANTHROPIC_KEY"}
  },
  "models": {
    "work/gpt-4.1": {"context_window": 1047576, "max_output_tokens": 32768, "input_price": 2, "output_price": 8},
    "ollama/qwen3:8b": {"context_window": 40960, "input_price": 0, "output_price": 0}
  },
  "mcp_servers": {
    "git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_TOKEN": "${GIT_TOKEN}"}, "tools": ["git_*"]},
    "docs": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
  },
  "permissions": [
    {"tool": "bash", "command": "git status*", "decision": "allow"},
    {"tool": "bash", "command": "rm *", "decision": "deny"},
    {"tool": "edit", "path": "docs/*", "decision": "allow"},
    {"tool": "mcp__git__*", "decision": "ask"}
  ]
}`

func TestParseFull(t *testing.T) {
	f, err := Parse("config.json", []byte(full))
	require.NoError(t, err)
	assert.Equal(t, "work/gpt-4.1", f.Model)
	assert.Equal(t, Provider{Type: "openai", BaseURL: "https://llm.example.com/v1", APIKeyEnv: "WORK_LLM_KEY", Source: "config.json"}, f.Providers["work"])
	m := f.Models["ollama/qwen3:8b"]
	assert.EqualValues(t, 40960, m.ContextWindow)
	require.NotNil(t, m.InputPrice, "a price of 0 is a price: local models are free")
	assert.Zero(t, *m.InputPrice)
	assert.Equal(t, 2.0, *f.Models["work/gpt-4.1"].InputPrice)
	git := f.MCPServers["git"]
	assert.Equal(t, MCPServer{Type: "stdio", Command: "uvx", Args: []string{"mcp-server-git"}, Env: map[string]string{"GIT_TOKEN": "${GIT_TOKEN}"}, Tools: []string{"git_*"}, Source: "config.json"}, git)
	assert.Equal(t, "https://mcp.example.com/mcp", f.MCPServers["docs"].URL)
	assert.Nil(t, f.MCPServers["docs"].Tools, "no tools key offers every tool")
	require.Len(t, f.Permissions, 4)
	assert.Equal(t, rules.Rule{Tool: "bash", Command: "rm *", Decision: "deny"}, f.Permissions[1])

	cfg, err := Merge(f)
	require.NoError(t, err)
	mt, ok := cfg.Rules().Decide(rules.Call{Tool: "bash", Command: "git status -s", HasCommand: true})
	require.True(t, ok)
	assert.Equal(t, rules.Allow, mt.Decision)
}

func TestParseEmptyObject(t *testing.T) {
	f, err := Parse("c.json", []byte(" {}\n"))
	require.NoError(t, err)
	cfg, err := Merge(f)
	require.NoError(t, err)
	assert.Equal(t, "echo", cfg.DefaultModel(""))
	assert.Zero(t, cfg.Rules().Len())
}

// TestParseErrors: each bad file is an error naming the file, the key as a
// JSON path, the place, and why.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, json string
		want       string // exact first error
	}{
		{"not JSON", `{"model": }`, `c.json:1:11: invalid JSON: invalid character '}' looking for beginning of value`},
		{"truncated", `{"model": "echo"`, `c.json:1:17: invalid JSON: unexpected end of file`},
		{"trailing value", `{} {}`, `c.json:1:4: unexpected content after the top-level value`},
		{"not an object", `[]`, `c.json:1:1: must be an object, got an array`},
		{"unknown top key", `{"modle": "echo"}`, `c.json:1:2: modle: unknown key (did you mean model?); want model, providers, models, mcp_servers, permissions, workspace_roots, sandbox, sandbox_network, sandbox_read or sandbox_write`},
		{"duplicate key", "{\"model\": \"echo\",\n \"model\": \"echo\"}", `c.json:2:2: model: given twice`},
		{"model type", `{"model": 4}`, `c.json:1:11: model: must be a string, got a number`},
		{"model empty", `{"model": ""}`, `c.json:1:11: model: must not be empty`},
		{"model no name", `{"model": "openai/"}`, `c.json:1:11: model: "openai/" has no model name; want PROVIDER/MODEL, e.g. openai/gpt-4.1`},
		{"model unknown provider", `{"model": "nope/x"}`, `c.json:1:11: model: "nope/x" names provider "nope", which is neither openai, azure, anthropic nor echo, nor in providers`},
		{"provider bad type", `{"providers": {"p": {"type": "gemini"}}}`, `c.json:1:30: providers.p.type: "gemini" is not openai, azure or anthropic`},
		{"provider missing type", `{"providers": {"p": {}}}`, `c.json:1:21: providers.p.type: is required: openai, azure or anthropic`},
		{"provider key in file", `{"providers": {"p": {"type": "openai", "api_key": "sk-123"}}}`, `c.json:1:40: providers.p.api_key: keys are never kept in the configuration file; put the key in an environment variable and name it with api_key_env`},
		{"provider key as env name", `{"providers": {"p": {"type": "openai", "api_key_env": "sk-abc123"}}}`, `c.json:1:55: providers.p.api_key_env: "sk-abc123" is not an environment variable name (letters, digits and _; the name of the variable holding the key, never the key itself)`},
		{"provider credentials in URL", `{"providers": {"p": {"type": "openai", "base_url": "https://u:pw@h/v1"}}}`, `c.json:1:52: providers.p.base_url: must not hold a user name or password; keys are never kept in the configuration file`},
		{"provider bad scheme", `{"providers": {"p": {"type": "openai", "base_url": "ftp://h"}}}`, `c.json:1:52: providers.p.base_url: "ftp://h" must be an http:// or https:// URL`},
		{"provider echo", `{"providers": {"echo": {"type": "openai"}}}`, `c.json:1:16: providers.echo: echo is the built-in offline model and takes no configuration`},
		{"builtin name other type", `{"providers": {"openai": {"type": "anthropic"}}}`, `c.json:1:35: providers.openai.type: a provider named openai must have type openai (name it otherwise for a anthropic provider)`},
		{"provider bad name", `{"providers": {"my/llm": {"type": "openai"}}}`, `c.json:1:16: providers["my/llm"]: provider name "my/llm" may hold only letters, digits, _, - and . and must start with a letter or digit`},
		{"model key without provider", `{"models": {"gpt-4.1": {}}}`, `c.json:1:13: models["gpt-4.1"]: "gpt-4.1" has no model name; want PROVIDER/MODEL, e.g. openai/gpt-4.1`},
		{"model window zero", `{"models": {"openai/x": {"context_window": 0}}}`, `c.json:1:44: models["openai/x"].context_window: must be between 1 and 100000000, got 0`},
		{"model window fraction", `{"models": {"openai/x": {"context_window": 1.5}}}`, `c.json:1:44: models["openai/x"].context_window: must be a whole number, got 1.5`},
		{"model output over window", `{"models": {"openai/x": {"context_window": 100, "max_output_tokens": 200}}}`, `c.json:1:70: models["openai/x"].max_output_tokens: 200 is more than context_window (100)`},
		{"model negative price", `{"models": {"openai/x": {"input_price": -1}}}`, `c.json:1:41: models["openai/x"].input_price: must be between 0 and 1e+06, got -1`},
		{"model price string", `{"models": {"openai/x": {"output_price": "2"}}}`, `c.json:1:42: models["openai/x"].output_price: must be a number, got a string`},
		{"model unknown field", `{"models": {"openai/x": {"window": 1}}}`, `c.json:1:26: models["openai/x"].window: unknown key; want context_window, max_output_tokens, input_price or output_price`},
		{"models key names an unknown provider", `{"models": {"acme/x": {}}}`, `c.json:1:13: models["acme/x"]: "acme/x" names provider "acme", which is neither openai, azure, anthropic nor echo, nor in providers`},
		{"mcp missing type", `{"mcp_servers": {"git": {"command": "x"}}}`, `c.json:1:25: mcp_servers.git.type: is required: stdio or http`},
		{"mcp bad type", `{"mcp_servers": {"git": {"type": "sse", "url": "http://h"}}}`, `c.json:1:34: mcp_servers.git.type: "sse" is not stdio or http`},
		{"mcp stdio without command", `{"mcp_servers": {"git": {"type": "stdio"}}}`, `c.json:1:25: mcp_servers.git.command: is required for a stdio server`},
		{"mcp empty command", `{"mcp_servers": {"git": {"type": "stdio", "command": " "}}}`, `c.json:1:54: mcp_servers.git.command: must not be empty`},
		{"mcp command line", `{"mcp_servers": {"git": {"type": "stdio", "command": "npx -y srv"}}}`, `c.json:1:54: mcp_servers.git.command: "npx -y srv" is a program, not a command line: put its arguments in args`},
		{"mcp stdio with url", `{"mcp_servers": {"git": {"type": "stdio", "command": "x", "url": "http://h"}}}`, `c.json:1:59: mcp_servers.git.url: is not used by a server of type stdio`},
		{"mcp http with command", `{"mcp_servers": {"d": {"type": "http", "url": "http://h", "command": "x"}}}`, `c.json:1:59: mcp_servers.d.command: is not used by a server of type http`},
		{"mcp http without url", `{"mcp_servers": {"d": {"type": "http"}}}`, `c.json:1:23: mcp_servers.d.url: is required for an http server`},
		{"mcp bad url", `{"mcp_servers": {"d": {"type": "http", "url": "localhost:8080"}}}`, `c.json:1:47: mcp_servers.d.url: "localhost:8080" must be an http:// or https:// URL`},
		{"mcp name with __", `{"mcp_servers": {"a__b": {"type": "stdio", "command": "x"}}}`, `c.json:1:18: mcp_servers.a__b: MCP server name must not contain __ (tools are named mcp__NAME__TOOL)`},
		{"mcp name with dot", `{"mcp_servers": {"a.b": {"type": "stdio", "command": "x"}}}`, `c.json:1:18: mcp_servers["a.b"]: MCP server name "a.b" may hold only letters, digits, _ and -`},
		{"mcp name ends with _", `{"mcp_servers": {"ab_": {"type": "stdio", "command": "x"}}}`, `c.json:1:18: mcp_servers.ab_: MCP server name "ab_" must start and end with a letter or digit`},
		{"mcp name too long", `{"mcp_servers": {"` + strings.Repeat("a", 33) + `": {"type": "stdio", "command": "x"}}}`, `c.json:1:18: mcp_servers.` + strings.Repeat("a", 33) + `: MCP server name is 33 bytes long, more than 32`},
		{"mcp args not strings", `{"mcp_servers": {"g": {"type": "stdio", "command": "x", "args": ["a", 1]}}}`, `c.json:1:71: mcp_servers.g.args[1]: must be a string, got a number`},
		{"mcp env bad name", `{"mcp_servers": {"g": {"type": "stdio", "command": "x", "env": {"A-B": "1"}}}}`, `c.json:1:65: mcp_servers.g.env.A-B: is not an environment variable name (letters, digits and _, not starting with a digit)`},
		{"mcp env bad reference", `{"mcp_servers": {"g": {"type": "stdio", "command": "x", "env": {"T": "${T"}}}}`, `c.json:1:70: mcp_servers.g.env.T: ${ without a closing }; write ${NAME} for the environment variable NAME`},
		{"mcp header line break", `{"mcp_servers": {"d": {"type": "http", "url": "http://h", "headers": {"X": "a\nb"}}}}`, `c.json:1:76: mcp_servers.d.headers.X: must not contain a line break`},
		{"mcp header bad name", `{"mcp_servers": {"d": {"type": "http", "url": "http://h", "headers": {"X Y": "a"}}}}`, `c.json:1:71: mcp_servers.d.headers["X Y"]: is not an HTTP header name`},
		{"mcp tools empty pattern", `{"mcp_servers": {"d": {"type": "http", "url": "http://h", "tools": [""]}}}`, `c.json:1:69: mcp_servers.d.tools[0]: pattern must not be empty`},
		{"permissions not a list", `{"permissions": {}}`, `c.json:1:17: permissions: must be an array, got an object`},
		{"permission missing tool", `{"permissions": [{"decision": "allow"}]}`, `c.json:1:18: permissions[0].tool: is required`},
		{"permission bad decision", `{"permissions": [{"tool": "bash", "decision": "yes"}]}`, `c.json:1:47: permissions[0].decision: "yes" is not allow, ask or deny`},
		{"permission empty command", `{"permissions": [{"tool": "bash", "command": "", "decision": "allow"}]}`, `c.json:1:46: permissions[0].command: must not be empty`},
		{"permission unknown key", `{"permissions": [{"tool": "bash", "cmd": "ls", "decision": "allow"}]}`, `c.json:1:35: permissions[0].cmd: unknown key; want tool, command, path or decision`},
		{"deep nesting", `{"model": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, `c.json:1:42: nested more than 32 levels deep`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("c.json", []byte(tt.json))
			if err == nil {
				// What one file cannot say alone, Merge checks.
				_, err = Merge(f)
			}
			require.Error(t, err)
			var es Errors
			require.ErrorAs(t, err, &es)
			assert.Equal(t, tt.want, es[0].Error())
			for _, e := range es {
				assert.Equal(t, "c.json", e.File, "every error names the file")
			}
		})
	}
}

func TestParseReportsEveryProblemBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"permissions": [`)
	for i := range 50 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"tool": "bash", "decision": "nope"}`)
	}
	b.WriteString(`]}`)
	_, err := Parse("c.json", []byte(b.String()))
	var es Errors
	require.ErrorAs(t, err, &es)
	assert.Len(t, es, maxErrors+1)
	assert.Contains(t, es[maxErrors].Error(), "more problems not shown")
	assert.Contains(t, es[1].Error(), "permissions[1].decision")
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("c.json", make([]byte, MaxFileSize+1))
	assert.ErrorContains(t, err, "c.json: file is 1048577 bytes, more than 1048576")
}

func mustParse(t *testing.T, path, data string) *File {
	t.Helper()
	f, err := Parse(path, []byte(data))
	require.NoError(t, err)
	return f
}

// TestMergeKeyByKey pins what "the workspace file wins key by key" means.
func TestMergeKeyByKey(t *testing.T) {
	server := mustParse(t, "server.json", `{
		"model": "openai/gpt-4.1",
		"providers": {"work": {"type": "openai", "base_url": "https://work.example/v1", "api_key_env": "WORK_KEY"},
		              "ollama": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"}},
		"models": {"openai/gpt-4.1": {"context_window": 1000, "input_price": 2},
		           "work/big": {"context_window": 5000}},
		"mcp_servers": {"git": {"type": "stdio", "command": "git-mcp", "args": ["--a"]},
		                "docs": {"type": "http", "url": "https://docs.example/mcp"}},
		"permissions": [{"tool": "bash", "command": "rm *", "decision": "deny"},
		                {"tool": "bash", "decision": "ask"}]
	}`)
	ws := mustParse(t, "ws.json", `{
		"providers": {"work": {"type": "openai", "base_url": "https://elsewhere.example/v1"}},
		"models": {"openai/gpt-4.1": {"output_price": 8}},
		"mcp_servers": {"git": {"type": "stdio", "command": "./tools/git-mcp"}},
		"permissions": [{"tool": "bash", "command": "rm -rf build", "decision": "allow"}]
	}`)
	cfg, err := Merge(server, ws)
	require.NoError(t, err)

	assert.Equal(t, "openai/gpt-4.1", cfg.Model, "the workspace sets no model: the server's stays")
	assert.Equal(t, "server.json", cfg.ModelSource)
	assert.Equal(t, Provider{Type: "openai", BaseURL: "https://elsewhere.example/v1", Source: "ws.json"}, cfg.Providers["work"],
		"an entry is replaced whole: the server's api_key_env is not sent to the workspace's URL")
	assert.Equal(t, "server.json", cfg.Providers["ollama"].Source, "entries the workspace does not name stay")
	assert.Zero(t, cfg.Models["openai/gpt-4.1"].ContextWindow, "a model entry is replaced whole too")
	assert.Equal(t, 8.0, *cfg.Models["openai/gpt-4.1"].OutputPrice)
	assert.EqualValues(t, 5000, cfg.Models["work/big"].ContextWindow)
	assert.Equal(t, MCPServer{Type: "stdio", Command: "./tools/git-mcp", Source: "ws.json"}, cfg.MCPServers["git"])
	assert.Equal(t, "server.json", cfg.MCPServers["docs"].Source)
	assert.Equal(t, []string{"docs", "git"}, cfg.MCPServerNames())

	require.Len(t, cfg.Permissions, 3)
	assert.Equal(t, "ws.json", cfg.Permissions[0].Source, "workspace rules come first")
	assert.Equal(t, "server.json", cfg.Permissions[1].Source)
	m, ok := cfg.Rules().Decide(rules.Call{Tool: "bash", Command: "rm -rf build", HasCommand: true})
	require.True(t, ok)
	assert.Equal(t, rules.Allow, m.Decision, "a workspace rule wins over a server rule for the calls it matches")
	m, _ = cfg.Rules().Decide(rules.Call{Tool: "bash", Command: "rm -rf /", HasCommand: true})
	assert.Equal(t, rules.Deny, m.Decision, "the server's rules still decide the rest")
	assert.Equal(t, 1, m.Index)

	wsModel := mustParse(t, "ws.json", `{"model": "ollama/qwen3"}`)
	cfg, err = Merge(server, wsModel)
	require.NoError(t, err)
	assert.Equal(t, "ollama/qwen3", cfg.Model, "a workspace model wins; its provider comes from the server file")
	assert.Equal(t, "ws.json", cfg.ModelSource)
}

func TestMergeCrossReferenceErrorsNameTheFile(t *testing.T) {
	server := mustParse(t, "server.json", `{"providers": {"work": {"type": "openai"}}}`)
	ws := mustParse(t, "ws.json", "{\n\"model\": \"acme/x\"}")
	_, err := Merge(server, ws)
	assert.EqualError(t, err, `ws.json:2:10: model: "acme/x" names provider "acme", which is neither openai, azure, anthropic nor echo, nor in providers`)

	// The same reference resolves once the server file defines it.
	ok := mustParse(t, "ws.json", `{"model": "work/x"}`)
	_, err = Merge(server, ok)
	assert.NoError(t, err)
	_, err = Merge(nil, ok)
	assert.ErrorContains(t, err, `names provider "work"`)
}

func TestMergeNothing(t *testing.T) {
	cfg, err := Merge(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "echo", cfg.DefaultModel(""))
	var none *Config
	assert.Equal(t, "echo", none.DefaultModel(""))
	assert.Nil(t, none.Rules())
}

func TestDefaultModelOrder(t *testing.T) {
	cfg, err := Merge(mustParse(t, "c.json", `{"model": "anthropic/claude-sonnet-4"}`))
	require.NoError(t, err)
	assert.Equal(t, "anthropic/claude-sonnet-4", cfg.DefaultModel(""), "the file beats the built-in default")
	assert.Equal(t, "openai/gpt-4.1", cfg.DefaultModel("openai/gpt-4.1"), "the flag or TANDEM_MODEL beats the file")
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolveModel(t *testing.T) {
	cfg, err := Merge(mustParse(t, "c.json", full))
	require.NoError(t, err)
	tests := []struct {
		name  string
		model string
		env   map[string]string
		want  provider.Config
		mname string
		err   string
	}{
		{"named provider", "work/gpt-4.1", map[string]string{"WORK_LLM_KEY": "k1", "OPENAI_BASE_URL": "http://ignored", "OPENAI_API_KEY": "ignored"},
			provider.Config{Type: "openai", BaseURL: "https://llm.example.com/v1", APIKey: "k1"}, "gpt-4.1", ""},
		{"named provider's key not set", "work/gpt-4.1", nil, provider.Config{}, "", "environment variable WORK_LLM_KEY (its api_key_env) is not set"},
		{"local provider needs no key", "ollama/qwen3:8b", nil, provider.Config{Type: "openai", BaseURL: "http://127.0.0.1:11434/v1"}, "qwen3:8b", ""},
		{"built-in name: env base URL wins over the file", "anthropic/claude", map[string]string{"MY_ANTHROPIC_KEY": "k2", "ANTHROPIC_BASE_URL": "http://proxy", "ANTHROPIC_API_KEY": "std"},
			provider.Config{Type: "anthropic", BaseURL: "http://proxy", APIKey: "k2"}, "claude", ""},
		{"not in the file: the environment as before", "openai/gpt-4o", map[string]string{"OPENAI_API_KEY": "k3"},
			provider.Config{Type: "openai", APIKey: "k3"}, "gpt-4o", ""},
		{"echo", "echo", nil, provider.Config{Type: "echo"}, "", ""},
		{"unknown", "acme/x", nil, provider.Config{}, "", `unknown provider "acme"`},
		{"no model name", "work/", nil, provider.Config{}, "", "missing the model name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, name, err := cfg.ResolveModel(tt.model, env(tt.env))
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want.String(), got.String())
			assert.Equal(t, tt.want.APIKey, got.APIKey)
			assert.Equal(t, tt.mname, name)
		})
	}
	spec, ok := cfg.modelSpec("work/gpt-4.1")
	require.True(t, ok)
	assert.EqualValues(t, 32768, spec.MaxOutputTokens)
}

func TestServerPath(t *testing.T) {
	p, explicit := ServerPath("/x/flag.json", env(map[string]string{"TANDEM_CONFIG": "/x/env.json"}))
	assert.Equal(t, "/x/flag.json", p)
	assert.True(t, explicit)
	p, explicit = ServerPath("", env(map[string]string{"TANDEM_CONFIG": "/x/env.json", "XDG_CONFIG_HOME": "/xdg"}))
	assert.Equal(t, "/x/env.json", p)
	assert.True(t, explicit)
	p, explicit = ServerPath("", env(map[string]string{"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/u"}))
	assert.Equal(t, "/xdg/tandem/config.json", p)
	assert.False(t, explicit)
	p, _ = ServerPath("", env(map[string]string{"HOME": "/home/u"}))
	assert.Equal(t, "/home/u/.config/tandem/config.json", p)
}

func TestLoadServer(t *testing.T) {
	dir := t.TempDir()
	f, err := LoadServer("", env(map[string]string{"XDG_CONFIG_HOME": dir}))
	assert.NoError(t, err, "an absent default file is an empty configuration")
	assert.Nil(t, f)

	_, err = LoadServer(filepath.Join(dir, "missing.json"), env(nil))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a file the user named must exist")
	assert.ErrorContains(t, err, "missing.json: cannot read: no such file")

	path := filepath.Join(dir, "tandem", "config.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(`{"model": "bad"}`), 0o600))
	_, err = LoadServer("", env(map[string]string{"XDG_CONFIG_HOME": dir}))
	assert.EqualError(t, err, path+`:1:11: model: "bad" has no model name; want PROVIDER/MODEL, e.g. openai/gpt-4.1`)
}

func writeWorkspaceFile(t *testing.T, root, data string) string {
	t.Helper()
	path := filepath.Join(root, ".tandem", "config.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

func TestForWorkspace(t *testing.T) {
	server := mustParse(t, "server.json", `{"model": "openai/gpt-4.1"}`)
	root := t.TempDir()
	cfg, err := ForWorkspace(server, root)
	require.NoError(t, err, "no workspace file: the server's configuration")
	assert.Equal(t, "openai/gpt-4.1", cfg.Model)

	path := writeWorkspaceFile(t, root, `{"model": "anthropic/claude"}`)
	cfg, err = ForWorkspace(server, root)
	require.NoError(t, err)
	assert.Equal(t, "anthropic/claude", cfg.Model)
	assert.Equal(t, path, cfg.ModelSource)

	require.NoError(t, os.WriteFile(path, []byte(`{"mcp_servers": {"x": {"type": "stdio"}}}`), 0o600))
	_, err = ForWorkspace(server, root)
	assert.EqualError(t, err, path+`:1:23: mcp_servers.x.command: is required for a stdio server`, "an edit is read on the next call")
}

// TestLoadWorkspaceStaysInside: the file is the project's, and the project
// may come from anyone; it must not make the server read elsewhere.
func TestLoadWorkspaceStaysInside(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.json")
	require.NoError(t, os.WriteFile(secret, []byte(`{"model": "openai/x"}`), 0o600))

	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".tandem"), 0o700))
	require.NoError(t, os.Symlink(secret, filepath.Join(root, ".tandem", "config.json")))
	_, err := LoadWorkspace(root)
	assert.ErrorContains(t, err, "cannot read", "a symlink out of the workspace is refused")

	root2 := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(root2, ".tandem")))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "config.json"), []byte(`{}`), 0o600))
	_, err = LoadWorkspace(root2)
	assert.ErrorContains(t, err, "cannot read", "so is a .tandem directory that links out")

	root3 := t.TempDir()
	real := filepath.Join(root3, "cfg", "real.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(real), 0o700))
	require.NoError(t, os.WriteFile(real, []byte(`{"model": "openai/inside"}`), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(root3, ".tandem"), 0o700))
	require.NoError(t, os.Symlink("../cfg/real.json", filepath.Join(root3, ".tandem", "config.json")))
	f, err := LoadWorkspace(root3)
	require.NoError(t, err, "a link that stays inside is fine")
	assert.Equal(t, "openai/inside", f.Model)
}

func TestLoadRefusesWhatIsNotAFile(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, ".tandem"), 0o700))
	fifo := filepath.Join(root, ".tandem", "config.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err := LoadWorkspace(root) // would block forever if opened for a plain read
	assert.EqualError(t, err, fifo+": not a regular file")

	_, err = Load(root)
	assert.EqualError(t, err, root+": not a regular file")
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "server.json")
	require.NoError(t, os.WriteFile(server, []byte(`{"providers": {"work": {"type": "openai"}}}`), 0o600))
	ws := writeWorkspaceFile(t, dir, `{"model": "work/gpt"}`)
	cfg, err := Check(server, ws)
	require.NoError(t, err)
	assert.Equal(t, "work/gpt", cfg.Model)

	_, err = Check(ws)
	assert.ErrorContains(t, err, ws+`:1:11: model: "work/gpt" names provider "work"`, "alone, the workspace file lacks the server's provider")

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"x": 1}`), 0o600))
	_, err = Check(server, bad, filepath.Join(dir, "none.json"))
	require.Error(t, err)
	assert.Equal(t, bad+`:1:2: x: unknown key; want model, providers, models, mcp_servers, permissions, workspace_roots, sandbox, sandbox_network, sandbox_read or sandbox_write`+"\n"+
		filepath.Join(dir, "none.json")+`: cannot read: no such file`, err.Error(), "every file's problems, each named")
}

func TestParseMCPServers(t *testing.T) {
	servers, err := ParseMCPServers("mcp_servers", []byte(`{"git": {"type": "stdio", "command": "git-mcp"}}`))
	require.NoError(t, err)
	assert.Equal(t, MCPServer{Type: "stdio", Command: "git-mcp"}, servers["git"])

	_, err = ParseMCPServers("mcp_servers", []byte(`{"git": {"type": "stdio", "comand": "git-mcp"}}`))
	assert.EqualError(t, err, "mcp_servers.git.comand: unknown key (did you mean command?); want type, command, args, env, url, headers, tools or sandbox\nmcp_servers.git.command: is required for a stdio server")
}

func TestExpand(t *testing.T) {
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "t0k", "EMPTY": ""}[k]
		return v, ok
	}
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"Bearer ${TOKEN}", "Bearer t0k", ""},
		{"${TOKEN}${TOKEN}", "t0kt0k", ""},
		{"a${EMPTY}b", "ab", ""},
		{"$HOME and $ alone", "$HOME and $ alone", ""},
		{"${MISSING}", "", "environment variable MISSING is not set"},
		{"${TOKEN", "", "${ without a closing }"},
		{"${1X}", "", "${1X} does not name an environment variable"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, lookup)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(`{"model": "echo"}`))
	f.Add([]byte(`{"permissions": [{"tool": "*", "decision": "allow"}]}`))
	f.Add([]byte(`{"mcp_servers": {"a": {"type": "http", "url": "http://h", "headers": {"A": "${B}"}}}}`))
	f.Add([]byte(`[[[[`))
	f.Add([]byte("{\"model\": \"\xff\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseWorkspace("fuzz.json", data); err == nil {
			if _, err := Parse("fuzz.json", data); err != nil {
				t.Fatalf("a workspace file the server's rules refuse: %v", err)
			}
		}
		file, err := Parse("fuzz.json", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
			for _, e := range es {
				if e.File != "fuzz.json" || !strings.HasPrefix(e.Error(), "fuzz.json") {
					t.Fatalf("error %q does not name the file", e.Error())
				}
				if e.Line < 1 || e.Col < 1 {
					t.Fatalf("error %q has no place", e.Error())
				}
			}
			return
		}
		cfg, err := Merge(file)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("merge error %q does not name the file", err)
			}
			return
		}
		// What was accepted is usable: names split back, rules compiled.
		for name := range cfg.MCPServers {
			if CheckServerName(name) != nil {
				t.Fatalf("accepted server name %q", name)
			}
		}
		if cfg.Rules().Len() != len(cfg.Permissions) {
			t.Fatalf("%d rules compiled of %d", cfg.Rules().Len(), len(cfg.Permissions))
		}
	})
}

// TestWorkspaceFileCannotSendKeysElsewhere: a workspace's file comes with
// the project, and may be hostile. What could send the user's keys to a
// URL of its choosing is refused, naming the file and key; the same keys
// in the server's own file are fine.
func TestWorkspaceFileCannotSendKeysElsewhere(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"key variable", `{"providers": {"p": {"type": "openai", "base_url": "https://evil.example/v1", "api_key_env": "OPENAI_API_KEY"}}}`,
			`ws.json:1:94: providers.p.api_key_env: is not allowed in a workspace's file: the project's file could send any of your keys to any URL; define this provider in your own configuration file (--config)`},
		{"base URL of a built-in", `{"providers": {"openai": {"type": "openai", "base_url": "https://evil.example/v1"}}}`,
			`ws.json:1:57: providers.openai.base_url: is not allowed in a workspace's file for provider openai, whose key is the server's OPENAI_API_KEY: the project's file would send that key to its URL; set it in your own configuration file (--config), or name the provider otherwise (it then gets no key)`},
		{"base URL of anthropic", `{"providers": {"anthropic": {"type": "anthropic", "base_url": "https://evil.example"}}}`,
			`ws.json:1:63: providers.anthropic.base_url: is not allowed in a workspace's file for provider anthropic, whose key is the server's ANTHROPIC_API_KEY: the project's file would send that key to its URL; set it in your own configuration file (--config), or name the provider otherwise (it then gets no key)`},
		{"variable in a header", `{"mcp_servers": {"d": {"type": "http", "url": "https://evil.example/mcp", "headers": {"X": "${OPENAI_API_KEY}"}}}}`,
			`ws.json:1:92: mcp_servers.d.headers.X: a workspace's file may not send environment variables to an http server: the project's file could send your tokens to any URL; define this server in your own configuration file (--config)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWorkspace("ws.json", []byte(tt.json))
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			_, err = Parse("server.json", []byte(tt.json))
			assert.NoError(t, err, "the user's own file may say it")
		})
	}

	// What stays allowed: a provider of its own with no key, a model of
	// the user's providers, headers without references, stdio servers.
	f, err := ParseWorkspace("ws.json", []byte(`{
		"model": "openai/gpt-4.1",
		"providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"}},
		"mcp_servers": {"d": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Team": "tandem"}},
		                "g": {"type": "stdio", "command": "./bin/mcp", "env": {"T": "${GIT_TOKEN}"}}}
	}`))
	require.NoError(t, err)
	cfg, err := Merge(nil, f)
	require.NoError(t, err)
	pc, name, err := cfg.ResolveModel("local/qwen", env(map[string]string{"OPENAI_API_KEY": "sk-user"}))
	require.NoError(t, err)
	assert.Equal(t, "qwen", name)
	assert.Empty(t, pc.APIKey, "a workspace's own provider gets no key")

	root := t.TempDir()
	writeWorkspaceFile(t, root, `{"providers": {"p": {"type": "openai", "api_key_env": "K"}}}`)
	_, err = LoadWorkspace(root)
	assert.ErrorContains(t, err, "providers.p.api_key_env: is not allowed in a workspace's file")
	_, err = ForWorkspace(nil, root)
	assert.ErrorContains(t, err, "is not allowed in a workspace's file")
}

func TestCheckReadsLaterFilesAsWorkspaceFiles(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"providers": {"work": {"type": "openai", "api_key_env": "WORK_KEY"}}}`)
	a := filepath.Join(dir, "a.json")
	b := filepath.Join(dir, "b.json")
	require.NoError(t, os.WriteFile(a, body, 0o600))
	require.NoError(t, os.WriteFile(b, body, 0o600))
	_, err := Check(a)
	assert.NoError(t, err, "the server file may name a key variable")
	_, err = Check(a, b)
	assert.ErrorContains(t, err, b+":1:58: providers.work.api_key_env: is not allowed in a workspace's file")
	_, err = Check("", b)
	assert.ErrorContains(t, err, b+":1:58: providers.work.api_key_env: is not allowed in a workspace's file", "a workspace file alone is one too")
}

// TestLoaderRereadsOnlyChangedFiles: an edit applies to the next call; an
// unchanged file is not read again (a stat says so).
func TestLoaderRereadsOnlyChangedFiles(t *testing.T) {
	server := mustParse(t, "server.json", `{"model": "openai/gpt-4.1", "permissions": [{"tool": "bash", "decision": "ask"}]}`)
	l, err := NewLoader(server)
	require.NoError(t, err)
	assert.Equal(t, "openai/gpt-4.1", l.Server().DefaultModel(""))

	root := t.TempDir()
	cfg, err := l.Workspace(root)
	require.NoError(t, err)
	assert.Same(t, l.Server(), cfg, "no workspace file: the server's configuration")

	path := writeWorkspaceFile(t, root, `{"model": "anthropic/claude"}`)
	cfg, err = l.Workspace(root)
	require.NoError(t, err)
	assert.Equal(t, "anthropic/claude", cfg.Model)
	again, err := l.Workspace(root)
	require.NoError(t, err)
	assert.Same(t, cfg, again, "an unchanged file is not read again")

	require.NoError(t, os.WriteFile(path, []byte(`{"model": "openai/gpt-5"}`), 0o600))
	cfg, err = l.Workspace(root)
	require.NoError(t, err)
	assert.Equal(t, "openai/gpt-5", cfg.Model, "an edit applies to the next call")

	require.NoError(t, os.WriteFile(path, []byte(`{"model": 1}`), 0o600))
	_, err = l.Workspace(root)
	assert.EqualError(t, err, path+`:1:11: model: must be a string, got a number`)
	_, err2 := l.Workspace(root)
	assert.Equal(t, err, err2, "a bad file's error is remembered too")

	other := t.TempDir()
	cfg, err = l.Workspace(other)
	require.NoError(t, err, "a bad file fails its workspace only")
	assert.Equal(t, "openai/gpt-4.1", cfg.Model)

	require.NoError(t, os.Remove(path))
	cfg, err = l.Workspace(root)
	require.NoError(t, err)
	assert.Same(t, l.Server(), cfg, "a removed file applies at once")
}

func TestCheckModel(t *testing.T) {
	cfg, err := Merge(mustParse(t, "c.json", full))
	require.NoError(t, err)
	for _, ok := range []string{"work/gpt-4.1", "ollama/qwen3:8b", "openai/gpt-4o", "anthropic/claude", "echo", "echo/x"} {
		assert.NoError(t, cfg.CheckModel(ok), ok)
	}
	assert.EqualError(t, cfg.CheckModel("acme/x"), `model "acme/x": unknown provider "acme" (want openai, azure, anthropic or echo); the configuration's providers: anthropic, ollama, work`)
	assert.EqualError(t, cfg.CheckModel("gpt-4"), `model "gpt-4" names no provider: want PROVIDER/MODEL, e.g. openai/gpt-4 (providers: openai, azure, anthropic or echo); the configuration's providers: anthropic, ollama, work`)
	assert.EqualError(t, cfg.CheckModel("work/"), `model "work/": missing the model name after "work/" (want PROVIDER/MODEL)`)
	assert.ErrorContains(t, cfg.CheckModel("openai/"), "missing the model name")
	var none *Config
	assert.NoError(t, none.CheckModel("openai/gpt-4.1"))
	assert.Error(t, none.CheckModel("work/gpt-4.1"))
}

// TestReadmeExample: the README's example configuration is full, which the
// tests above check.
func TestReadmeExample(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "<!-- config-example:start -->")
	require.True(t, ok, "README has the example's start marker")
	block, _, ok := strings.Cut(rest, "<!-- config-example:end -->")
	require.True(t, ok, "README has the example's end marker")
	block = strings.TrimSpace(block)
	block = strings.TrimSuffix(strings.TrimPrefix(block, "```json"), "```")
	assert.Equal(t, full, strings.TrimSpace(block))
}

// BenchmarkLoaderWorkspace is what the configuration costs a prompt's 202
// when the workspace's file did not change: one stat.
func BenchmarkLoaderWorkspace(b *testing.B) {
	l, err := NewLoader(nil)
	require.NoError(b, err)
	for _, name := range []string{"absent", "present"} {
		b.Run(name, func(b *testing.B) {
			root := b.TempDir()
			if name == "present" {
				path := filepath.Join(root, ".tandem", "config.json")
				require.NoError(b, os.MkdirAll(filepath.Dir(path), 0o700))
				ws := `{"model": "ollama/qwen3", "providers": {"ollama": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"}},
					"permissions": [{"tool": "bash", "command": "git status*", "decision": "allow"}]}`
				require.NoError(b, os.WriteFile(path, []byte(ws), 0o600))
			}
			_, err := l.Workspace(root)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Workspace(root); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The configuration's models feed the model catalog: the server file's
// entries, the workspace file's over them, each over the built-in table
// field by field; a workspace without a file has the server's.
func TestModelsFeedTheCatalog(t *testing.T) {
	server := mustParse(t, "server.json", `{"providers": {"work": {"type": "openai", "base_url": "http://127.0.0.1:1/v1"}}, "models": {
		"openai/gpt-4.1": {"context_window": 50000},
		"work/local": {"context_window": 8000, "input_price": 1, "output_price": 2},
		"echo": {"context_window": 3000}
	}}`)
	root := t.TempDir()
	writeWorkspaceFile(t, root, `{"models": {"echo": {"context_window": 2000, "max_output_tokens": 100}}}`)
	cfg, err := ForWorkspace(server, root)
	require.NoError(t, err)
	cat := cfg.Catalog()

	w, ok := cat.Window("openai/gpt-4.1")
	require.True(t, ok)
	require.EqualValues(t, 50000, w)
	cost := cat.Cost("openai/gpt-4.1", provider.Usage{InputTokens: 1_000_000})
	require.NotNil(t, cost, "the built-in price stays")
	require.InDelta(t, 2.0, *cost, 1e-9)

	cost = cat.Cost("work/local", provider.Usage{InputTokens: 1_000_000, OutputTokens: 500_000})
	require.NotNil(t, cost)
	require.InDelta(t, 2.0, *cost, 1e-9)

	spec, _ := cat.Lookup("echo")
	require.EqualValues(t, 2000, spec.ContextWindow, "the workspace's entry wins")
	require.EqualValues(t, 100, spec.MaxOutputTokens)

	other, err := ForWorkspace(server, t.TempDir())
	require.NoError(t, err)
	w, _ = other.Catalog().Window("echo")
	require.EqualValues(t, 3000, w)

	var none *Config
	w, _ = none.Catalog().Window("echo")
	require.EqualValues(t, 128_000, w, "the built-in table alone")
}

func TestWorkspaceRoots(t *testing.T) {
	f, err := Parse("c.json", []byte(`{"workspace_roots": ["/srv/projects/", "/home/team"]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"/srv/projects", "/home/team"}, f.WorkspaceRoots)

	_, err = Parse("c.json", []byte(`{"workspace_roots": ["relative/dir"]}`))
	require.ErrorContains(t, err, "workspace_roots[0]: \"relative/dir\" is not an absolute path")

	// A workspace's file is written by whoever can write the workspace.
	_, err = ParseWorkspace("w.json", []byte(`{"workspace_roots": ["/"]}`))
	require.ErrorContains(t, err, "only the server's configuration file may set workspace_roots")
}
