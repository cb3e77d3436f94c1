package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxCached bounds the workspaces a Loader remembers; past it, it starts
// over (a server has far fewer open workspaces).
const maxCached = 1024

// Loader gives each workspace its configuration: the server's file merged
// with the workspace's. It reads a workspace's file again only when the
// file changed (its size, modification time or identity, as one stat of it
// tells), so that an edit applies to the next prompt while a prompt whose
// file did not change costs a stat, not a read. Its methods are safe for
// concurrent use.
type Loader struct {
	server *File
	base   *Config

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is a workspace's configuration as read when its file had stamp.
type entry struct {
	stamp stamp
	cfg   *Config
	err   error
}

// stamp is what a stat says of a workspace's file.
type stamp struct {
	exists bool
	size   int64
	mod    time.Time
	info   fs.FileInfo
}

func (a stamp) same(b stamp) bool {
	if a.exists != b.exists {
		return false
	}
	if !a.exists {
		return true
	}
	return a.size == b.size && a.mod.Equal(b.mod) && os.SameFile(a.info, b.info)
}

// NewLoader returns a Loader over the server's file (nil: none), which must
// merge on its own (tandem serve refuses to start otherwise).
func NewLoader(server *File) (*Loader, error) {
	base, err := Merge(server)
	if err != nil {
		return nil, err
	}
	return &Loader{server: server, base: base, entries: make(map[string]*entry)}, nil
}

// Server is the server's configuration alone: what applies where no
// workspace does (the health route's default model).
func (l *Loader) Server() *Config { return l.base }

// WorkspaceRoots are the server file's workspace_roots: where members may
// open workspaces (none without a file).
func (l *Loader) WorkspaceRoots() []string {
	if l.server == nil {
		return nil
	}
	return l.server.WorkspaceRoots
}

// Workspace returns the configuration of the workspace at root. An invalid
// workspace file is an Errors naming it, the key and why.
func (l *Loader) Workspace(root string) (*Config, error) {
	st, ok := statFile(filepath.Join(root, WorkspaceFile))
	if !ok {
		// Something odd (no permission, .tandem a file): read, which
		// says what, and remember nothing.
		return ForWorkspace(l.server, root)
	}
	l.mu.Lock()
	e := l.entries[root]
	l.mu.Unlock()
	if e != nil && e.stamp.same(st) {
		return e.cfg, e.err
	}
	// Stat before read: an edit racing with the read is read again next
	// time, as its stamp differs from the one kept.
	var cfg *Config
	var err error
	if st.exists {
		cfg, err = ForWorkspace(l.server, root)
	} else {
		cfg = l.base
	}
	l.mu.Lock()
	if len(l.entries) >= maxCached {
		clear(l.entries)
	}
	l.entries[root] = &entry{stamp: st, cfg: cfg, err: err}
	l.mu.Unlock()
	return cfg, err
}

// statFile stats path; ok is false when the stat failed for another reason
// than the file's absence.
func statFile(path string) (stamp, bool) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return stamp{}, true
	case err != nil:
		return stamp{}, false
	}
	return stamp{exists: true, size: fi.Size(), mod: fi.ModTime(), info: fi}, true
}
