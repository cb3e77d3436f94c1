//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises this process's limit on open files to need, or to
// its hard limit if that is more, and fails when it cannot. Raising the
// hard limit takes privilege (root, or CAP_SYS_RESOURCE); the servers this
// process starts inherit the limits, and raise their own soft limit to the
// hard one as they start.
func raiseFileLimit(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read the open files limit: %w", err)
	}
	want := lim
	want.Max = max(lim.Max, uint64(need))
	want.Cur = want.Max
	if want == lim {
		return nil
	}
	err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	if err != nil && lim.Max >= uint64(need) {
		// Some systems (macOS) take no soft limit as high as an
		// unlimited hard one: need is enough.
		want.Max, want.Cur = lim.Max, max(lim.Cur, uint64(need))
		err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
	}
	switch {
	case err != nil && lim.Max < uint64(need):
		return fmt.Errorf("this phase needs %d open files and the hard limit is %d, which only root raises: raise it (ulimit -Hn) or run the phase smaller: %w", need, lim.Max, err)
	case err != nil:
		return fmt.Errorf("raise the open files limit to %d: %w", want.Cur, err)
	}
	return nil
}

// hardFileLimit is this process's hard limit on open files (0 if unknown).
func hardFileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(lim.Max, 1<<30))
}
