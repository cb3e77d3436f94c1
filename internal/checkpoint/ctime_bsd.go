//go:build darwin || freebsd || netbsd

package checkpoint

import (
	"io/fs"
	"syscall"
)

// changeTime is the file's inode change time and inode number, 0 when
// the platform does not tell.
func changeTime(fi fs.FileInfo) (int64, uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ctimespec.Nano(), uint64(st.Ino)
}
