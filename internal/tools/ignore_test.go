package tools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ignoredTree is a workspace with .gitignore files at two levels.
func ignoredTree(t *testing.T) Env {
	t.Helper()
	env := newEnv(t)
	writeFile(t, env, ".gitignore", "# build output\nnode_modules/\n*.log\n!keep.log\n/build\n")
	writeFile(t, env, "sub/.gitignore", "secret.txt\r\n!debug.log\n")
	for _, f := range []string{
		"main.go", "app.log", "keep.log",
		"node_modules/pkg/index.js",
		"build/out.go", "sub/build/x.go",
		"sub/secret.txt", "sub/deep/secret.txt", "sub/debug.log", "sub/other.log",
		"other/secret.txt",
		".git/config",
	} {
		writeFile(t, env, f, "needle\n")
	}
	return env
}

func TestSearchesSkipWhatGitignoreIgnores(t *testing.T) {
	env := ignoredTree(t)
	visible := []string{".gitignore", "keep.log", "main.go", "other/secret.txt", "sub/.gitignore", "sub/build/x.go", "sub/debug.log"}

	r := run(t, env, "glob", map[string]any{"pattern": "**/*"})
	requireOK(t, r)
	require.Equal(t, strings.Join(visible, "\n"), r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "needle"})
	requireOK(t, r)
	var want []string
	for _, f := range visible {
		if !strings.HasSuffix(f, ".gitignore") {
			want = append(want, f+":1:needle")
		}
	}
	require.Equal(t, strings.Join(want, "\n"), r.Content)

	r = run(t, env, "ls", map[string]any{})
	requireOK(t, r)
	require.Equal(t, ".gitignore\nkeep.log\nmain.go\nother/\nsub/\n[3 entries ignored by .gitignore not shown; give one as path to list it]", r.Content)

	r = run(t, env, "ls", map[string]any{"path": "sub"})
	requireOK(t, r)
	require.Equal(t, ".gitignore\nbuild/\ndebug.log\ndeep/\n[2 entries ignored by .gitignore not shown; give one as path to list it]", r.Content)

	// A search that finds nothing says that it skipped something.
	r = run(t, env, "glob", map[string]any{"pattern": "**/*.js"})
	requireOK(t, r)
	require.Equal(t, "No files matched. [6 paths ignored by .gitignore were skipped; give one as path to search it]", r.Content)
}

func TestSearchesEnterAnIgnoredPathTheyAreGiven(t *testing.T) {
	env := ignoredTree(t)
	// A nested .gitignore inside the named directory still applies.
	writeFile(t, env, "node_modules/pkg/.gitignore", "dist/\n")
	writeFile(t, env, "node_modules/pkg/dist/bundle.js", "needle\n")

	r := run(t, env, "ls", map[string]any{"path": "node_modules"})
	requireOK(t, r)
	require.Equal(t, "pkg/", r.Content)

	r = run(t, env, "glob", map[string]any{"pattern": "**/*.js", "path": "node_modules"})
	requireOK(t, r)
	require.Equal(t, "node_modules/pkg/index.js", r.Content)

	r = run(t, env, "glob", map[string]any{"pattern": "node_modules/**/*.js"})
	requireOK(t, r)
	require.Equal(t, "node_modules/pkg/index.js", r.Content, "the pattern's leading directory names it")

	r = run(t, env, "grep", map[string]any{"pattern": "needle", "path": "build"})
	requireOK(t, r)
	require.Equal(t, "build/out.go:1:needle", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "needle", "path": "app.log"})
	requireOK(t, r)
	require.Equal(t, "app.log:1:needle", r.Content, "a file named outright is searched")

	r = run(t, env, "grep", map[string]any{"pattern": "needle", "path": "node_modules/pkg"})
	requireOK(t, r)
	require.Equal(t, "node_modules/pkg/index.js:1:needle", r.Content)

	r = run(t, env, "glob", map[string]any{"pattern": ".git/*"})
	requireOK(t, r)
	require.Equal(t, ".git/config", r.Content)

	r = run(t, env, "ls", map[string]any{"path": ".git"})
	requireOK(t, r)
	require.Equal(t, "config", r.Content)
}
