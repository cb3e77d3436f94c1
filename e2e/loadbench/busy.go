package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// A busy host: every user's machine has other work on it, and a target
// that holds only on an idle one does not hold. With -busy F loadbench
// runs a child process (itself again) that keeps F of a CPU busy the whole
// time, in slices of busySlice, as a browser or an editor would.

// busyEnv names the share of a CPU a child keeps busy.
const busyEnv = "LOADBENCH_BUSY"

const busySlice = 10 * time.Millisecond

// runBusy, in the child, spins for share of every busySlice until its
// standard input ends (the parent closed it, or died).
func runBusy(share float64) {
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	spin := time.Duration(float64(busySlice) * share)
	for {
		select {
		case <-done:
			return
		default:
		}
		start := time.Now()
		for time.Since(start) < spin {
		}
		time.Sleep(busySlice - spin)
	}
}

// startBusy starts the child; the returned func stops it.
func startBusy(share float64) (stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), busyEnv+"="+strconv.FormatFloat(share, 'f', -1, 64))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the busy child: %w", err)
	}
	return func() { in.Close(); _ = cmd.Wait() }, nil
}
