//go:build windows

package main

import (
	"syscall"
	"time"
)

// rusage is the CPU time (user and kernel) this process has used.
func rusage() time.Duration {
	self, err := syscall.GetCurrentProcess()
	if err != nil {
		fatalf("GetCurrentProcess: %v", err)
	}
	var creation, exit, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(self, &creation, &exit, &kernel, &user); err != nil {
		fatalf("GetProcessTimes: %v", err)
	}
	// FILETIMEs here are durations in 100 ns units, not dates.
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
