//go:build windows

package tools

import (
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// shellCommand runs command with bash when one is on PATH (Git for Windows,
// MSYS2, WSL's launcher), as models write bash; else with cmd.exe.
func shellCommand(command string) (string, []string) {
	if bash, err := exec.LookPath("bash"); err == nil {
		return bash, []string{"-c", command}
	}
	return "cmd.exe", []string{"/C", command}
}

func newGroup(*exec.Cmd) {}

// procGroup is the job object holding a started command and every process it
// starts (Windows has no process groups to signal): terminating the job ends
// the whole tree, and closing its last handle does too
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE), so nothing outlives the call. A
// child started in the instant between the shell's start and its assignment
// to the job escapes it; when no job can be made, only the shell itself is
// killed (Process.Kill).
type procGroup struct {
	cmd *exec.Cmd
	job windows.Handle
}

func startedGroup(cmd *exec.Cmd) procGroup {
	g := procGroup{cmd: cmd}
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

// terminate ends the command's whole tree at once: Windows has no SIGTERM
// for console programs to clean up on.
func (g procGroup) terminate() {
	if g.job != 0 {
		_ = windows.TerminateJobObject(g.job, 1)
		return
	}
	_ = g.cmd.Process.Kill()
}

func (g procGroup) release() {
	if g.job != 0 {
		windows.CloseHandle(g.job)
	}
}

// exitNote describes how a command that did not exit normally ended.
func exitNote(ee *exec.ExitError) string { return ee.Error() }
