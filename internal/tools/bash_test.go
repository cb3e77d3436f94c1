package tools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// alive reports whether pid is a live process. Zombies count as dead: they
// hold no resources, and whether they are reaped promptly depends on this
// machine's init, not on the tool.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}

// groupAlive reports whether any non-zombie process is in process group pgid.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // kill(2) said the group exists and we cannot look closer
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pg, err := syscall.Getpgid(pid); err == nil && pg == pgid && alive(pid) {
			return true
		}
	}
	return false
}

// waitPids waits until the command under test has written its pids (one per
// line) to file, and returns them.
func waitPids(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		fields := strings.Fields(string(b))
		if len(fields) < n {
			return false
		}
		pids = pids[:0]
		for _, f := range fields {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return false
			}
			pids = append(pids, pid)
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
	return pids
}

func runBash(ctx context.Context, t *testing.T, env Env, args map[string]any) Result {
	t.Helper()
	return toolByName(t, "bash").Run(ctx, env, mustJSON(t, args))
}

func TestBash(t *testing.T) {
	env := newEnv(t)

	r := runBash(context.Background(), t, env, map[string]any{"command": "echo hello"})
	requireOK(t, r)
	require.Equal(t, "hello\n", r.Content)

	r = runBash(context.Background(), t, env, map[string]any{"command": "pwd"})
	requireOK(t, r)
	require.Equal(t, env.Root+"\n", r.Content)

	r = runBash(context.Background(), t, env, map[string]any{"command": "echo out; echo err >&2; exit 3"})
	require.True(t, r.IsError)
	require.Equal(t, "out\nerr\n[exit code: 3]", r.Content)

	r = runBash(context.Background(), t, env, map[string]any{"command": "true"})
	requireOK(t, r)
	require.Equal(t, "(no output)", r.Content)

	// stdin is /dev/null: cat must not wait for input.
	r = runBash(context.Background(), t, env, map[string]any{"command": "cat; echo done"})
	requireOK(t, r)
	require.Equal(t, "done\n", r.Content)

	r = runBash(context.Background(), t, env, map[string]any{"command": "kill -KILL $$"})
	requireErr(t, r, "killed by signal: killed")

	// Bash, not sh: bash-only syntax works.
	r = runBash(context.Background(), t, env, map[string]any{"command": `x=(a b); echo "${x[1]}"`})
	requireOK(t, r)
	require.Equal(t, "b\n", r.Content)

	requireErr(t, runBash(context.Background(), t, env, map[string]any{"command": "  "}), "must not be empty")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	requireErr(t, runBash(ctx, t, env, map[string]any{"command": "touch started"}), "not started")
	_, err := os.Stat(filepath.Join(env.Root, "started"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestBashTimeoutArg(t *testing.T) {
	require.Equal(t, bashDefaultTimeout, bashTimeout(optInt{}))
	require.Equal(t, bashDefaultTimeout, bashTimeout(optInt{set: true, v: 0}))
	require.Equal(t, 1500*time.Millisecond, bashTimeout(optInt{set: true, v: 1500}))
	require.Equal(t, bashMaxTimeout, bashTimeout(optInt{set: true, v: 24 * 3600 * 1000}))
}

func TestBashTimeout(t *testing.T) {
	env := newEnv(t)
	start := time.Now()
	r := runBash(context.Background(), t, env, map[string]any{
		"command":    "echo $$ > pid; echo started; sleep 100",
		"timeout_ms": 300,
	})
	elapsed := time.Since(start)
	requireErr(t, r, "timed out after 300ms")
	require.Contains(t, r.Content, "started\n")
	require.Less(t, elapsed, 2*time.Second)
	pgid := waitPids(t, filepath.Join(env.Root, "pid"), 1)[0]
	require.Eventually(t, func() bool { return !groupAlive(pgid) }, time.Second, 5*time.Millisecond)
}

// TestBashCancelKillsGroup is invariant 6 of the contract: a cancel kills the
// tool's whole process group, grandchildren included, within 2 s.
func TestBashCancelKillsGroup(t *testing.T) {
	cases := map[string]string{
		"sleep":       "echo $$ > pids; exec sleep 100",
		"grandchild":  "echo $$ > pids; sleep 100 & echo $! >> pids; sleep 100; wait",
		"ignore-term": "echo $$ > pids; (trap '' TERM; exec sleep 100) & echo $! >> pids; trap '' TERM; sleep 100; wait",
		"holds-pipe":  "echo $$ > pids; (sleep 100 >&1 2>&1) & echo $! >> pids; wait",
	}
	want := map[string]int{"sleep": 1, "grandchild": 2, "ignore-term": 2, "holds-pipe": 2}
	for name, command := range cases {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan Result, 1)
			go func() { res <- runBash(ctx, t, env, map[string]any{"command": command}) }()

			pids := waitPids(t, filepath.Join(env.Root, "pids"), want[name])
			pgid := pids[0]
			for _, pid := range pids {
				pg, err := syscall.Getpgid(pid)
				require.NoError(t, err)
				require.Equal(t, pgid, pg, "the shell leads its own group")
			}
			require.NotEqual(t, syscall.Getpgrp(), pgid)

			start := time.Now()
			cancel()
			var r Result
			select {
			case r = <-res:
			case <-time.After(2 * time.Second):
				t.Fatal("Run did not return within 2s of cancel")
			}
			requireErr(t, r, "canceled")
			require.Eventually(t, func() bool { return !groupAlive(pgid) }, 2*time.Second-time.Since(start), 5*time.Millisecond)
			for _, pid := range pids {
				require.False(t, alive(pid), "pid %d survived", pid)
			}
			require.Less(t, time.Since(start), 2*time.Second)
		})
	}
}

// TestBashBackgroundKilledAtExit checks that a command's leftovers do not
// outlive the call, and do not hold the call open.
func TestBashBackgroundKilledAtExit(t *testing.T) {
	env := newEnv(t)
	start := time.Now()
	r := runBash(context.Background(), t, env, map[string]any{"command": "sleep 100 & echo $! > pid; echo bye"})
	requireOK(t, r)
	require.Equal(t, "bye\n", r.Content)
	require.Less(t, time.Since(start), 2*time.Second)
	pid := waitPids(t, filepath.Join(env.Root, "pid"), 1)[0]
	require.Eventually(t, func() bool { return !alive(pid) }, time.Second, 5*time.Millisecond)
}

// TestBashEscapedProcessHoldingPipe covers a process that left the group
// (so it cannot be killed with it) but keeps the output pipe open: Run must
// still return.
func TestBashEscapedProcessHoldingPipe(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not available")
	}
	env := newEnv(t)
	start := time.Now()
	r := runBash(context.Background(), t, env, map[string]any{"command": "setsid sh -c 'echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 30' & until [ -s pid ]; do sleep 0.01; done; echo hi"})
	elapsed := time.Since(start)
	pid := waitPids(t, filepath.Join(env.Root, "pid"), 1)[0]
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	requireOK(t, r)
	require.Contains(t, r.Content, "hi\n")
	require.Contains(t, r.Content, "output may be incomplete")
	require.Less(t, elapsed, 2*time.Second)
}

func TestBashOutputCap(t *testing.T) {
	env := newEnv(t)
	r := runBash(context.Background(), t, env, map[string]any{
		"command": "echo START; head -c 200000 /dev/zero | tr '\\0' a; echo; echo END",
	})
	requireOK(t, r)
	require.LessOrEqual(t, len(r.Content), maxOutput+200)
	require.True(t, strings.HasPrefix(r.Content, "START\naaa"), r.Content[:20])
	require.True(t, strings.HasSuffix(r.Content, "aaa\nEND\n"))
	require.Contains(t, r.Content, "[... output truncated: ")

	// Invalid UTF-8 from a command must not reach the model as is.
	r = runBash(context.Background(), t, env, map[string]any{"command": `printf 'ok\xff\xfe\n'`})
	requireOK(t, r)
	require.Equal(t, "ok\uFFFD\n", r.Content)
}

func TestHeadTail(t *testing.T) {
	h := newHeadTail(4, 4)
	for _, s := range []string{"ab", "cdef", "ghij", "k", "lmnopq", "rs"} {
		n, err := h.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	require.Equal(t, "abcd\n[... output truncated: 11 bytes omitted; to read all of it, redirect the command's output to a file and read that with view (offset, limit) ...]\npqrs", h.String())

	h = newHeadTail(4, 4)
	_, _ = h.Write([]byte("abcdefg"))
	require.Equal(t, "abcdefg", h.String())
}
