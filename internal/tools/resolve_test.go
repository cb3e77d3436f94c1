package tools

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	env := newEnv(t)
	out := outsideDir(t)
	writeFile(t, env, "a/b.txt", "x")
	writeFile(t, env, "real/f.txt", "x")
	require.NoError(t, os.Symlink("real", filepath.Join(env.Root, "inlink")))
	require.NoError(t, os.Symlink(out, filepath.Join(env.Root, "outlink")))
	require.NoError(t, os.Symlink(filepath.Join(out, "missing"), filepath.Join(env.Root, "dangling")))
	require.NoError(t, os.Symlink("loop", filepath.Join(env.Root, "loop")))
	// An absolute link inside the workspace is followed, though os.Root
	// alone would refuse it.
	require.NoError(t, os.Symlink(filepath.Join(env.Root, "real"), filepath.Join(env.Root, "abslink")))

	ok := map[string]string{
		"":                            env.Root,
		".":                           env.Root,
		"a/b.txt":                     filepath.Join(env.Root, "a/b.txt"),
		"./a//b.txt":                  filepath.Join(env.Root, "a/b.txt"),
		"a/../a/b.txt":                filepath.Join(env.Root, "a/b.txt"),
		env.Root + "/a":               filepath.Join(env.Root, "a"),
		"inlink/f.txt":                filepath.Join(env.Root, "real/f.txt"),
		"new/dir/file.txt":            filepath.Join(env.Root, "new/dir/file.txt"),
		"inlink/new/x":                filepath.Join(env.Root, "real/new/x"),
		"missing/../a/b.txt":          filepath.Join(env.Root, "a/b.txt"),
		"abslink/f.txt":               filepath.Join(env.Root, "real/f.txt"),
		env.Root + "//a/./x/../b.txt": filepath.Join(env.Root, "a/b.txt"),
	}
	for in, want := range ok {
		got, err := env.Resolve(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}

	bad := []string{
		"..",
		"../x",
		"a/../../x",
		"/etc/passwd",
		"/",
		"outlink",
		"outlink/x",
		"outlink/..", // ".." after a link applies to the link's target, as in the kernel
		"dangling",   // writing here would create a file outside
		"missing/../../x",
		// Out through a link and back in is refused: a path may not leave
		// the workspace on its way (both temp dirs share a parent).
		"outlink/../" + filepath.Base(env.Root) + "/a",
	}
	for _, in := range bad {
		_, err := env.Resolve(in)
		require.Error(t, err, in)
	}
	_, err := env.Resolve("loop")
	require.ErrorContains(t, err, "too many levels")

	_, err = Env{Root: "relative"}.Resolve("x")
	require.Error(t, err)
}

// TestPathEscapes checks every file tool against every kind of escape: the
// contract requires an error result, never a panic or an outside access.
func TestPathEscapes(t *testing.T) {
	env := newEnv(t)
	out := outsideDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("secret\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(env.Root, "filelink")))
	require.NoError(t, os.Symlink(out, filepath.Join(env.Root, "dirlink")))
	require.NoError(t, os.Symlink(filepath.Join(out, "created.txt"), filepath.Join(env.Root, "dangling")))

	paths := []string{"../x", "/etc/passwd", "filelink", "dirlink/secret.txt", "dirlink", out + "/secret.txt", "dangling"}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			cases := map[string]any{
				"view":  map[string]any{"path": p},
				"ls":    map[string]any{"path": p},
				"glob":  map[string]any{"pattern": "*", "path": p},
				"grep":  map[string]any{"pattern": "secret", "path": p},
				"edit":  map[string]any{"path": p, "old_string": "secret", "new_string": "pwned"},
				"write": map[string]any{"path": p, "content": "pwned"},
			}
			for name, args := range cases {
				r := run(t, env, name, args)
				requireErr(t, r, "outside the workspace")
				require.NotContains(t, r.Content, "secret\n", name)
			}
		})
	}
	require.Equal(t, "secret\n", readFile(t, filepath.Join(out, "secret.txt")))
	_, err := os.Stat(filepath.Join(out, "created.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "write through a dangling link created a file outside")

	// Writing through a symlinked directory to a file that does not exist yet
	// must not create it outside.
	for _, name := range []string{"write", "edit"} {
		args := map[string]any{"path": "dirlink/new/created.txt", "content": "x", "old_string": "", "new_string": "x"}
		requireErr(t, run(t, env, name, args), "outside the workspace")
		_, err := os.Stat(filepath.Join(out, "new"))
		require.ErrorIs(t, err, os.ErrNotExist)
	}

	// A glob pattern must not walk out either.
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": "../*"}), "outside the workspace")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": out + "/*"}), "outside the workspace")
	requireErr(t, run(t, env, "glob", map[string]any{"pattern": "dirlink/*"}), "outside the workspace")
}

// TestWalksDoNotFollowLinksOut checks that searching the root does not read
// files through a symlink pointing outside it.
func TestWalksDoNotFollowLinksOut(t *testing.T) {
	env := newEnv(t)
	out := outsideDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("secret\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(out, "secret.txt"), filepath.Join(env.Root, "filelink")))
	require.NoError(t, os.Symlink(out, filepath.Join(env.Root, "dirlink")))
	writeFile(t, env, "real.txt", "secret here too\n")
	require.NoError(t, os.Symlink("real.txt", filepath.Join(env.Root, "inlink.txt")))

	r := run(t, env, "grep", map[string]any{"pattern": "secret"})
	requireOK(t, r)
	require.Equal(t, "inlink.txt:1:secret here too\nreal.txt:1:secret here too", r.Content)

	r = run(t, env, "glob", map[string]any{"pattern": "**/secret.txt"})
	requireOK(t, r)
	require.Equal(t, "No files matched.", r.Content)
}
