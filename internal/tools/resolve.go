package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink hops, as the kernel does, so that a link loop is
// an error instead of an endless walk.
const maxSymlinks = 40

// Resolve resolves p (relative to env.Root, or absolute) with symlinks resolved
// and returns an error when it escapes the root. For paths that do not exist
// yet (write), the deepest existing parent is resolved and the missing tail is
// appended.
//
// The walk is done one component at a time rather than with
// filepath.EvalSymlinks for two reasons: EvalSymlinks fails on a missing path,
// and cleaning "dir/../x" lexically before resolving would disagree with the
// kernel when dir is a symlink. Every existing component of the returned path
// has been checked not to be a symlink, so the kernel traverses exactly the
// path that was checked (barring a concurrent rename, which is out of scope).
// In particular a dangling symlink is followed to its would-be target, so that
// write cannot create a file outside the root through one.
func (env Env) Resolve(p string) (string, error) {
	if env.Root == "" || !filepath.IsAbs(env.Root) {
		return "", fmt.Errorf("workspace root %q is not an absolute path", env.Root)
	}
	root, err := filepath.EvalSymlinks(env.Root)
	if err != nil {
		return "", fmt.Errorf("workspace root: %w", err)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}

	cur := root
	if filepath.IsAbs(p) {
		cur = "/"
	}
	pending := strings.Split(p, "/")
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			// Missing components cannot be symlinks; the tool's own file
			// operation will report the missing file if it matters.
			cur = next
			continue
		case err != nil:
			return "", fmt.Errorf("path %q: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", fmt.Errorf("path %q: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("path %q: %w", p, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		pending = append(strings.Split(target, "/"), pending...)
	}

	if !within(root, cur) {
		return "", fmt.Errorf("path %q is outside the workspace (root %s); only paths inside the workspace are allowed", p, root)
	}
	return cur, nil
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if p == root || root == "/" {
		return true
	}
	return strings.HasPrefix(p, root+"/")
}

// rel renders an absolute path inside the root relative to it, which is how
// paths are shown to the model: shorter, and independent of where the
// workspace happens to live on this machine.
func (env Env) rel(abs string) string {
	root, err := filepath.EvalSymlinks(env.Root)
	if err != nil {
		root = env.Root
	}
	return relTo(root, abs)
}

// relTo is rel for walks, which resolve the root once rather than per file.
func relTo(root, abs string) string {
	r, err := filepath.Rel(root, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(r)
}

// resolveErr turns a Resolve failure into the error result every file tool
// returns for it.
func resolveErr(err error) Result {
	return errorf("%v", err)
}

// displayPath is the root-relative form of p for summaries, falling back to p
// itself when it cannot be resolved (the summary should still show something).
func (env Env) displayPath(p string) (string, error) {
	abs, err := env.Resolve(p)
	if err != nil {
		return p, err
	}
	return env.rel(abs), nil
}
