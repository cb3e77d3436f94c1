package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a `tandem serve` process, run as a user runs it, with its data
// and config in a directory of its own.
type server struct {
	cmd  *exec.Cmd
	url  string // http://HOST:PORT
	addr string // HOST:PORT
	dir  string
	exit chan error
	// copilot receives the address of the Copilot SDK protocol's listener
	// when the server was started with TANDEM_COPILOT_ADDR.
	copilot chan string
}

const token = "loadbench-token"

// startServer starts bin with env added to its environment (a cluster
// node's store, bus and node id).
func startServer(bin, modelURL string, env ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "tandem-loadbench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--token", token, "--model", "openai/fake")
	cmd.Env = append(os.Environ(),
		"OPENAI_API_KEY=loadbench", "OPENAI_BASE_URL="+modelURL+"/v1",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "xdg"))
	cmd.Env = append(cmd.Env, env...)
	// The server's log goes to a file, shown if it fails to start.
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, dir: dir, exit: make(chan error, 1), copilot: make(chan string, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "tandem listening on "); ok {
				lines <- u
			}
			if a, ok := strings.CutPrefix(sc.Text(), "tandem serving the Copilot SDK protocol on "); ok {
				s.copilot <- a
			}
		}
		s.exit <- cmd.Wait()
	}()
	select {
	case s.url = <-lines:
		s.addr = strings.TrimPrefix(s.url, "http://")
		return s, nil
	case err := <-s.exit:
		log, _ := os.ReadFile(logf.Name())
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s exited before listening: %v\n%s", bin, err, log)
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s did not listen within 30 s", bin)
	}
}

// stop ends the server as a user does (SIGTERM) and removes its data.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	awaitExit(s.cmd, s.exit)
	os.RemoveAll(s.dir)
}

// awaitExit waits for a child told to stop to exit, and kills it after
// 15 s.
func awaitExit(cmd *exec.Cmd, exit <-chan error) {
	select {
	case <-exit:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
	}
}

// cpu is the CPU time (user and system) the server process has used.
func (s *server) cpu() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// rss is the server process's resident memory, in bytes.
func (s *server) rss() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settledRSS waits for the server's RSS to stop falling (the Go runtime
// gives memory back to the OS in the background) for up to d, and returns
// the lowest value seen.
func (s *server) settledRSS(ctx context.Context, d time.Duration) int64 {
	low := s.rss()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			return low
		case <-end:
			return low
		case <-t.C:
			low = min(low, s.rss())
		}
	}
}

var errTimeout = errors.New("timed out")
