//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/sandbox"
)

// BenchmarkBashFirstByte is the time from starting a bash call's command
// to its first byte of output, as the bash tool starts it: confined (the
// helper, namespaces, Landlock, seccomp, then bash) against "off" (bash
// alone), p50 and p99. The target is under 5 ms more at p50.
func BenchmarkBashFirstByte(b *testing.B) {
	launcher := sandbox.NewLauncher(context.Background(), sandboxHelper)
	require.True(b, launcher.Status().Available, "%+v", launcher.Status())
	dir := b.TempDir()
	spec := sandbox.Spec{Root: filepath.Join(dir, "ws"), Tmp: filepath.Join(dir, "tmp"), Cache: filepath.Join(dir, "cache")}
	for _, mode := range []string{sandbox.ModeOff, sandbox.ModeWorkspace} {
		b.Run(mode, func(b *testing.B) {
			spec := spec
			spec.Mode = mode
			box := launcher.Box(spec, nil)
			require.NoError(b, os.MkdirAll(spec.Root, 0o755))
			var took []time.Duration
			for b.Loop() {
				if mode != sandbox.ModeOff {
					// As between an agent's commands (a model turn apart),
					// a helper waits ahead of the call.
					b.StopTimer()
					waitingHelpers(b, warmAhead)
					b.StartTimer()
				}
				took = append(took, firstByte(b, box, spec.Root))
			}
			if os.Getenv("SBX_DEBUG") != "" {
				b.Log(took)
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
	launcher.Close()
}

// BenchmarkSandboxHelperMemory is what a helper waiting for its command
// holds: its resident memory, and the part of it that is its own (not
// the tandem binary's pages, which it shares with the server).
func BenchmarkSandboxHelperMemory(b *testing.B) {
	launcher := sandbox.NewLauncher(context.Background(), sandboxHelper)
	defer launcher.Close()
	require.True(b, launcher.Status().Available, "%+v", launcher.Status())
	var rss, private float64
	for b.Loop() {
		pids := waitingHelpers(b, 2)
		require.NotEmpty(b, pids)
		for _, pid := range pids {
			r, p := smapsRollup(b, pid)
			rss, private = max(rss, r), max(private, p)
		}
	}
	b.ReportMetric(rss/1024, "helper-rss-MiB")
	b.ReportMetric(private/1024, "helper-private-MiB")
}

// recvmsg is the number of the system call a ready helper waits in.
var recvmsg = map[string]string{"amd64": "47", "arm64": "212"}

// waitingHelpers are this process's children ready as sandbox helpers
// (waiting in recvmsg for their command), once at least n are (or 10 s
// passed).
func waitingHelpers(b *testing.B, n int) []int {
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < n && time.Now().Before(deadline) {
		pids = pids[:0]
		ents, err := os.ReadDir("/proc")
		require.NoError(b, err)
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			syscall, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "syscall"))
			waiting := strings.HasPrefix(string(syscall), recvmsg[runtime.GOARCH]+" ")
			if waiting && strings.Contains(string(cmdline), sandbox.HelperCommand+"\x00"+sandbox.WaitArg) && len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// smapsRollup reads a process's resident and private memory, in KiB.
func smapsRollup(b *testing.B, pid int) (rss, private float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "Rss:":
			rss = v
		case "Private_Clean:", "Private_Dirty:":
			private += v
		}
	}
	return rss, private
}

// warmAhead is how many helpers exist once the launcher's are all ready:
// two waiting in its queue and a third waiting to join it.
const warmAhead = 3

// firstByte starts `echo x` under box and returns how long its first byte
// of output took, then waits for it.
func firstByte(b *testing.B, box *sandbox.Box, dir string) time.Duration {
	pr, pw, err := os.Pipe()
	require.NoError(b, err)
	defer pr.Close()
	start := time.Now()
	cmd, err := box.Start(dir, nil, pw, "/bin/bash", "-c", "echo x")
	pw.Close()
	require.NoError(b, err)
	buf := make([]byte, 1)
	_, err = pr.Read(buf)
	took := time.Since(start)
	require.NoError(b, err)
	require.NoError(b, cmd.Wait())
	return took
}
