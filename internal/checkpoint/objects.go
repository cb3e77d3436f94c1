package checkpoint

import (
	"bytes"
	"compress/zlib"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// objectWriter stores loose objects in a repository's objects directory,
// in git's format (zlib of "type size\0content"), each written whole to a
// temporary file and renamed to its name, so a crash leaves no object
// half written. The temporary files are all made in one directory (pack,
// where go-git makes its own): a file made in each fan-out directory in
// turn cost twice the time, the filesystem placing each new inode near
// its directory's. go-git reads them as its own. It is used
// in place of go-git's writer, whose every object cost a confined path
// resolution (a stat per path component) for each of its temporary file,
// its rename and its existence check, and a compressor's allocation.
type objectWriter struct {
	root *os.Root // the objects directory
	zw   *zlib.Writer
	buf  bytes.Buffer
	dirs map[string]bool // fan-out directories known to be there
}

// openObjects opens the objects directory of the repository at dir,
// making it if need be.
func openObjects(dir string) (*objectWriter, error) {
	p := dir + string(os.PathSeparator) + "objects"
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	root, err := os.OpenRoot(p)
	if err != nil {
		return nil, err
	}
	return &objectWriter{root: root, dirs: make(map[string]bool)}, nil
}

// objectPath is the slash path of a loose object below objects.
func objectPath(h plumbing.Hash) (dir, file string) {
	s := h.String()
	return s[:2], s[:2] + "/" + s[2:]
}

// has reports whether the object is stored loose.
func (w *objectWriter) has(h plumbing.Hash) bool {
	_, p := objectPath(h)
	_, err := w.root.Lstat(p)
	return err == nil
}

// tmpPrefix starts the names of objects being written; Collect removes
// those a crash left behind.
const tmpPrefix = "tmp_obj_"

// tmpDir is where objects are written before they are renamed.
const tmpDir = "pack"

// put stores the object whose hash is h (as plumbing.ComputeHash made
// it from typ and data).
func (w *objectWriter) put(h plumbing.Hash, typ plumbing.ObjectType, data []byte) error {
	dir, p := objectPath(h)
	if !w.dirs[dir] {
		if err := w.root.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		w.dirs[dir] = true
	}
	w.buf.Reset()
	if w.zw == nil {
		w.zw = zlib.NewWriter(&w.buf)
	} else {
		w.zw.Reset(&w.buf)
	}
	w.zw.Write(typ.Bytes())
	w.zw.Write([]byte{' '})
	w.zw.Write(strconv.AppendInt(nil, int64(len(data)), 10))
	w.zw.Write([]byte{0})
	w.zw.Write(data)
	if err := w.zw.Close(); err != nil {
		return err
	}
	if !w.dirs[tmpDir] {
		if err := w.root.Mkdir(tmpDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		w.dirs[tmpDir] = true
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := tmpDir + "/" + tmpPrefix + hex.EncodeToString(rnd[:])
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(w.buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, p)
	}
	if err != nil {
		w.root.Remove(tmp)
		return err
	}
	if w.buf.Cap() > 1<<20 {
		w.buf = bytes.Buffer{} // a big file's: not kept for the small ones after it
	}
	return nil
}

// forget makes the writer look for fan-out directories again (Collect
// may remove them).
func (w *objectWriter) forget() { clear(w.dirs) }

func (w *objectWriter) close() error { return w.root.Close() }

// staleTemp reports whether the file named name in an objects fan-out
// directory is an object a crash left half written: older than any write
// still under way could be.
func staleTemp(name string, fi fs.FileInfo) bool {
	return strings.HasPrefix(name, tmpPrefix) && time.Since(fi.ModTime()) > time.Hour
}

// writeObject stores an object unless it is known to be there, and
// returns its hash.
func (r *Repo) write(typ plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(typ, data)
	if r.known[h] {
		return h, nil
	}
	if !r.objs.has(h) {
		if err := r.objs.put(h, typ, data); err != nil {
			return h, fmt.Errorf("write checkpoint object: %w", err)
		}
	}
	r.known[h] = true
	return h, nil
}
