package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestView(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "f.txt", "alpha\nbeta\r\ngamma\ndelta")

	r := run(t, env, "view", map[string]any{"path": "f.txt"})
	requireOK(t, r)
	require.Equal(t, "     1\talpha\n     2\tbeta\n     3\tgamma\n     4\tdelta", r.Content)

	r = run(t, env, "view", map[string]any{"path": filepath.Join(env.Root, "f.txt"), "offset": 2, "limit": 2})
	requireOK(t, r)
	require.Equal(t, "     2\tbeta\n     3\tgamma\n[showed lines 2-3; the file has more lines: call view with offset=4 to continue]", r.Content)

	r = run(t, env, "view", map[string]any{"path": "f.txt", "offset": 4})
	requireOK(t, r)
	require.Equal(t, "     4\tdelta", r.Content)

	requireErr(t, run(t, env, "view", map[string]any{"path": "f.txt", "offset": 9}), "past the end of f.txt, which has 4 lines")
	requireErr(t, run(t, env, "view", map[string]any{"path": "f.txt", "offset": -1}), "offset")
	requireErr(t, run(t, env, "view", map[string]any{"path": "f.txt", "limit": 0}), "limit")
	requireErr(t, run(t, env, "view", map[string]any{"path": "nope.txt"}), "file not found: nope.txt")
	requireErr(t, run(t, env, "view", map[string]any{"path": "."}), "is a directory")

	writeFile(t, env, "empty.txt", "")
	r = run(t, env, "view", map[string]any{"path": "empty.txt"})
	requireOK(t, r)
	require.Contains(t, r.Content, "empty")

	writeFile(t, env, "bin.dat", "PK\x03\x04\x00\x00binary")
	requireErr(t, run(t, env, "view", map[string]any{"path": "bin.dat"}), "binary")

	require.NoError(t, syscall.Mkfifo(filepath.Join(env.Root, "fifo"), 0o644))
	requireErr(t, run(t, env, "view", map[string]any{"path": "fifo"}), "not a regular file")
}

func TestViewBounds(t *testing.T) {
	env := newEnv(t)

	// A very long line is cut, not dropped.
	writeFile(t, env, "long.txt", strings.Repeat("x", 10_000)+"\nnext\n")
	r := run(t, env, "view", map[string]any{"path": "long.txt"})
	requireOK(t, r)
	require.Contains(t, r.Content, "[line truncated: 10000 bytes]")
	require.Contains(t, r.Content, "     2\tnext")
	require.Less(t, len(r.Content), 2500)

	// Default limit is 2000 lines.
	var b strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	writeFile(t, env, "many.txt", b.String())
	r = run(t, env, "view", map[string]any{"path": "many.txt"})
	requireOK(t, r)
	require.Contains(t, r.Content, "  2000\t2000\n")
	require.NotContains(t, r.Content, "\t2001\n")
	require.Contains(t, r.Content, "offset=2001")

	// The byte cap holds even when the line limit would allow more.
	line := strings.Repeat("y", 1000) + "\n"
	writeFile(t, env, "big.txt", strings.Repeat(line, 200))
	r = run(t, env, "view", map[string]any{"path": "big.txt"})
	requireOK(t, r)
	require.LessOrEqual(t, len(r.Content), maxOutput)
	require.Contains(t, r.Content, "[output truncated")
	require.Contains(t, r.Content, "call view with offset=")
}

func TestLs(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "b.txt", "")
	writeFile(t, env, "a/x.txt", "")
	writeFile(t, env, "c/d/e.txt", "")
	writeFile(t, env, ".hidden", "")
	require.NoError(t, os.Symlink("b.txt", filepath.Join(env.Root, "link")))

	r := run(t, env, "ls", map[string]any{})
	requireOK(t, r)
	require.Equal(t, ".hidden\na/\nb.txt\nc/\nlink -> b.txt", r.Content)

	r = run(t, env, "ls", map[string]any{"path": "c"})
	requireOK(t, r)
	require.Equal(t, "d/", r.Content)

	r = run(t, env, "ls", nil)
	requireOK(t, r)

	requireErr(t, run(t, env, "ls", map[string]any{"path": "b.txt"}), "not a directory")
	requireErr(t, run(t, env, "ls", map[string]any{"path": "zzz"}), "directory not found: zzz")

	require.NoError(t, os.Mkdir(filepath.Join(env.Root, "empty"), 0o755))
	r = run(t, env, "ls", map[string]any{"path": "empty"})
	requireOK(t, r)
	require.Contains(t, r.Content, "empty")
}

func TestLsBounded(t *testing.T) {
	env := newEnv(t)
	for i := range lsMaxEntries + 50 {
		writeFile(t, env, fmt.Sprintf("d/f%05d", i), "")
	}
	r := run(t, env, "ls", map[string]any{"path": "d"})
	requireOK(t, r)
	lines := strings.Split(r.Content, "\n")
	require.Len(t, lines, lsMaxEntries+1)
	require.Equal(t, "f00000", lines[0])
	require.Equal(t, fmt.Sprintf("[listing truncated: showed %d of %d entries; use glob with a pattern to narrow it]", lsMaxEntries, lsMaxEntries+50), lines[lsMaxEntries])
}

func TestGlob(t *testing.T) {
	env := newEnv(t)
	for _, f := range []string{"main.go", "go.mod", "a/b/c.go", "a/b/c_test.go", "a/x.txt", "z.go", "a.go/inner.txt", ".git/config.go", "web/app.ts", "web/app.tsx"} {
		writeFile(t, env, f, "")
	}

	cases := []struct {
		pattern, path string
		want          []string
	}{
		{"*.go", "", []string{"main.go", "z.go"}},
		{"**/*.go", "", []string{"a/b/c.go", "a/b/c_test.go", "main.go", "z.go"}},
		{"**/*_test.go", "", []string{"a/b/c_test.go"}},
		{"a/**", "", []string{"a/b/c.go", "a/b/c_test.go", "a/x.txt"}},
		{"a/**/*", "", []string{"a/b/c.go", "a/b/c_test.go", "a/x.txt"}},
		{"*.go", "a/b", []string{"a/b/c.go", "a/b/c_test.go"}},
		{"b/*.go", "a", []string{"a/b/c.go", "a/b/c_test.go"}},
		{"**/*.{ts,tsx}", "", []string{"web/app.ts", "web/app.tsx"}},
		{env.Root + "/a/**/c.go", "", []string{"a/b/c.go"}},
		{".git/*", "", []string{".git/config.go"}},
		{"**/config.go", "", nil}, // .git is skipped unless named
		{"nothere/**/*.go", "", nil},
	}
	for _, c := range cases {
		r := run(t, env, "glob", map[string]any{"pattern": c.pattern, "path": c.path})
		requireOK(t, r)
		if len(c.want) == 0 {
			require.Equal(t, "No files matched.", r.Content, c.pattern)
			continue
		}
		require.Equal(t, strings.Join(c.want, "\n"), r.Content, c.pattern)
	}

	requireErr(t, run(t, env, "glob", map[string]any{"pattern": "[", "path": ""}), "invalid glob pattern")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": ""}), "must not be empty")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": "*", "path": "main.go"}), "not a directory")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": "*", "path": "missing"}), "not a directory")
}

func TestGlobBounded(t *testing.T) {
	env := newEnv(t)
	for i := range globMaxResults + 10 {
		writeFile(t, env, fmt.Sprintf("d%d/f%04d.txt", i%7, i), "")
	}
	r := run(t, env, "glob", map[string]any{"pattern": "**/*.txt"})
	requireOK(t, r)
	lines := strings.Split(r.Content, "\n")
	require.Len(t, lines, globMaxResults+1)
	require.Equal(t, "d0/f0000.txt", lines[0])
	require.Contains(t, lines[globMaxResults], "results truncated")
	require.Contains(t, lines[globMaxResults], fmt.Sprintf("of %d", globMaxResults+10))
}

func TestGlobAlternativesBounded(t *testing.T) {
	require.Equal(t, 1, alternatives("*.go"))
	require.Equal(t, 2, alternatives("*.{ts,tsx}"))
	require.Equal(t, 4, alternatives("{a,b}/x.{c,h}"))
	require.Equal(t, 1, alternatives("{x}.go"))
	require.Equal(t, 3, alternatives("{a,b{1,2}}"))
	require.Equal(t, 1, alternatives(`\{a,b}`))
	require.Equal(t, altCap, alternatives(strings.Repeat("{a,b}", 40)))

	env := newEnv(t)
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": strings.Repeat("{a,b}", 7)}), "alternatives")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": strings.Repeat("*", globMaxPattern+1)}), "byte limit")
	requireErr(t, run(t, env, "grep", map[string]any{"pattern": "x", "include": strings.Repeat("{a,b}", 7)}), "alternatives")
}

func TestGrep(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "main.go", "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n")
	writeFile(t, env, "sub/util.go", "package sub\n// Hello again\n")
	writeFile(t, env, "sub/notes.md", "hello from markdown\n")
	writeFile(t, env, "bin.dat", "hello\x00world\n")
	writeFile(t, env, ".git/HEAD", "hello git\n")
	writeFile(t, env, "crlf.txt", "one\r\nhello crlf\r\n")

	r := run(t, env, "grep", map[string]any{"pattern": "hello"})
	requireOK(t, r)
	require.Equal(t, "crlf.txt:2:hello crlf\nmain.go:4:\tprintln(\"hello\")\nsub/notes.md:1:hello from markdown", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "(?i)hello", "include": "*.go"})
	requireOK(t, r)
	require.Equal(t, "main.go:4:\tprintln(\"hello\")\nsub/util.go:2:// Hello again", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "(?i)hello", "include": "*.{md,txt}"})
	requireOK(t, r)
	require.Equal(t, "crlf.txt:2:hello crlf\nsub/notes.md:1:hello from markdown", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "^package", "path": "sub"})
	requireOK(t, r)
	require.Equal(t, "sub/util.go:1:package sub", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "package", "path": "sub/util.go", "include": "*.md"})
	requireOK(t, r)
	require.Equal(t, "sub/util.go:1:package sub", r.Content)

	r = run(t, env, "grep", map[string]any{"pattern": "hello", "path": ".git"})
	requireOK(t, r)
	require.Equal(t, ".git/HEAD:1:hello git", r.Content, "an explicit .git path is searched")

	r = run(t, env, "grep", map[string]any{"pattern": "zzz"})
	requireOK(t, r)
	require.Equal(t, "No matches found.", r.Content)

	requireErr(t, run(t, env, "grep", map[string]any{"pattern": "("}), "invalid regular expression")
	requireErr(t, run(t, env, "grep", map[string]any{"pattern": "x", "include": "["}), "invalid include glob")
	requireErr(t, run(t, env, "grep", map[string]any{"pattern": "x", "path": "nope"}), "path not found: nope")
}

func TestGrepBounded(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "many.txt", strings.Repeat("match\n", grepMaxMatches+100))
	r := run(t, env, "grep", map[string]any{"pattern": "match"})
	requireOK(t, r)
	lines := strings.Split(r.Content, "\n")
	require.Len(t, lines, grepMaxMatches+1)
	require.Contains(t, lines[grepMaxMatches], "results truncated")

	// Long lines are shown around the match and the byte cap holds.
	long := strings.Repeat("a", 5000) + "NEEDLE" + strings.Repeat("b", 5000) + "\n"
	writeFile(t, env, "long.txt", strings.Repeat(long, 100))
	r = run(t, env, "grep", map[string]any{"pattern": "NEEDLE", "path": "long.txt"})
	requireOK(t, r)
	require.LessOrEqual(t, len(r.Content), maxOutput)
	first := strings.Split(r.Content, "\n")[0]
	require.Contains(t, first, "NEEDLE")
	require.Less(t, len(first), grepMaxLine+100)
	require.Contains(t, r.Content, "results truncated")
}

func TestGrepIncludeWithPath(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "src/a/x.go", "hit\n")
	writeFile(t, env, "src/b/y.go", "hit\n")
	writeFile(t, env, "src/x.go", "hit\n")
	r := run(t, env, "grep", map[string]any{"pattern": "hit", "path": "src", "include": "a/**/*.go"})
	requireOK(t, r)
	require.Equal(t, "src/a/x.go:1:hit", r.Content)
	r = run(t, env, "grep", map[string]any{"pattern": "hit", "include": "**/b/*.go"})
	requireOK(t, r)
	require.Equal(t, "src/b/y.go:1:hit", r.Content)
}
