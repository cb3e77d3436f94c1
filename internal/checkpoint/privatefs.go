package checkpoint

import (
	"os"
	"path"
	"path/filepath"

	"github.com/go-git/go-billy/v5"
)

// privateFS gives what the shadow repositories hold the modes of the rest
// of the data dir: directories 0700, files 0600 (go-git's own are 0755
// and, for objects, 0444: readable by every local user, and transcripts'
// files are no one else's business). It has no Chmod, so go-git's
// "objects are read-only" fix-up finds nothing to call.
type privateFS struct{ billy.Filesystem }

func (f privateFS) MkdirAll(name string, _ os.FileMode) error {
	return f.Filesystem.MkdirAll(name, 0o700)
}

// OpenFile, TempFile and Rename make the directory they write in first:
// left to go-git's filesystem, it would be made 0755.
func (f privateFS) OpenFile(name string, flag int, _ os.FileMode) (billy.File, error) {
	if flag&os.O_CREATE != 0 {
		if err := f.parent(name); err != nil {
			return nil, err
		}
	}
	return f.Filesystem.OpenFile(name, flag, 0o600)
}

func (f privateFS) TempFile(dir, prefix string) (billy.File, error) {
	if err := f.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return f.Filesystem.TempFile(dir, prefix)
}

func (f privateFS) Rename(from, to string) error {
	if err := f.parent(to); err != nil {
		return err
	}
	return f.Filesystem.Rename(from, to)
}

func (f privateFS) parent(name string) error {
	if dir := path.Dir(filepath.ToSlash(name)); dir != "." && dir != "/" {
		return f.MkdirAll(dir, 0o700)
	}
	return nil
}

func (f privateFS) Create(name string) (billy.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
}

func (f privateFS) Chroot(name string) (billy.Filesystem, error) {
	sub, err := f.Filesystem.Chroot(name)
	if err != nil {
		return nil, err
	}
	return privateFS{sub}, nil
}
