package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// newEnv returns an Env rooted in a fresh, symlink-resolved temp directory.
func newEnv(t *testing.T) Env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return Env{Root: root}
}

// outsideDir is a directory that is not inside env's root, for escape tests.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}

func toolByName(t *testing.T, name string) Tool {
	t.Helper()
	for _, tl := range Builtins() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no built-in tool %q", name)
	return nil
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// run calls the named tool with args marshalled from v.
func run(t *testing.T, env Env, name string, v any) Result {
	t.Helper()
	return toolByName(t, name).Run(context.Background(), env, mustJSON(t, v))
}

// writeFile creates rel under env's root with content, creating parents.
func writeFile(t *testing.T, env Env, rel, content string) string {
	t.Helper()
	p := filepath.Join(env.Root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func requireOK(t *testing.T, r Result) {
	t.Helper()
	require.False(t, r.IsError, "unexpected error result: %s", r.Content)
}

func requireErr(t *testing.T, r Result, contains string) {
	t.Helper()
	require.True(t, r.IsError, "expected an error result, got: %s", r.Content)
	require.Contains(t, r.Content, contains)
}
