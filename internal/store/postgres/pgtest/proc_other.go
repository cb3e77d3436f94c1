//go:build unix && !linux

package pgtest

import "syscall"

// setDeathSignal does nothing where the kernel has no parent-death
// signal; Main still stops the server after the tests.
func setDeathSignal(*syscall.SysProcAttr) {}
