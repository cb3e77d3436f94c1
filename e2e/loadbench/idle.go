package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The idle phase: a fresh server takes many idle streams at once (issue
// 35, target 2: 20,000 streams open within 10 s, each at most 16 KiB). Its
// size is set by these flags, so that it can run small.
var (
	idleTotal       = flag.Int("idle", 20000, "idle phase: idle streams opened, spread over -idle-workspaces (each takes an open file here and one in the server: see ulimit -Hn)")
	idleWorkspaces  = flag.Int("idle-workspaces", 100, "idle phase: workspaces (as many as the streams phase spreads its streams over)")
	idleConcurrency = flag.Int("idle-concurrency", 500, "idle phase: streams being opened at a time")
)

// idleFileMargin is the open files the server and this process need
// besides the idle streams.
const idleFileMargin = 256

var idlePhase = ownPhase{
	name: "idle",
	run:  runIdle,
	metrics: func(config) []metric {
		return []metric{
			{"idle-n", fmt.Sprintf("idle streams opened (-idle %d, fewer if the open files limit is lower)", *idleTotal), ""},
			{"idle-open", "idle streams: time to open them all (target ≤ 10 s for 20,000)", "ns"},
			{"idle-rss", "idle streams: RSS per stream (target ≤ 16 KiB)", "KiB"},
			{"idle-fds", "idle streams: server's open files", ""},
			{"idle-fd-limit", "idle streams: server's open files limit (soft)", ""},
			{"idle-overflows", "idle streams: accept queue overflows", ""},
		}
	},
}

// runIdle opens -idle streams on a quiet fresh server, each on a
// workspace's events with a client id of its own, as the browser tabs of
// many users left open do, and measures the time until the last one is
// open (its stream.opened read) and the RSS each one adds.
//
// They are opened -idle-concurrency at a time, as fast as that lets them:
// the server, not the kernel, is then what the figure measures, since
// fewer handshakes are in flight than the listener's accept queue holds
// (net.core.somaxconn, 4096 on most hosts). Opening all at once would
// overflow that queue, and a client whose handshake was dropped tries
// again a second or more later: that is the storm's figure (see the
// streams phase), not the server's. The overflows row says whether any
// happened all the same.
func runIdle(cfg config, bin, modelURL string, res result) error {
	total, wsN, conc := *idleTotal, *idleWorkspaces, *idleConcurrency
	if wsN < 1 || total < wsN || conc < 1 {
		return fmt.Errorf("need 1 <= -idle-workspaces <= -idle and -idle-concurrency >= 1 (got %d, %d, %d)", wsN, total, conc)
	}
	// This process holds every stream's connection, and so does the
	// server, besides its own files. Where the hard limit is lower and
	// cannot be raised, the phase opens what fits, and says so.
	if err := raiseFileLimit(total + idleFileMargin); err != nil {
		fit := hardFileLimit() - idleFileMargin
		if fit < wsN || fit >= total {
			return fmt.Errorf("%w (-idle sets how many streams)", err)
		}
		fmt.Fprintf(os.Stderr, "idle: %v: opening %d streams, not %d\n", err, fit, total)
		total = fit
		if err := raiseFileLimit(total + idleFileMargin); err != nil {
			return err
		}
	}
	res["idle-n"] = float64(total)
	srv, err := startServer(bin, modelURL)
	if err != nil {
		return err
	}
	defer srv.stop()
	c := newClient(srv)
	defer c.close()
	root, err := os.MkdirTemp("", "loadbench-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	wss := make([]*streamsWorkspace, wsN)
	for i := range wss {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		id, err := c.workspace(dir)
		if err != nil {
			return err
		}
		wss[i] = &streamsWorkspace{id: id}
	}
	clients := make([]*streamClient, total)
	for i := range clients {
		clients[i] = newStreamClient(wss[i%wsN], "")
	}
	defer func() {
		for _, cl := range clients {
			cl.drop()
		}
	}()
	// A few runs first, so that the baseline is a server in use, as the
	// memory phase's is.
	if err := warmIdle(c, wss[0].id); err != nil {
		return err
	}
	c.close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := srv.settledRSS(ctx, 2*time.Second)
	fmt.Fprintf(os.Stderr, "idle: opening %d streams, %d at a time\n", total, conc)
	overflows := listenOverflows()
	began := time.Now()
	if err := openStreams(srv.addr, clients, conc); err != nil {
		return err
	}
	for _, cl := range clients {
		select {
		case <-cl.opened:
		case <-cl.done:
			if err := cl.failure(); err != nil {
				return err
			}
			return fmt.Errorf("client %s: the stream ended before stream.opened", cl.id)
		case <-ctx.Done():
			return fmt.Errorf("client %s: no stream.opened: %w", cl.id, errTimeout)
		}
	}
	res["idle-open"] = float64(time.Since(began))
	res["idle-overflows"] = float64(listenOverflows() - overflows)
	res["idle-fds"] = float64(srv.openFiles())
	res["idle-fd-limit"] = float64(srv.fileLimit())
	after := srv.settledRSS(ctx, 2*time.Second)
	res["idle-rss"] = float64(after-before) / float64(total) / 1024
	for _, cl := range clients {
		if err := cl.failure(); err != nil {
			return err
		}
	}
	return nil
}

// warmIdle runs a few fast runs in a session of workspace ws, following
// them on a stream of its own (closed after).
func warmIdle(c *client, ws string) error {
	sid, err := c.session(ws)
	if err != nil {
		return err
	}
	tracker, stop, err := followRuns(c, ws)
	if err != nil {
		return err
	}
	defer stop()
	for i := range 5 {
		id, err := c.prompt(ws, sid, fmt.Sprintf("fast %d", i))
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		_, _, err = tracker.wait(ctx, id)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// fileLimit is the server process's soft limit on open files (0 where
// /proc does not say).
func (s *server) fileLimit() int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// openFiles is how many files the server process holds open (0 where
// /proc does not say).
func (s *server) openFiles() int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return len(ents)
}
