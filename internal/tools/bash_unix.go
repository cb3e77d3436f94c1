//go:build unix

package tools

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// shellCommand runs command with bash, which models expect, falling back to
// sh so that minimal images still work.
func shellCommand(command string) (string, []string) {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash", []string{"-c", command}
	}
	return "/bin/sh", []string{"-c", command}
}

// newGroup makes the shell the leader of a new process group, which its
// children join: the whole group can then be signalled at once.
func newGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// procGroup is the process group of a started command.
type procGroup struct{ pgid int }

func startedGroup(cmd *exec.Cmd) procGroup { return procGroup{pgid: cmd.Process.Pid} }

// terminate stops every process of the group: SIGTERM first so programs
// can clean up, then SIGKILL after bashGrace for whatever is left
// (including grandchildren that ignore SIGTERM).
func (g procGroup) terminate() {
	if syscall.Kill(-g.pgid, syscall.SIGTERM) != nil {
		return // ESRCH: the group is already gone
	}
	deadline := time.NewTimer(bashGrace)
	defer deadline.Stop()
	// Poll for the group to empty so a prompt exit does not pay the whole
	// grace period; this affects only latency, never correctness, since
	// SIGKILL follows regardless.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
			return
		case <-tick.C:
			if syscall.Kill(-g.pgid, 0) != nil {
				return
			}
		}
	}
}

func (procGroup) release() {}

// exitNote describes how a command that did not exit normally ended.
func exitNote(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal: %v", ws.Signal())
	}
	return ee.Error()
}
