package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestBuiltins(t *testing.T) {
	var names []string
	perms := map[string]string{}
	for _, tl := range Builtins() {
		names = append(names, tl.Name())
		perms[tl.Name()] = tl.Permission()
		require.NotEmpty(t, tl.Description(), tl.Name())

		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		require.NoError(t, json.Unmarshal(tl.Schema(), &schema), tl.Name())
		require.Equal(t, "object", schema.Type, tl.Name())
		for _, r := range schema.Required {
			require.Contains(t, schema.Properties, r, tl.Name())
		}
	}
	require.Equal(t, []string{"view", "ls", "glob", "grep", "edit", "write", "bash"}, names)
	require.Equal(t, map[string]string{
		"view": "", "ls": "", "glob": "", "grep": "",
		"edit": "write", "write": "write", "bash": "shell",
	}, perms)

	// Exactly the argument names of the contract.
	props := map[string][]string{
		"view":  {"path", "offset", "limit"},
		"ls":    {"path"},
		"glob":  {"pattern", "path"},
		"grep":  {"pattern", "path", "include"},
		"edit":  {"path", "old_string", "new_string"},
		"write": {"path", "content"},
		"bash":  {"command", "timeout_ms"},
	}
	for _, tl := range Builtins() {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(tl.Schema(), &schema))
		var got []string
		for k := range schema.Properties {
			got = append(got, k)
		}
		require.ElementsMatch(t, props[tl.Name()], got, tl.Name())
	}
}

func TestBadArguments(t *testing.T) {
	env := newEnv(t)
	required := map[string]string{
		"view": "path", "glob": "pattern", "grep": "pattern",
		"edit": "path", "write": "path", "bash": "command",
	}
	for _, tl := range Builtins() {
		for _, raw := range []string{`not json`, `[1,2]`, `"str"`, `{"path": 5, "pattern": 5, "command": 5}`} {
			r := tl.Run(context.Background(), env, json.RawMessage(raw))
			requireErr(t, r, "invalid arguments")
			// Summary must cope with the same garbage.
			s, d := tl.Summary(env, json.RawMessage(raw))
			require.NotEmpty(t, s)
			require.NotNil(t, d)
		}
		if req, ok := required[tl.Name()]; ok {
			r := tl.Run(context.Background(), env, json.RawMessage(`{}`))
			requireErr(t, r, `missing required argument "`+req+`"`)
			r = tl.Run(context.Background(), env, nil)
			requireErr(t, r, "missing required argument")
		}
	}
	// Both strings of edit are required even though they may be empty.
	requireErr(t, run(t, env, "edit", map[string]any{"path": "x", "new_string": "y"}), `"old_string"`)
	requireErr(t, run(t, env, "edit", map[string]any{"path": "x", "old_string": ""}), `"new_string"`)
	requireErr(t, run(t, env, "write", map[string]any{"path": "x"}), `"content"`)
	requireErr(t, run(t, env, "view", map[string]any{"path": ""}), "must not be empty")
	requireErr(t, run(t, env, "view", map[string]any{"path": "x", "limit": 1.5}), "expected an integer")
}

func TestOptIntLenient(t *testing.T) {
	var a struct {
		A, B, C, D optInt
	}
	require.NoError(t, json.Unmarshal([]byte(`{"A": 10, "B": 10.0, "C": "7", "D": null}`), &a))
	require.Equal(t, optInt{set: true, v: 10}, a.A)
	require.Equal(t, optInt{set: true, v: 10}, a.B)
	require.Equal(t, optInt{set: true, v: 7}, a.C)
	require.False(t, a.D.set)
	require.Error(t, json.Unmarshal([]byte(`{"A": "x"}`), &a))
}

func TestSummaries(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "f.txt", "one\ntwo\nthree\n")

	s, d := toolByName(t, "view").Summary(env, mustJSON(t, map[string]any{"path": env.Root + "/f.txt"}))
	require.Equal(t, "View f.txt", s)
	require.Equal(t, "f.txt", d["path"])

	s, d = toolByName(t, "bash").Summary(env, mustJSON(t, map[string]any{"command": "go test ./...\necho done"}))
	require.Equal(t, "Run: go test ./... …", s)
	require.Equal(t, "go test ./...\necho done", d["command"])
	require.EqualValues(t, 120000, d["timeout_ms"])

	s, d = toolByName(t, "edit").Summary(env, mustJSON(t, map[string]any{"path": "f.txt", "old_string": "two", "new_string": "TWO"}))
	require.Equal(t, "Edit f.txt", s)
	require.Equal(t, "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three", d["diff"])

	// A failing edit still previews the intent, and says why it will fail.
	_, d = toolByName(t, "edit").Summary(env, mustJSON(t, map[string]any{"path": "f.txt", "old_string": "nope", "new_string": "x"}))
	require.Contains(t, d["error"], "not found")
	require.Contains(t, d["diff"], "-nope\n+x")

	s, d = toolByName(t, "write").Summary(env, mustJSON(t, map[string]any{"path": "f.txt", "content": "one\n2\nthree\n"}))
	require.Equal(t, "Overwrite f.txt (12 bytes)", s)
	require.Equal(t, "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three", d["diff"])

	s, d = toolByName(t, "write").Summary(env, mustJSON(t, map[string]any{"path": "new/g.txt", "content": "hi\n"}))
	require.Equal(t, "Create new/g.txt (3 bytes)", s)
	require.Equal(t, true, d["new_file"])
	require.Equal(t, "--- /dev/null\n+++ b/new/g.txt\n@@ -0,0 +1 @@\n+hi", d["diff"])

	_, d = toolByName(t, "write").Summary(env, mustJSON(t, map[string]any{"path": "../x", "content": "hi"}))
	require.Contains(t, d["error"], "outside the workspace")
}

func TestReadSummaries(t *testing.T) {
	env := newEnv(t)
	s, d := toolByName(t, "ls").Summary(env, nil)
	require.Equal(t, "List .", s)
	require.Equal(t, ".", d["path"])

	s, d = toolByName(t, "glob").Summary(env, mustJSON(t, map[string]any{"pattern": "**/*.go", "path": "src"}))
	require.Equal(t, "Glob **/*.go in src", s)
	require.Equal(t, map[string]any{"pattern": "**/*.go", "path": "src"}, d)

	s, d = toolByName(t, "grep").Summary(env, mustJSON(t, map[string]any{"pattern": "TODO", "include": "*.go", "path": "/etc"}))
	require.Equal(t, "Grep TODO in /etc", s)
	require.Equal(t, "*.go", d["include"])
	require.Contains(t, d["error"], "outside the workspace")
}

func TestCapContent(t *testing.T) {
	require.Equal(t, "short", capContent("short"))
	long := strings.Repeat("line of text\n", 5000)
	c := capContent(long)
	require.LessOrEqual(t, len(c), maxOutput+100)
	require.Contains(t, c, "[output truncated: showed ")
	require.True(t, utf8.ValidString(capContent(strings.Repeat("é", maxOutput))))
	require.Equal(t, "a\uFFFDb", capContent("a\xffb"))
}

func TestWalksStopOnCancel(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "a/b.txt", "x\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, args := range map[string]string{
		"grep": `{"pattern": "x"}`,
		"glob": `{"pattern": "**/*"}`,
		"view": `{"path": "a/b.txt"}`,
		"ls":   `{}`,
	} {
		r := toolByName(t, name).Run(ctx, env, json.RawMessage(args))
		requireErr(t, r, "canceled")
	}
}

// TestOutputsStayUnder64KiB drives each tool to its largest output: every
// result stays within 64 KiB (the agent's cut for any tool result) and ends
// with a note saying what was cut and how to read on.
func TestOutputsStayUnder64KiB(t *testing.T) {
	env := newEnv(t)
	long := strings.Repeat("y", 5000)
	var big strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&big, "%d %s NEEDLE\n", i, long)
	}
	writeFile(t, env, "big.txt", big.String())
	for i := range 1500 {
		writeFile(t, env, fmt.Sprintf("dir/%s%04d.txt", strings.Repeat("n", 200), i), "NEEDLE\n")
	}
	cases := []struct {
		name string
		args any
		note string
	}{
		{"view", map[string]any{"path": "big.txt"}, "call view with offset="},
		{"grep", map[string]any{"pattern": "NEEDLE"}, "results truncated"},
		{"glob", map[string]any{"pattern": "**/*.txt"}, "narrow the request"},
		{"ls", map[string]any{"path": "dir"}, "narrow the request"},
		{"bash", map[string]any{"command": "head -c 1000000 /dev/zero | tr '\\0' x"}, "read that with view"},
	}
	for _, c := range cases {
		r := run(t, env, c.name, c.args)
		require.False(t, r.IsError, "%s: %s", c.name, r.Content[:min(200, len(r.Content))])
		require.LessOrEqual(t, len(r.Content), 64<<10, c.name)
		require.Contains(t, r.Content, c.note, c.name)
	}
}
