// Package procgroup runs a command together with everything it starts as one
// unit, so that stopping the command stops its children too: a process group
// on Unix, a job object on Windows (which has no process groups to signal).
// The shell of the bash tool and the stdio MCP servers are run this way: a
// cancel or a workspace close must leave nothing of them behind.
package procgroup

import (
	"os/exec"
	"time"
)

// pollEvery is how often Stop looks whether the group is empty yet: it only
// shortens a prompt exit, since the kill follows regardless.
const pollEvery = 10 * time.Millisecond

// Prepare makes cmd, not started yet, the leader of a group of its own,
// which the processes it starts join.
func Prepare(cmd *exec.Cmd) { prepare(cmd) }

// Of returns the group of cmd, which Prepare prepared and Start started.
// Release it once the command is done.
func Of(cmd *exec.Cmd) *Group { return of(cmd) }

// Stop stops every process of the group: Terminate first so that programs
// can clean up, then, after grace or as soon as the group is empty, Kill
// for whatever is left (grandchildren that ignore SIGTERM included).
func (g *Group) Stop(grace time.Duration) {
	if !g.Terminate() {
		return // the group is gone already
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			g.Kill()
			return
		case <-tick.C:
			if !g.alive() {
				return
			}
		}
	}
}
