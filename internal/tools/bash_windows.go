//go:build windows

package tools

import (
	"os/exec"
)

// shellCommand runs command with bash when one is on PATH (Git for Windows,
// MSYS2, WSL's launcher), as models write bash; else with cmd.exe.
func shellCommand(command string) (string, []string) {
	if bash, err := exec.LookPath("bash"); err == nil {
		return bash, []string{"-c", command}
	}
	return "cmd.exe", []string{"/C", command}
}

// exitNote describes how a command that did not exit normally ended.
func exitNote(ee *exec.ExitError) string { return ee.Error() }
