package mcp

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
)

func TestMain(m *testing.M) {
	// This test binary is also the stdio MCP server the tests start.
	mcptest.Main()
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on an event; generous for a loaded machine.
const waitTimeout = 20 * time.Second

// testServer is the test binary run as an MCP server in mode.
func testServer(mode string, env map[string]string) config.MCPServer {
	e := map[string]string{mcptest.EnvMode: mode}
	for k, v := range env {
		e[k] = v
	}
	return config.MCPServer{Type: config.TransportStdio, Command: os.Args[0], Env: e}
}

// recorder is a Reporter that keeps every status and lets a test wait for one.
type recorder struct {
	mu   sync.Mutex
	cond *sync.Cond
	all  []Status
}

func newRecorder() *recorder {
	r := &recorder{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *recorder) MCPStatus(st Status) {
	r.mu.Lock()
	r.all = append(r.all, st)
	r.cond.Broadcast()
	r.mu.Unlock()
}

func (r *recorder) statuses() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// wait returns the first status that matches, waiting for it.
func (r *recorder) wait(t *testing.T, match func(Status) bool) Status {
	t.Helper()
	st, ok := waitCond(&r.mu, r.cond, func() (Status, bool) {
		for _, s := range r.all {
			if match(s) {
				return s, true
			}
		}
		return Status{}, false
	})
	if !ok {
		t.Fatalf("no matching status within %s; got %+v", waitTimeout, r.statuses())
	}
	return st
}

func (r *recorder) waitStatus(t *testing.T, server, status string) Status {
	t.Helper()
	return r.wait(t, func(s Status) bool { return s.Server == server && s.Status == status })
}

// waitCond waits under mu (with cond) until check reports ok or waitTimeout.
func waitCond[T any](mu *sync.Mutex, cond *sync.Cond, check func() (T, bool)) (T, bool) {
	deadline := time.Now().Add(waitTimeout)
	timer := time.AfterFunc(waitTimeout, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer timer.Stop()
	mu.Lock()
	defer mu.Unlock()
	for {
		if v, ok := check(); ok {
			return v, true
		}
		if time.Now().After(deadline) {
			var zero T
			return zero, false
		}
		cond.Wait()
	}
}

// lines is a slog.Handler keeping the stderr lines of servers, so that a
// test can wait for what a server says.
type lines struct {
	mu   *sync.Mutex
	cond *sync.Cond
	got  *[]string
}

func newLines() lines {
	mu := &sync.Mutex{}
	return lines{mu: mu, cond: sync.NewCond(mu), got: new([]string)}
}

func (l lines) Enabled(context.Context, slog.Level) bool { return true }
func (l lines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l lines) WithGroup(string) slog.Handler            { return l }
func (l lines) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "pid" {
			l.say("pid=" + a.Value.String())
		}
		if a.Key == "line" {
			l.mu.Lock()
			*l.got = append(*l.got, a.Value.String())
			l.cond.Broadcast()
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l lines) say(s string) {
	l.mu.Lock()
	*l.got = append(*l.got, s)
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l lines) wait(t *testing.T, want string) {
	t.Helper()
	_, ok := waitCond(l.mu, l.cond, func() (struct{}, bool) {
		return struct{}{}, slices.ContainsFunc(*l.got, func(s string) bool { return strings.Contains(s, want) })
	})
	if !ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		t.Fatalf("no line %q within %s; got %q", want, waitTimeout, *l.got)
	}
}

// alive reports whether pid is a live process: not gone and not a zombie
// (a killed grandchild may stay one under an init that does not reap).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// dies reports whether pid is dead within 2 s: a SIGKILL is delivered
// when the process is next scheduled, which on a loaded machine is not at
// once.
func dies(pid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func names(tools []Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}
