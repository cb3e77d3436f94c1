//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises this process's soft limit on open files to its
// hard limit, and fails when even that is under need.
func raiseFileLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open files limit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("raise the open files limit to %d: %w", lim.Max, err)
		}
	}
	if lim.Cur < uint64(need) {
		return fmt.Errorf("the streams phase needs %d open files and the hard limit is %d: raise it (ulimit -Hn) or run fewer -streams", need, lim.Cur)
	}
	return nil
}
