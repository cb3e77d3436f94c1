package tools

import (
	"context"
	"io/fs"
)

// WalkFilesListed is WalkFiles that also gives listed every directory's
// entries as the walk read them (in name order, ignored ones included),
// with the directory's slash path from the workspace root ("" for the
// root): what a caller would otherwise read again to know what the walk
// passed over. The entries are the caller's to keep.
func (env Env) WalkFilesListed(ctx context.Context, fn func(File) error, listed func(dir string, ents []fs.DirEntry)) (truncated bool, err error) {
	sp, err := env.open()
	if err != nil {
		return false, err
	}
	defer sp.Close()
	w := &walker{ctx: ctx, sp: sp, ign: sp.ignoreRulesFor("."), listed: listed}
	err = w.walk(".", func(e walkEntry) error {
		if e.isDir() || (!e.typ.IsRegular() && e.typ&fs.ModeSymlink == 0) {
			return nil
		}
		return fn(File{Rel: e.rel, Name: e.name, Dir: e.parent, Type: e.typ})
	})
	return w.stopped, err
}
