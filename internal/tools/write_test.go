package tools

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEdit(t *testing.T) {
	env := newEnv(t)
	p := writeFile(t, env, "f.go", "a := 1\nb := 2\nc := 1\n")

	r := run(t, env, "edit", map[string]any{"path": "f.go", "old_string": "b := 2", "new_string": "b := 3"})
	requireOK(t, r)
	require.Equal(t, "Edited f.go: replaced 1 occurrence at line 2.", r.Content)
	require.Equal(t, "a := 1\nb := 3\nc := 1\n", readFile(t, p))

	r = run(t, env, "edit", map[string]any{"path": "f.go", "old_string": ":= 1", "new_string": ":= 9"})
	requireErr(t, r, "old_string appears 2 times in f.go")
	r = run(t, env, "edit", map[string]any{"path": "f.go", "old_string": "zzz", "new_string": "y"})
	requireErr(t, r, "old_string was not found in f.go")
	r = run(t, env, "edit", map[string]any{"path": "f.go", "old_string": "a := 1", "new_string": "a := 1"})
	requireErr(t, r, "identical")
	r = run(t, env, "edit", map[string]any{"path": "f.go", "old_string": "", "new_string": "x"})
	requireErr(t, r, "already exists")
	require.Equal(t, "a := 1\nb := 3\nc := 1\n", readFile(t, p), "failed edits change nothing")

	r = run(t, env, "edit", map[string]any{"path": "missing.go", "old_string": "x", "new_string": "y"})
	requireErr(t, r, "file not found: missing.go")
	requireErr(t, run(t, env, "edit", map[string]any{"path": ".", "old_string": "x", "new_string": "y"}), "directory")

	// An empty old_string creates a file that does not exist, parents too.
	r = run(t, env, "edit", map[string]any{"path": "new/dir/n.txt", "old_string": "", "new_string": "hello\n"})
	requireOK(t, r)
	require.Equal(t, "Created new/dir/n.txt (6 bytes).", r.Content)
	require.Equal(t, "hello\n", readFile(t, filepath.Join(env.Root, "new/dir/n.txt")))

	// Replacement text is literal: no regexp or $-expansion.
	r = run(t, env, "edit", map[string]any{"path": "new/dir/n.txt", "old_string": "hello", "new_string": "$1 \\n ${x}"})
	requireOK(t, r)
	require.Equal(t, "$1 \\n ${x}\n", readFile(t, filepath.Join(env.Root, "new/dir/n.txt")))

	// Editing keeps the file's mode.
	sh := writeFile(t, env, "run.sh", "echo hi\n")
	require.NoError(t, os.Chmod(sh, 0o755))
	requireOK(t, run(t, env, "edit", map[string]any{"path": "run.sh", "old_string": "hi", "new_string": "bye"}))
	fi, err := os.Stat(sh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

func TestEditCRLF(t *testing.T) {
	env := newEnv(t)
	p := writeFile(t, env, "w.txt", "one\r\ntwo\r\nthree\r\n")
	// The model saw the file through view, without CRs.
	r := run(t, env, "edit", map[string]any{"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2"})
	requireOK(t, r)
	require.Equal(t, "1\r\n2\r\nthree\r\n", readFile(t, p))
}

func TestEditThroughInsideSymlink(t *testing.T) {
	env := newEnv(t)
	p := writeFile(t, env, "real/f.txt", "x\n")
	require.NoError(t, os.Symlink("real", filepath.Join(env.Root, "link")))
	r := run(t, env, "edit", map[string]any{"path": "link/f.txt", "old_string": "x", "new_string": "y"})
	requireOK(t, r)
	require.Equal(t, "Edited real/f.txt: replaced 1 occurrence at line 1.", r.Content)
	require.Equal(t, "y\n", readFile(t, p))
}

func TestWrite(t *testing.T) {
	env := newEnv(t)
	r := run(t, env, "write", map[string]any{"path": "a/b/c.txt", "content": "hello"})
	requireOK(t, r)
	require.Equal(t, "Created a/b/c.txt (5 bytes).", r.Content)
	require.Equal(t, "hello", readFile(t, filepath.Join(env.Root, "a/b/c.txt")))

	r = run(t, env, "write", map[string]any{"path": filepath.Join(env.Root, "a/b/c.txt"), "content": ""})
	requireOK(t, r)
	require.Equal(t, "Overwrote a/b/c.txt (0 bytes).", r.Content)
	require.Equal(t, "", readFile(t, filepath.Join(env.Root, "a/b/c.txt")))

	requireErr(t, run(t, env, "write", map[string]any{"path": "a", "content": "x"}), "is a directory")
	requireErr(t, run(t, env, "write", map[string]any{"path": "a/b/c.txt/d", "content": "x"}), "not a directory")

	require.NoError(t, syscall.Mkfifo(filepath.Join(env.Root, "fifo"), 0o644))
	requireErr(t, run(t, env, "write", map[string]any{"path": "fifo", "content": "x"}), "not a regular file")
}
