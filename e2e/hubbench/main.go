// Command bench compares internal/hub with r3labs/sse/v2's server on the same
// workloads, over loopback HTTP, in one run:
//
//	go run ./e2e/hubbench [-subs 10,100,1000] [-events 1000] [-rate 200]
//
// Sections: load (steady rate and bursts: deliveries/s, server CPU per
// delivery, publish-to-receive latency), stall (one subscriber that never
// reads among many), memory (per idle stream) and churn (goroutines left
// after connect/disconnect cycles). Subscribers run in a child process; see
// reader.go for why.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-dev/tandem/e2e/benchkit"
)

type config struct {
	subs        []int
	events      int
	rate        int
	burst       int
	gap         time.Duration
	modes       []string
	stallSubs   int
	stallEvents int
	idleStreams int
	cycles      int
	sndbuf      int
	sections    map[string]bool
}

func main() {
	var (
		subs     = flag.String("subs", "10,100,1000", "subscriber counts for the load section")
		events   = flag.Int("events", 1000, "events published per load run")
		rate     = flag.Int("rate", 200, "events/s in steady mode")
		burst    = flag.Int("burst", 50, "events per burst in burst mode, published back to back")
		gap      = flag.Duration("gap", 5*time.Millisecond, "pause between bursts in burst mode")
		modes    = flag.String("modes", "steady,burst", "load modes")
		stallN   = flag.Int("stall-subs", 1000, "healthy subscribers in the stall section (plus one stalled)")
		stallEv  = flag.Int("stall-events", 1000, "events published in the stall section (steady rate)")
		sndbuf   = flag.Int("stall-sndbuf", 32<<10, "server socket send buffer in the stall section (0: kernel autotuning)")
		idle     = flag.Int("idle-streams", 1000, "idle streams opened to measure memory")
		cycles   = flag.Int("cycles", 10000, "connect/disconnect cycles in the churn section")
		sections = flag.String("sections", "load,stall,memory,churn", "sections to run")
		cpuprof  = flag.String("cpuprofile", "", "write the server process's CPU profile to this file")

		child  = flag.String("child", "", "internal: run as the subscriber process (read|churn)")
		addr   = flag.String("addr", "", "internal: server address")
		path   = flag.String("path", "", "internal: request path")
		conns  = flag.Int("conns", 0, "internal: subscriber connections")
		expect = flag.Int64("expect", 0, "internal: events each connection waits for")
		stall  = flag.Bool("stall", false, "internal: add a subscriber that never reads")
		idleTO = flag.Duration("idle", 3*time.Second, "internal: give up after this long without a frame")
		par    = flag.Int("par", 50, "internal: parallel churn workers")
	)
	flag.Parse()
	if *child != "" {
		runChild(childOpts{mode: *child, addr: *addr, path: *path, conns: *conns, expect: *expect,
			stall: *stall, idle: *idleTO, cycles: *cycles, par: *par})
		return
	}

	cfg := config{events: *events, rate: *rate, burst: *burst, gap: *gap, stallSubs: *stallN,
		stallEvents: *stallEv, idleStreams: *idle, cycles: *cycles, sndbuf: *sndbuf, sections: map[string]bool{}}
	for _, s := range strings.Split(*subs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("bad -subs %q", *subs)
		}
		cfg.subs = append(cfg.subs, n)
	}
	cfg.modes = strings.Split(*modes, ",")
	for _, s := range strings.Split(*sections, ",") {
		cfg.sections[strings.TrimSpace(s)] = true
	}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fatalf("cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatalf("cpuprofile: %v", err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	run(cfg)
}

func run(cfg config) {
	start := time.Now()
	fmt.Printf("hub vs r3labs/sse/v2 — %s/%s, %d CPUs, GOMAXPROCS %d, loopback HTTP/1.1\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("events ~%d B; steady: %d events at %d/s; burst: %d events in bursts of %d, %v apart\n",
		len(payload(nil, 1)), cfg.events, cfg.rate, cfg.events, cfg.burst, cfg.gap)
	fmt.Println("server CPU = getrusage(RUSAGE_SELF) of this process; the subscribers run in a child process")
	fmt.Println()

	if cfg.sections["load"] {
		fmt.Printf("%-6s %5s  %-7s %12s %13s %9s %9s %10s\n",
			"mode", "subs", "server", "deliv/s", "cpu µs/deliv", "p50", "p99", "delivered")
		for _, mode := range cfg.modes {
			for _, n := range cfg.subs {
				ours := load(serverHub, mode, n, cfg.events, false, 0, cfg)
				theirs := load(serverR3labs, mode, n, cfg.events, false, 0, cfg)
				printLoad(mode, n, serverHub, ours)
				printLoad(mode, n, serverR3labs, theirs)
				fmt.Printf("%-6s %5d  %-7s %11.2fx %12.2fx %8.2fx %8.2fx\n", "", n, "ratio",
					ours.rate()/theirs.rate(), ours.cpuPer()/theirs.cpuPer(),
					float64(ours.P50)/float64(theirs.P50), float64(ours.P99)/float64(theirs.P99))
			}
		}
		fmt.Println("ratio = hub/r3labs: deliveries/s higher is better; CPU and latency lower is better")
		fmt.Println()
	}

	if cfg.sections["stall"] {
		fmt.Printf("one subscriber that never reads among %d healthy ones, %d events at %d/s, server SO_SNDBUF %d\n",
			cfg.stallSubs, cfg.stallEvents, cfg.rate, cfg.sndbuf)
		fmt.Printf("%-7s %14s %14s %26s   %s\n", "server", "p99 no stall", "p99 w/ stall",
			"healthy got (min per conn)", "stalled stream at the end")
		for _, kind := range []string{serverHub, serverR3labs} {
			without := load(kind, "steady", cfg.stallSubs, cfg.stallEvents, false, cfg.sndbuf, cfg)
			with := load(kind, "steady", cfg.stallSubs, cfg.stallEvents, true, cfg.sndbuf, cfg)
			stalled := "registered, blocking its stream"
			switch {
			case with.subsAtEnd == cfg.stallSubs:
				stalled = "evicted"
			case with.subsAtEnd > cfg.stallSubs:
				stalled = "registered, queue within its bound"
			case with.Delivered == int64(cfg.stallSubs*cfg.stallEvents):
				stalled = "registered"
			}
			fmt.Printf("%-7s %14s %14s %19.1f%% (%4d)   %s\n", kind, benchkit.Dur(without.P99), benchkit.Dur(with.P99),
				100*float64(with.Delivered)/float64(cfg.stallSubs*cfg.stallEvents), with.MinPerConn, stalled)
		}
		fmt.Println()
	}

	if cfg.sections["memory"] {
		fmt.Printf("memory per idle stream, server side, after GC: Δ(heap in use + goroutine stacks) / %d streams\n", cfg.idleStreams)
		for _, kind := range []string{serverHub, serverR3labs} {
			heap, stack := idleMemory(kind, cfg.idleStreams)
			fmt.Printf("%-7s %6.1f KB  (heap %.1f KB, stacks %.1f KB)\n", kind, (heap+stack)/1024, heap/1024, stack/1024)
		}
		fmt.Println()
	}

	if cfg.sections["churn"] {
		fmt.Printf("goroutines left after %d connect/disconnect cycles (50 at a time)\n", cfg.cycles)
		for _, kind := range []string{serverHub, serverR3labs} {
			left, secs, errs := churn(kind, cfg.cycles)
			fmt.Printf("%-7s %6d left  (%.1fs, %d errors)\n", kind, left, secs, errs)
		}
		fmt.Println()
	}
	fmt.Printf("total %.0fs\n", time.Since(start).Seconds())
}

// loadResult is one load run.
type loadResult struct {
	childResult
	t0        time.Time
	cpu       time.Duration
	expected  int // events per subscriber
	subsAtEnd int // streams registered when the readers were done, -1 if unknown
}

func (r loadResult) rate() float64 {
	d := time.Unix(0, r.LastRecv).Sub(r.t0).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(r.Delivered) / d
}

func (r loadResult) cpuPer() float64 {
	if r.Delivered == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.Delivered)
}

func printLoad(mode string, n int, kind string, r loadResult) {
	fmt.Printf("%-6s %5d  %-7s %12.0f %13.2f %9s %9s %9.1f%%\n", mode, n, kind, r.rate(), r.cpuPer(),
		benchkit.Dur(r.P50), benchkit.Dur(r.P99), 100*float64(r.Delivered)/float64(int64(n)*int64(r.expected)))
}

// load runs one server with n subscribers and publishes events to it.
func load(kind, mode string, n, events int, stalled bool, sndbuf int, cfg config) loadResult {
	srv := startServer(kind, sndbuf)
	defer srv.close()
	args := []string{"-conns", strconv.Itoa(n), "-expect", strconv.Itoa(events)}
	if stalled {
		args = append(args, "-stall")
	}
	c := startChild("read", srv, args...)
	defer c.close()
	c.expect("READY")

	runtime.GC() // the GC debt of setting up is not the workload's
	ru0 := rusage()
	t0 := time.Now()
	published := make(chan struct{})
	// A goroutine, because r3labs' Publish blocks once a stalled
	// subscriber has blocked its stream: the child's idle timeout ends
	// the run, and closing the connections unblocks it.
	go func() {
		defer close(published)
		for i := range events {
			seq := int64(i + 1)
			switch mode {
			case "steady":
				if d := time.Until(t0.Add(time.Duration(i) * time.Second / time.Duration(cfg.rate))); d > 0 {
					time.Sleep(d)
				}
			case "burst":
				if i > 0 && i%cfg.burst == 0 {
					time.Sleep(cfg.gap)
				}
			}
			srv.publish(seq, payload(nil, seq))
		}
	}()
	var res loadResult
	c.result(&res.childResult)
	res.cpu = rusage() - ru0
	res.t0 = t0
	res.expected = events
	res.subsAtEnd = srv.subscribers()
	c.close()
	<-published
	return res
}

// idleMemory opens n idle streams and returns the server's memory growth
// per stream, in bytes: heap and goroutine stacks.
func idleMemory(kind string, n int) (heap, stack float64) {
	srv := startServer(kind, 0)
	defer srv.close()
	h0, s0 := memInUse()
	c := startChild("read", srv, "-conns", strconv.Itoa(n), "-expect", "0")
	defer c.close()
	c.expect("READY")
	if srv.subscribers() >= 0 {
		for srv.subscribers() < n {
			time.Sleep(time.Millisecond)
		}
	}
	h1, s1 := memInUse()
	return float64(h1-h0) / float64(n), float64(s1-s0) / float64(n)
}

func memInUse() (heap, stack int64) {
	// Twice: the first GC moves sync.Pool contents to the victim cache,
	// the second frees them.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc), int64(ms.StackInuse)
}

// churn connects and disconnects cycles times and returns how many more
// goroutines the server process has afterwards than before.
func churn(kind string, cycles int) (left int, secs float64, errs int) {
	srv := startServer(kind, 0)
	defer srv.close()
	runtime.GC()
	base := runtime.NumGoroutine()
	c := startChild("churn", srv, "-cycles", strconv.Itoa(cycles))
	var res childResult
	c.result(&res)
	c.close()
	// Give the server a moment to notice the last disconnects.
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return runtime.NumGoroutine() - base, res.Seconds, res.Errors
}

// payload builds a ~200-byte event envelope carrying its publish time.
func payload(b []byte, seq int64) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"type":"message.delta","workspace_id":"7f9c2f1e-4a57-4f34-9d2b-8a8e6b0c1d2e",`+
		`"session_id":"0b7e3a52-9d5c-4d1e-8f67-3c2a1b0e9f8d","ephemeral":true,`+
		`"data":{"kind":"text","text":"the quick brown fox jumps","ts":`...)
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	return append(b, "}}"...)
}

// child is a subscriber process.
type child struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	lines chan string
	done  bool
}

func startChild(mode string, srv server, args ...string) *child {
	exe, err := os.Executable()
	if err != nil {
		fatalf("executable: %v", err)
	}
	cmd := exec.Command(exe, append([]string{"-child", mode, "-addr", srv.addr(), "-path", srv.path()}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fatalf("stdin: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fatalf("stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		fatalf("start child: %v", err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

func (c *child) expect(want string) string {
	select {
	case line, ok := <-c.lines:
		if !ok {
			fatalf("child exited before %s", want)
		}
		if !strings.HasPrefix(line, want) {
			fatalf("child said %q, want %s", line, want)
		}
		return line
	case <-time.After(2 * time.Minute):
		fatalf("child did not say %s", want)
	}
	return ""
}

func (c *child) result(v *childResult) {
	line := c.expect("RESULT ")
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), v); err != nil {
		fatalf("child result: %v", err)
	}
}

// close ends the child (it exits when its stdin closes, closing its
// connections) and waits for it.
func (c *child) close() {
	if c.done {
		return
	}
	c.done = true
	c.stdin.Close()
	for range c.lines {
	}
	_ = c.cmd.Wait()
}
