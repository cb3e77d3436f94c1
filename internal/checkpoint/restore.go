package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/tandem-dev/tandem/proto"
)

// Restore puts the workspace's files back as commit to recorded them,
// given now, a snapshot of them as they are: files added since are
// removed (with the directories that leaves empty and that to did not
// have), files deleted or changed since get their content and mode back.
// It returns the changes it undid, as going from to to now. Every access
// goes through an os.Root of the workspace, so a directory swapped for a
// symlink meanwhile cannot lead outside it.
func (r *Repo) Restore(ctx context.Context, to, now string) ([]proto.FileChange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	then, _, changes, err := r.changes(to, now)
	if err != nil {
		return nil, err
	}
	root, err := r.env.OpenRoot()
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer root.Close()
	dirs := make(map[string]bool) // the directories to had
	for p := range then {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// What was added goes first, with the directories that leaves empty:
	// a file that became a directory since needs its place back.
	var emptied []string
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.Change != proto.ChangeAdded {
			continue
		}
		if err := root.Remove(filepath.FromSlash(c.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("restore %s: %w", c.Path, err)
		}
		for d := path.Dir(c.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			emptied = append(emptied, d)
		}
		delete(r.stats, c.Path)
	}
	// Deepest first, so a parent is empty once its children are gone; a
	// directory that still holds something (an ignored file) stays.
	sort.Slice(emptied, func(i, j int) bool { return len(emptied[i]) > len(emptied[j]) })
	for _, d := range emptied {
		_ = root.Remove(filepath.FromSlash(d))
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.Change == proto.ChangeAdded {
			continue
		}
		if err := r.put(root, c.Path, then[c.Path]); err != nil {
			return nil, err
		}
		delete(r.stats, c.Path)
	}
	return changes, nil
}

// put writes the file at p as e records it, replacing what is there.
func (r *Repo) put(root *os.Root, p string, e entry) error {
	data, err := r.blob(e.hash)
	if err != nil {
		return err
	}
	rel := filepath.FromSlash(p)
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
	}
	// Removed first: what is there may be a symlink, which a write would
	// follow, or a file of another mode.
	if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	if e.mode == filemode.Symlink {
		if err := root.Symlink(string(data), rel); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
		return nil
	}
	perm := os.FileMode(0o644)
	if e.mode == filemode.Executable {
		perm = 0o755
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(rel, perm)
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", p, err)
	}
	return nil
}
