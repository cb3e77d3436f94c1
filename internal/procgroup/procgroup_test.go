//go:build unix

package procgroup

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gone reports whether pid is dead or a zombie within 2 s (a SIGKILL is
// delivered when the process is next scheduled).
func gone(pid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil || zombie(pid) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func zombie(pid int) bool {
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "Z")
}

// startTree starts a shell that ignores SIGTERM and a grandchild that does
// too, and returns the shell's command and the grandchild's pid.
func startTree(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", `trap "" TERM; sh -c 'trap "" TERM; sleep 60' & echo $!; wait`)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	Prepare(cmd)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	child, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	return cmd, child
}

// TestStopKillsTheWholeTree: what ignores SIGTERM is killed after the grace,
// the command's children included.
func TestStopKillsTheWholeTree(t *testing.T) {
	cmd, child := startTree(t)
	g := Of(cmd)
	defer g.Release()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	start := time.Now()
	g.Stop(100 * time.Millisecond)
	require.Less(t, time.Since(start), time.Second, "Stop returns after the grace")
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the leader was not killed")
	}
	require.True(t, gone(child), "the grandchild went with its group")
}

// TestStopReturnsAtOnceForAPoliteGroup: a group that exits on SIGTERM does
// not cost the whole grace.
func TestStopReturnsAtOnceForAPoliteGroup(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60")
	Prepare(cmd)
	require.NoError(t, cmd.Start())
	g := Of(cmd)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	start := time.Now()
	g.Stop(time.Minute)
	require.Less(t, time.Since(start), 5*time.Second)
	<-done
	require.False(t, g.Terminate(), "the group is gone")
}

func TestKill(t *testing.T) {
	cmd, child := startTree(t)
	g := Of(cmd)
	g.Kill()
	_ = cmd.Wait()
	require.True(t, gone(child))
}
