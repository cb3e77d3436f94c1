//go:build !linux && !darwin && !freebsd && !netbsd

package checkpoint

import "io/fs"

// changeTime is the file's inode change time and inode number, 0 when
// the platform does not tell: there the stat cache goes by size, mode
// and modification time alone.
func changeTime(fs.FileInfo) (int64, uint64) { return 0, 0 }
