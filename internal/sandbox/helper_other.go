//go:build !linux

package sandbox

import (
	"context"
	"errors"
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

// helper is never started where nothing confines.
type helper struct{}

func (l *Launcher) spawn() (*helper, error) { return nil, errors.New("no sandbox on " + runtime.GOOS) }

func (h *helper) ready() error { return nil }

func (h *helper) interrupt() {}

func (h *helper) discard() {}

func (l *Launcher) startConfined(request, Stdio) (*exec.Cmd, error) {
	return nil, &UnavailableError{Reason: "no sandbox on " + runtime.GOOS}
}

// Main refuses: nothing is confined on this system.
func Main(_ []string, stderr io.Writer) int {
	fmt.Fprintf(stderr, "tandem sandbox: no sandbox for %s; the command did not run\n", runtime.GOOS)
	return 125
}
