package checkpoint

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// The index is what the last snapshot recorded, kept between snapshots
// and, in the file indexName of the repository, between runs of the
// server, as git's index is: the files' stats and hashes (the stat
// cache), the files the snapshot recorded, and the hash of the tree of
// each of their directories. With it a snapshot hashes only the files
// whose stat it cannot vouch for, and writes only the trees of the
// directories on the path of a change.
//
// It vouches only for objects that are stored: an entry is added after
// its object is written, and Collect drops the entries whose objects it
// removes (and writes the index without them) before it removes them. A
// file that does not decode whole, or that another workspace's root
// wrote, or whose tree is not stored, is ignored: the next snapshot
// hashes every file again and writes a new one.

// indexName is the index's file in the repository.
const indexName = "tandem-index"

// indexMagic starts the index's file; its last 4 bytes are the CRC-32C
// of what comes before them.
const indexMagic = "tandem checkpoint index 1\n"

// maxIndexSize bounds the index file read: the walk's bounds keep a real
// one far smaller.
const maxIndexSize = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// loadIndex reads the index the repository keeps, once, before its first
// snapshot or look at the files.
func (r *Repo) loadIndex() {
	if r.loaded {
		return
	}
	r.loaded = true
	stats, last, trees, tree, ok := r.readIndex()
	if !ok {
		return
	}
	r.stats, r.last, r.trees, r.lastTree = stats, last, trees, tree
}

func (r *Repo) readIndex() (stats map[string]stat, last map[string]entry, trees map[string]plumbing.Hash, tree plumbing.Hash, ok bool) {
	f, err := os.Open(filepath.Join(r.dir, indexName))
	if err != nil {
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil || len(data) > maxIndexSize || len(data) < len(indexMagic)+4 {
		return
	}
	body, sum := data[:len(data)-4], data[len(data)-4:]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(sum) {
		return
	}
	d := decoder{b: body}
	if string(d.bytes(len(indexMagic))) != indexMagic || string(d.bytes(int(d.uvarint()))) != r.env.Root {
		return
	}
	copy(tree[:], d.bytes(len(tree)))
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		return
	}
	now := time.Now().UnixNano()
	stats = make(map[string]stat, n)
	last = make(map[string]entry, n)
	for range n {
		p := string(d.bytes(int(d.uvarint())))
		var e entry
		e.mode = filemode.FileMode(d.uvarint())
		copy(e.hash[:], d.bytes(len(e.hash)))
		last[p] = e
		if d.byte() == 1 {
			s := stat{size: d.varint(), mtime: d.varint(), ctime: d.varint(), ino: d.uvarint(), hashed: d.varint(), mode: e.mode, hash: e.hash}
			if s.hashed <= now { // a clock set back since cannot tell what is racy
				stats[p] = s
			}
		}
	}
	n = d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		return
	}
	trees = make(map[string]plumbing.Hash, n)
	for range n {
		dir := string(d.bytes(int(d.uvarint())))
		var h plumbing.Hash
		copy(h[:], d.bytes(len(h)))
		trees[dir] = h
	}
	if d.err != nil || len(d.b) != 0 || trees[""] != tree || !r.objs.has(tree) {
		return
	}
	return stats, last, trees, tree, true
}

// saveIndex writes the index to its file, whole or not at all: to a
// temporary file renamed over the old one.
func (r *Repo) saveIndex() error {
	b := make([]byte, 0, 64+len(r.last)*96)
	b = append(b, indexMagic...)
	b = binary.AppendUvarint(b, uint64(len(r.env.Root)))
	b = append(b, r.env.Root...)
	b = append(b, r.lastTree[:]...)
	b = binary.AppendUvarint(b, uint64(len(r.last)))
	for p, e := range r.last {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, uint64(e.mode))
		b = append(b, e.hash[:]...)
		s, ok := r.stats[p]
		if !ok || s.hash != e.hash || s.mode != e.mode {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.AppendVarint(b, s.size)
		b = binary.AppendVarint(b, s.mtime)
		b = binary.AppendVarint(b, s.ctime)
		b = binary.AppendUvarint(b, s.ino)
		b = binary.AppendVarint(b, s.hashed)
	}
	b = binary.AppendUvarint(b, uint64(len(r.trees)))
	for dir, h := range r.trees {
		b = binary.AppendUvarint(b, uint64(len(dir)))
		b = append(b, dir...)
		b = append(b, h[:]...)
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return writeAtomic(filepath.Join(r.dir, indexName), b)
}

// dropIndex removes the index's file: what it vouched for may be gone.
func (r *Repo) dropIndex() error {
	err := os.Remove(filepath.Join(r.dir, indexName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// writeAtomic writes data to a private file at name, through a temporary
// file beside it renamed over it.
func writeAtomic(name string, data []byte) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := name + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// decoder reads the index's fields, remembering the first error.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("index cut short")

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zig-zag encoded uvarint.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}
