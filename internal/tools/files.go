package tools

import (
	"context"
	"io/fs"
	"os"
)

// File is an entry of the workspace that WalkFiles found: a regular file
// or a symlink, never a directory.
type File struct {
	// Rel is the path from the workspace root, slash-separated.
	Rel string
	// Name is the entry's name in Dir.
	Name string
	// Dir is the open root of the directory that holds it: reading the
	// entry through it stays confined to the workspace.
	Dir *os.Root
	// Type is the type from the directory listing (symlinks not followed).
	Type fs.FileMode
}

// OpenNonblock is the flag that keeps an open of a FIFO swapped in for a
// file from blocking, where one can.
const OpenNonblock = openNonblock

// WalkFiles calls fn for each regular file and symlink of the workspace
// that glob would see: what .gitignore files and .git hold is skipped. It
// walks in name order, every access confined as the tools' are, and stops
// with the context's error when ctx ends. truncated reports a walk that hit
// the walk's bounds and saw only part of the tree.
func (env Env) WalkFiles(ctx context.Context, fn func(File) error) (truncated bool, err error) {
	return env.WalkFilesListed(ctx, fn, nil)
}

// OpenRoot opens the workspace root as an os.Root, symlinks in its own
// path resolved.
func (env Env) OpenRoot() (*os.Root, error) {
	sp, err := env.open()
	if err != nil {
		return nil, err
	}
	return sp.root, nil
}

// UnifiedDiff renders the unified diff of a file's change from before to
// after, as edit and write show it for a permission, every hunk with 3
// lines of context.
func UnifiedDiff(name, before, after string) string { return unifiedDiff(name, before, after) }

// CapDiff cuts a diff to what an event's data may hold, at a line, saying
// so.
func CapDiff(d string) string { return capDiff(d) }
