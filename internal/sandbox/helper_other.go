//go:build !linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
)

// prepare has nothing to add where no mechanism is implemented.
func prepare(*exec.Cmd) {}

// probe: no mechanism confines commands on this system yet (macOS's
// sandbox-exec and Windows' AppContainers would), so confined commands
// do not run.
func (l *Launcher) probe(context.Context) Status {
	return Status{Mechanism: "none", Reason: fmt.Sprintf("Tandem has no sandbox for %s yet (on Linux it uses Landlock)", runtime.GOOS)}
}

// Main refuses: nothing is confined on this system.
func Main(_ []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "tandem sandbox: no sandbox for %s; the command did not run\n", runtime.GOOS)
	return 125
}
