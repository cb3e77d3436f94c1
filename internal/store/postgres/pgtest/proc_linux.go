package pgtest

import "syscall"

// setDeathSignal has the kernel kill the server when the test binary dies.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
