//go:build unix

package procgroup

import (
	"os/exec"
	"syscall"
)

func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// Group is the process group of a started command. Its id stays the
// leader's pid while any member lives, so it names no other group.
type Group struct{ pgid int }

func of(cmd *exec.Cmd) *Group { return &Group{pgid: cmd.Process.Pid} }

// Terminate sends SIGTERM to every process of the group. It reports false
// when the group is already gone.
func (g *Group) Terminate() bool {
	return syscall.Kill(-g.pgid, syscall.SIGTERM) == nil
}

// Kill sends SIGKILL to every process of the group.
func (g *Group) Kill() { _ = syscall.Kill(-g.pgid, syscall.SIGKILL) }

func (g *Group) alive() bool { return syscall.Kill(-g.pgid, 0) == nil }

// Release frees what the group holds; nothing on Unix.
func (g *Group) Release() {}
