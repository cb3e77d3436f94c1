package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// freshFor is how long a commit this process made is kept whatever the
// store says: it is written before the checkpoint naming it is stored.
const freshFor = 10 * time.Minute

// Stored lists the ids of the workspaces that have a repository.
func (m *Manager) Stored() ([]string, error) {
	ents, err := os.ReadDir(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoint repositories: %w", err)
	}
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".git"); ok && e.IsDir() {
			out = append(out, id)
		}
	}
	return out, nil
}

// Has reports whether the workspace has a repository (a checkpoint was
// ever taken of it here).
func (m *Manager) Has(workspaceID string) bool {
	_, err := os.Stat(filepath.Join(m.dir, workspaceID+".git"))
	return err == nil
}

// Drop removes the repository of a workspace that is gone.
func (m *Manager) Drop(workspaceID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.repos[workspaceID]; r != nil {
		r.mu.Lock()
		r.objs.close() // a late write fails; it does not make the repository again
		r.mu.Unlock()
	}
	delete(m.repos, workspaceID)
	if err := os.RemoveAll(filepath.Join(m.dir, workspaceID+".git")); err != nil {
		return fmt.Errorf("remove checkpoint repository of %s: %w", workspaceID, err)
	}
	return nil
}

// Collect removes the objects that neither a commit of live (those the
// store's checkpoints name) nor a commit this process made lately reaches,
// and gives what stays the data dir's modes (a repository made before
// they were kept has go-git's). The index forgets what it removes, on
// disk before any object goes. It returns how many objects it removed.
func (r *Repo) Collect(live []string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loadIndex()
	reached := make(map[plumbing.Hash]bool)
	roots := make([]plumbing.Hash, 0, len(live)+len(r.fresh))
	for _, c := range live {
		if c != "" {
			roots = append(roots, plumbing.NewHash(c))
		}
	}
	r.forgetStale()
	for h := range r.fresh {
		roots = append(roots, h)
	}
	for _, h := range roots {
		if reached[h] {
			continue
		}
		c, err := object.GetCommit(r.st, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			continue // recorded on another node (section 8), or lost
		}
		if err != nil {
			return 0, fmt.Errorf("collect checkpoints: %w", err)
		}
		reached[h] = true
		if d, ok := darkBlob(c); ok {
			reached[d] = true
		}
		if err := r.reach(c.TreeHash, reached); err != nil {
			return 0, err
		}
	}
	// Nothing may vouch for an object that is gone: the index is written
	// without them before they go (or, failing that, removed).
	for p, s := range r.stats {
		if !reached[s.hash] {
			delete(r.stats, p)
			r.dirty = true
		}
	}
	if r.last != nil && !reached[r.lastTree] {
		r.last, r.trees, r.lastTree, r.dirty = nil, nil, plumbing.ZeroHash, true
	}
	if r.dirty {
		if err := r.saveIndex(); err != nil {
			if err := r.dropIndex(); err != nil {
				return 0, fmt.Errorf("collect checkpoints: %w", err)
			}
		}
		r.dirty = false
	}
	clear(r.known)
	r.objs.forget()
	removed := 0
	objects := filepath.Join(r.dir, "objects")
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if r.private {
				return nil
			}
			return os.Chmod(p, 0o700)
		}
		if rel, ok := strings.CutPrefix(p, objects+string(filepath.Separator)); ok {
			dir, name := filepath.Split(rel)
			if h, ok := objectHash(strings.TrimSuffix(dir, string(filepath.Separator)), name); ok && !reached[h] {
				removed++
				return os.Remove(p)
			}
			if fi, err := d.Info(); err == nil && staleTemp(name, fi) {
				return os.Remove(p)
			}
		}
		if r.private {
			return nil
		}
		return os.Chmod(p, 0o600)
	})
	if err == nil {
		r.private = true
	}
	if err != nil {
		return removed, fmt.Errorf("collect checkpoints: %w", err)
	}
	return removed, nil
}

// forgetStale drops the commits made longer than freshFor ago from fresh.
func (r *Repo) forgetStale() {
	for h, at := range r.fresh {
		if time.Since(at) > freshFor {
			delete(r.fresh, h)
		}
	}
}

// reach marks the tree at h and what it holds.
func (r *Repo) reach(h plumbing.Hash, reached map[plumbing.Hash]bool) error {
	if reached[h] {
		return nil
	}
	reached[h] = true
	t, err := object.GetTree(r.st, h)
	if err != nil {
		return fmt.Errorf("collect checkpoints: tree %s: %w", h, err)
	}
	for _, e := range t.Entries {
		switch e.Mode {
		case filemode.Dir:
			if err := r.reach(e.Hash, reached); err != nil {
				return err
			}
		case filemode.Submodule:
			// unrecorded: names no object
		default:
			reached[e.Hash] = true
		}
	}
	return nil
}

// objectHash is the hash a loose object's file at objects/dir/name holds.
func objectHash(dir, name string) (plumbing.Hash, bool) {
	if len(dir) != 2 || len(name) != 38 {
		return plumbing.Hash{}, false
	}
	if !plumbing.IsHash(dir + name) {
		return plumbing.Hash{}, false
	}
	return plumbing.NewHash(dir + name), true
}
