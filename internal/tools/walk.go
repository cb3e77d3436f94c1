package tools

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
)

const (
	// walkMaxEntries stops a walk of an enormous tree (a checked-in
	// node_modules, say) so that a search returns in reasonable time; the
	// model is told and can narrow the path.
	walkMaxEntries = 200_000
	// walkMaxDepth bounds how deep a walk goes: each level holds an open
	// directory, and nothing useful lives 256 directories down.
	walkMaxDepth = 256
	// readDirBatch is how many entries are read from a directory at a time,
	// with a look at the context between batches.
	readDirBatch = 512
)

// walker walks a tree of the workspace in name order, depth first. Each
// directory is opened as an os.Root of its own below its parent's, so every
// access is confined (a directory swapped for a symlink to elsewhere cannot
// be entered) and costs one path component, however deep the tree. The
// context is checked before every entry and every batch of a directory
// read, so a cancel ends a walk promptly whatever its size.
type walker struct {
	ctx     context.Context
	sp      *space
	visited int
	// stopped is set when the walk hit walkMaxEntries or walkMaxDepth and
	// so saw only part of the tree.
	stopped bool
	// ign, when set, skips what .gitignore files and .git hold; the walk
	// adds each directory's .gitignore as it enters it.
	ign *ignoreRules
	// listed, when set, is given each directory's entries as read, with
	// its root-relative slash path ("" for the root).
	listed func(rel string, ents []fs.DirEntry)
}

// walkEntry is one entry found by a walk.
type walkEntry struct {
	// rel is the path from the workspace root, sub the path from where the
	// walk started; both slash-separated.
	rel, sub string
	name     string
	// typ is the type from the directory listing (symlinks not followed).
	typ fs.FileMode
	// parent is the open root of the directory holding the entry.
	parent *os.Root
}

func (e walkEntry) isDir() bool { return e.typ.IsDir() }

// walk calls fn for every entry below the directory start (a resolved path),
// not for start itself. When fn returns fs.SkipDir for a directory, the
// walk does not enter it; fs.SkipAll ends the walk. walk returns the
// context's error when it ends early for it; unreadable directories are
// skipped, as a search should not fail on one.
func (w *walker) walk(start string, fn func(walkEntry) error) error {
	d, err := w.sp.root.OpenRoot(osPath(start))
	if err != nil {
		return pathErr(start, err)
	}
	defer d.Close()
	var parts []string
	if start != "." {
		parts = strings.Split(start, "/")
	}
	if err := w.dir(d, parts, "", 0, fn); err != nil && !errors.Is(err, fs.SkipAll) {
		return err
	}
	return w.ctx.Err()
}

// dir walks the directory d, at the root-relative parts.
func (w *walker) dir(d *os.Root, parts []string, sub string, depth int, fn func(walkEntry) error) error {
	if w.ign != nil {
		defer w.ign.pop(w.ign.load(d, gitignoreName, parts))
	}
	ents, err := w.list(d)
	if err != nil {
		return err
	}
	rel := strings.Join(parts, "/")
	if w.listed != nil {
		w.listed(rel, ents)
	}
	for _, de := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if w.visited++; w.visited > walkMaxEntries {
			w.stopped = true
			return fs.SkipAll
		}
		childParts := append(parts[:len(parts):len(parts)], de.Name())
		if w.ign != nil && w.ign.skip(childParts, de.IsDir()) {
			continue
		}
		e := walkEntry{rel: joinRel(rel, de.Name()), sub: joinRel(sub, de.Name()), name: de.Name(), typ: de.Type(), parent: d}
		switch err := fn(e); {
		case errors.Is(err, fs.SkipDir):
			continue
		case err != nil:
			return err
		}
		if !e.isDir() {
			continue
		}
		if depth+1 >= walkMaxDepth {
			w.stopped = true
			continue
		}
		child, err := d.OpenRoot(de.Name())
		if err != nil {
			continue // gone, unreadable, or swapped for a link: not entered
		}
		err = w.dir(child, childParts, e.sub, depth+1, fn)
		child.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// list reads a directory's entries in name order, in batches so that the
// context is looked at while a huge directory is read, and no more than the
// walk may still visit.
func (w *walker) list(d *os.Root) ([]fs.DirEntry, error) {
	f, err := d.Open(".")
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	var ents []fs.DirEntry
	for {
		if err := w.ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := f.ReadDir(readDirBatch)
		ents = append(ents, batch...)
		if len(ents) > walkMaxEntries-w.visited {
			// Entries past the budget would never be visited; keep one
			// more so that the walk notices it stopped short.
			ents = ents[:max(0, walkMaxEntries-w.visited)+1]
			break
		}
		if err != nil {
			break
		}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// joinRel joins a slash path and a name; "." and "" stand for the root.
func joinRel(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}
