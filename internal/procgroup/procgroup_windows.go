//go:build windows

package procgroup

import (
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

func prepare(*exec.Cmd) {}

// Group is the job object holding a started command and every process it
// starts: terminating the job ends the whole tree, and so does closing its
// last handle (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), so nothing outlives
// Release. A child started in the instant between the command's start and
// its assignment to the job escapes it; when no job can be made, only the
// command itself is killed (Process.Kill).
type Group struct {
	cmd *exec.Cmd

	mu  sync.Mutex
	job windows.Handle
}

func of(cmd *exec.Cmd) *Group {
	g := &Group{cmd: cmd}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return g
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return g
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		windows.CloseHandle(job)
		return g
	}
	defer windows.CloseHandle(proc)
	if err := windows.AssignProcessToJobObject(job, proc); err != nil {
		windows.CloseHandle(job)
		return g
	}
	g.job = job
	return g
}

// Terminate ends the whole tree at once: Windows has no SIGTERM for console
// programs to clean up on. It reports whether there was a tree to end.
func (g *Group) Terminate() bool {
	g.Kill()
	return false
}

// Kill ends every process of the job.
func (g *Group) Kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		_ = windows.TerminateJobObject(g.job, 1)
		return
	}
	_ = g.cmd.Process.Kill()
}

func (g *Group) alive() bool { return false }

// Release closes the job, which ends any process still in it.
func (g *Group) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		windows.CloseHandle(g.job)
		g.job = 0
	}
}
