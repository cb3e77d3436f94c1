package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinks bounds symlink hops, as the kernel does, so that a link loop is
// an error instead of an endless walk.
const maxSymlinks = 40

// space is one call's confined view of the workspace. Every file operation
// of the tools goes through root, an os.Root: the kernel-level walk it does
// refuses any path that leaves the workspace at the moment of the access,
// even when another process swaps a directory for a symlink between our
// checks and the access. resolve only computes the path to show and to use;
// it is not what keeps the tools inside.
type space struct {
	root *os.Root
	// dir is the root's absolute, symlink-resolved path; given is the
	// workspace path as configured. An absolute path naming either is inside.
	dir, given string
}

// open confines a call to the workspace. The caller closes the space.
func (env Env) open() (*space, error) {
	if env.Root == "" || !filepath.IsAbs(env.Root) {
		return nil, fmt.Errorf("workspace root %q is not an absolute path", env.Root)
	}
	dir, err := filepath.EvalSymlinks(env.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	return &space{root: root, dir: dir, given: filepath.Clean(env.Root)}, nil
}

func (s *space) Close() error { return s.root.Close() }

// errOutside is wrapped by every resolution that leaves the workspace.
var errOutside = errors.New("outside the workspace")

func outside(p string) error {
	return fmt.Errorf("path %q is %w; only paths inside the workspace are allowed", p, errOutside)
}

// resolve maps p (relative to the workspace root, or absolute inside it) to
// a clean, slash-separated path relative to the root ("." for the root
// itself) in which no existing component is a symlink, or fails when p leads
// outside. For a path that does not exist yet (write) the missing tail is
// kept as given.
//
// Symlinks are followed one component at a time, as the kernel does: a ".."
// after a link applies to the link's target, so cleaning "link/.."
// lexically first would disagree with it. Absolute links are followed when
// they point inside the workspace, which os.Root alone would refuse. A
// dangling link is followed to its would-be target, so that write cannot
// create a file outside through one.
func (s *space) resolve(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	p = filepath.ToSlash(p)
	var cur []string // resolved components below the root
	pending, err := s.relParts(p, p)
	if err != nil {
		return "", err
	}
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return "", outside(p)
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := joinRel(strings.Join(cur, "/"), c)
		fi, err := s.root.Lstat(filepath.FromSlash(next))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			// Missing components cannot be symlinks; the tool's own file
			// operation reports the missing file if it matters.
			cur = append(cur, c)
			continue
		case err != nil:
			return "", pathErr(p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = append(cur, c)
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", fmt.Errorf("path %q: too many levels of symbolic links", p)
		}
		target, err := s.root.Readlink(filepath.FromSlash(next))
		if err != nil {
			return "", pathErr(p, err)
		}
		target = filepath.ToSlash(target)
		if filepath.IsAbs(target) {
			parts, err := s.relParts(target, p)
			if err != nil {
				return "", err
			}
			cur = cur[:0]
			pending = append(parts, pending...)
			continue
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	if len(cur) == 0 {
		return ".", nil
	}
	return strings.Join(cur, "/"), nil
}

// relParts splits p into components relative to the root. An absolute p must
// name the root or a path below it, in either of its spellings. What follows
// the root is kept as written when possible, so that a ".." in it is applied
// after the links before it are followed; failing that (doubled slashes, a
// ".." above the root's name) p is cleaned lexically, which may only ever
// name a path inside the root anyway.
func (s *space) relParts(p, asked string) ([]string, error) {
	if !filepath.IsAbs(filepath.FromSlash(p)) {
		return strings.Split(p, "/"), nil
	}
	for _, base := range []string{s.dir, s.given} {
		if rest, ok := cutAbsPrefix(p, filepath.ToSlash(base)); ok {
			return strings.Split(rest, "/"), nil
		}
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(p)))
	for _, base := range []string{s.dir, s.given} {
		if rest, ok := cutAbsPrefix(clean, filepath.ToSlash(base)); ok {
			return strings.Split(rest, "/"), nil
		}
	}
	return nil, outside(asked)
}

// cutAbsPrefix removes base from p when p is base or starts with base and a
// slash, and returns the rest without leading slashes.
func cutAbsPrefix(p, base string) (string, bool) {
	switch base {
	case "":
		return "", false
	case "/":
		return strings.TrimLeft(p, "/"), true
	}
	rest, ok := strings.CutPrefix(p, base)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return strings.TrimLeft(rest, "/"), true
}

// pathErr words a file system error on p for the model, without the
// absolute path os.Root would put in it.
func pathErr(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes from parent") {
		return outside(p)
	}
	return fmt.Errorf("path %q: %v", p, err)
}

// osPath converts a resolved path for os.Root.
func osPath(rel string) string { return filepath.FromSlash(rel) }

// openRead opens the resolved file rel for reading, refusing directories and
// special files: opening a FIFO would block the tool forever, and a device
// could be endless. The file is opened without blocking and checked after
// opening, so a swap between a check and the open cannot sneak one in.
func (s *space) openRead(rel string) (*os.File, fs.FileInfo, error) {
	f, err := s.root.OpenFile(osPath(rel), os.O_RDONLY|openNonblock, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, notFoundError(rel)
	}
	if err != nil {
		return nil, nil, pathErr(rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, pathErr(rel, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: rel, Dir: fi.IsDir()}
	}
	return f, fi, nil
}

// readFile reads the resolved regular file rel whole, refusing one larger
// than limit bytes (checked on the open file, and again while reading in
// case it grows).
func (s *space) readFile(rel string, limit int64) ([]byte, error) {
	f, fi, err := s.openRead(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: rel, Size: fi.Size(), Limit: limit}
	}
	// Sized from the open file, plus one byte to notice one that grew.
	data := make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, data)
	switch {
	case err == nil:
		// Longer than it was: read on, within the limit.
		rest, err := io.ReadAll(io.LimitReader(f, limit+1-int64(n)))
		if err != nil {
			return nil, pathErr(rel, err)
		}
		data = append(data[:n], rest...)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		data = data[:n]
	default:
		return nil, pathErr(rel, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: rel, Size: int64(len(data)), Limit: limit}
	}
	return data, nil
}

// notFoundError is a missing file, worded for the model; it is an
// fs.ErrNotExist.
type notFoundError string

func (e notFoundError) Error() string { return "file not found: " + string(e) }
func (e notFoundError) Unwrap() error { return fs.ErrNotExist }

// NotRegularError is a path that is a directory or a special file where a
// regular file is needed.
type NotRegularError struct {
	Path string
	Dir  bool
}

func (e *NotRegularError) Error() string {
	if e.Dir {
		return e.Path + " is a directory, not a file; use ls to list it"
	}
	return e.Path + " is not a regular file"
}

// TooLargeError is a file over a size limit.
type TooLargeError struct {
	Path        string
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("file %s is %d bytes, over the %d byte limit", e.Path, e.Size, e.Limit)
}

// writeFile creates or overwrites the resolved file rel, creating its parent
// directories, keeping an existing file's mode (0644 applies on creation
// only, so an executable script stays executable). The target is opened
// without blocking and checked before it is truncated, so a FIFO or a device
// swapped in is refused rather than written.
func (s *space) writeFile(rel string, data []byte) error {
	if dir := filepath.Dir(osPath(rel)); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTDIR) {
				return fmt.Errorf("creating parent directories of %s: %s is not a directory", rel, filepath.ToSlash(dir))
			}
			return fmt.Errorf("creating parent directories of %s: %w", rel, pathErr(rel, err))
		}
	}
	f, err := s.root.OpenFile(osPath(rel), os.O_WRONLY|os.O_CREATE|openNonblock, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s: %w", rel, pathErr(rel, err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", rel)
	}
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", rel, err)
	}
	return nil
}

// Resolve resolves p (relative to env.Root, or absolute inside it) with
// symlinks resolved, and returns its absolute path, or an error when it
// leads outside the workspace. It names a path (for a summary, a rule); the
// tools themselves never access a path it returns, only through an os.Root.
func (env Env) Resolve(p string) (string, error) {
	s, err := env.open()
	if err != nil {
		return "", err
	}
	defer s.Close()
	rel, err := s.resolve(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return s.dir, nil
	}
	return filepath.Join(s.dir, osPath(rel)), nil
}

// Rel is Resolve relative to the workspace root, slash-separated ("." for
// the root): how paths are shown to the model and matched by rules.
func (env Env) Rel(p string) (string, error) {
	s, err := env.open()
	if err != nil {
		return "", err
	}
	defer s.Close()
	return s.resolve(p)
}

// ReadFile reads the regular file p inside the workspace, refusing one over
// limit bytes (a *TooLargeError). It returns the workspace-relative path it
// read. File attachments use it, so they are confined like the tools.
func (env Env) ReadFile(p string, limit int64) (rel string, data []byte, err error) {
	s, err := env.open()
	if err != nil {
		return "", nil, err
	}
	defer s.Close()
	rel, err = s.resolve(p)
	if err != nil {
		return "", nil, err
	}
	data, err = s.readFile(rel, limit)
	return rel, data, err
}

// resolveErr turns a resolution failure into the error result every file
// tool returns for it.
func resolveErr(err error) Result {
	return errorf("%v", err)
}

// displayPath is the root-relative form of p for summaries, falling back to p
// itself when it cannot be resolved (the summary should still show something).
func (env Env) displayPath(p string) (string, error) {
	rel, err := env.Rel(p)
	if err != nil {
		return p, err
	}
	return rel, nil
}
