//go:build unix

package tools

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// shellCommand runs command with bash, which models expect, falling back to
// sh so that minimal images still work.
func shellCommand(command string) (string, []string) {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash", []string{"-c", command}
	}
	return "/bin/sh", []string{"-c", command}
}

// exitNote describes how a command that did not exit normally ended.
func exitNote(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal: %v", ws.Signal())
	}
	return ee.Error()
}
