// Command loadbench measures Tandem as a user runs it: a real `tandem serve`
// process, a fake OpenAI model on loopback, and the clients in this process.
// It prints one table:
//
//	go run ./e2e/loadbench [-bin PATH]... [-reps 3]
//
// With several -bin flags (say an old and a new build) it runs them in
// alternating repetitions, each on a fresh server and data dir, and prints
// each one's median with the range of the repetitions beside it, so a
// before/after comparison is made in one sitting. Without -bin it builds
// ./cmd/tandem.
//
// A repetition runs every phase, or those -phase names (comma-separated):
//
//	accept    prompt accept and POST to first delta with 1 and 16 posters,
//	          runs/s and server CPU per run
//	delivery  delta delivery to 1/10/100/500 clients
//	cancel    cancel to run.completed
//	memory    RSS idle, per idle stream, and after the load
//
// (these four share one server per repetition), then each of the phases
// that start servers of their own (see phases in phase.go).
//
// The single-server phases: the server's RSS idle (after a few runs) and per idle
// stream, prompt accept latency and POST to first delta with 1 and
// with 16 posters (each on its own session, posting its next prompt when the
// last run ended, so runs execute while prompts arrive), runs/s and server
// CPU per run with 16 posters, delta delivery (the fake model sending a
// chunk to a client reading its delta) with 1/10/100/500 clients attached to
// a quiet stream (besides one stream that follows every run), cancel to
// run.completed, and the RSS once the load is gone. Beside each posters
// phase a control, GET /v1/health every 5 ms, shows what a request that
// writes nothing waits under the same load.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-dev/tandem/e2e/benchkit"
)

type config struct {
	bins    []string
	reps    int
	runs    int // runs per accept phase
	posters []int
	clients []int
	deltas  int
	gap     time.Duration
	idle    int
	cancels int
	burst   int
	// historyRuns is the runs the history phase measures per session length.
	historyRuns int
	// postersHistory is the messages of each poster's session in the
	// history phase: 400 are ~200 runs.
	postersHistory int
	maxClient      int
	think          time.Duration
	phases         map[string]bool // nil: all
}

// has reports whether phase name is to run.
func (c config) has(name string) bool { return c.phases == nil || c.phases[name] }

type binFlag []string

func (b *binFlag) String() string     { return strings.Join(*b, ",") }
func (b *binFlag) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	if v := os.Getenv(busyEnv); v != "" {
		share, _ := strconv.ParseFloat(v, 64)
		runBusy(min(max(share, 0), 1))
		return
	}
	var (
		bins        binFlag
		reps        = flag.Int("reps", 3, "repetitions per binary, alternating between binaries")
		runs        = flag.Int("runs", 400, "runs per accept phase")
		clients     = flag.String("clients", "1,10,100,500", "attached clients for delta delivery")
		deltas      = flag.Int("deltas", 100, "deltas per delivery run")
		gap         = flag.Duration("gap", 10*time.Millisecond, "time between the deltas of a delivery run (a quiet stream)")
		idle        = flag.Int("idle-streams", 500, "idle streams opened to measure memory per stream")
		cancels     = flag.Int("cancels", 50, "cancels measured")
		postersHist = flag.Int("posters-history", 400, "messages of each poster's session in the history phase")
		histRuns    = flag.Int("history-runs", 100, "runs the history phase measures in each of its short and long sessions")
		burst       = flag.Int("burst", 3000, "runs of the burst (16 posters) after which the memory phase measures the RSS given back")
		think       = flag.Duration("think", 0, "how long each poster waits after its run ended before it posts again (0: at once, which keeps the machine saturated)")
		busy        = flag.Float64("busy", 0, "share of a CPU another process keeps busy meanwhile (0.25: a host with a little other work, as every user's has)")
		phases      = flag.String("phase", "", "run only these phases (comma-separated): "+strings.Join(phaseNames(), ","))
	)
	flag.Var(&bins, "bin", "tandem binary to measure (repeatable); default: build ./cmd/tandem")
	flag.Parse()
	cfg := config{bins: bins, reps: *reps, runs: *runs, posters: []int{1, 16}, deltas: *deltas, gap: *gap,
		idle: *idle, cancels: *cancels, burst: *burst, historyRuns: *histRuns, postersHistory: *postersHist, think: *think}
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("bad -clients %q", *clients)
		}
		cfg.clients = append(cfg.clients, n)
		cfg.maxClient = max(cfg.maxClient, n)
	}
	if *phases != "" {
		cfg.phases = map[string]bool{}
		for _, name := range strings.Split(*phases, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(phaseNames(), name) {
				fatalf("unknown phase %q (phases: %s)", name, strings.Join(phaseNames(), ","))
			}
			cfg.phases[name] = true
		}
	}
	if len(cfg.bins) == 0 {
		cfg.bins = []string{build()}
	}
	if *busy > 0 {
		stop, err := startBusy(*busy)
		if err != nil {
			fatalf("%v", err)
		}
		defer stop()
		fmt.Printf("loadbench: another process keeps %.2f of a CPU busy throughout\n", *busy)
	}
	if err := run(cfg); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadbench: "+format+"\n", args...)
	os.Exit(1)
}

// build compiles the module's tandem command into a temporary directory.
func build() string {
	dir, err := os.MkdirTemp("", "loadbench-bin-")
	if err != nil {
		fatalf("%v", err)
	}
	bin := filepath.Join(dir, "tandem")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/tandem-dev/tandem/cmd/tandem")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fatalf("build tandem: %v", err)
	}
	return bin
}

// result is one repetition's figures by metric key.
type result map[string]float64

func run(cfg config) error {
	model := startModel()
	defer model.Close()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("loadbench: %s/%s, %d CPUs, load average %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("; %d reps per binary, alternating\n", cfg.reps)
	results := make([][]result, len(cfg.bins))
	steal := benchkit.HostSteal()
	began := time.Now()
	for rep := range cfg.reps {
		for i, bin := range cfg.bins {
			fmt.Fprintf(os.Stderr, "rep %d/%d: %s\n", rep+1, cfg.reps, bin)
			res, err := measure(cfg, bin, model.URL)
			if err != nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			results[i] = append(results[i], res)
		}
	}
	fmt.Printf("took %.0fs; the host stole %v of CPU meanwhile\n\n", time.Since(began).Seconds(), (benchkit.HostSteal() - steal).Round(time.Millisecond))
	printTable(cfg, results)
	return nil
}

// metric is one row of the table.
type metric struct {
	key, label string
	unit       string // "ns" (shown as a duration), "MiB", "KiB", "ms", "/s"
}

func metrics(cfg config) []metric {
	var ms []metric
	if cfg.has("accept") {
		ms = append(ms, acceptMetrics(cfg)...)
	}
	if cfg.has("delivery") {
		for _, n := range cfg.clients {
			ms = append(ms,
				metric{fmt.Sprintf("delta-p50-%d", n), fmt.Sprintf("delta delivery p50, %d client(s)", n), "ns"},
				metric{fmt.Sprintf("delta-p99-%d", n), fmt.Sprintf("delta delivery p99, %d client(s)", n), "ns"})
		}
	}
	if cfg.has("cancel") {
		ms = append(ms,
			metric{"cancel-p50", "cancel to run.completed p50", "ns"},
			metric{"cancel-p99", "cancel to run.completed p99", "ns"})
	}
	if cfg.has("memory") {
		ms = append(ms,
			metric{"rss-idle", "RSS idle", "MiB"},
			metric{"rss-stream", fmt.Sprintf("RSS per idle stream (%d streams)", cfg.idle), "KiB"},
			metric{"rss-burst", fmt.Sprintf("RSS at the end of a burst of %d runs", cfg.burst), "MiB"},
			metric{"rss-after", "RSS 10 s after the burst", "MiB"},
			metric{"rss-given", "RSS 10 s after the burst, above idle", "MiB"})
	}
	for _, ph := range ownPhases {
		if cfg.has(ph.name) {
			ms = append(ms, ph.metrics(cfg)...)
		}
	}
	return ms
}

func acceptMetrics(cfg config) []metric {
	var ms []metric
	for _, p := range cfg.posters {
		ms = append(ms,
			metric{fmt.Sprintf("accept-p50-%d", p), fmt.Sprintf("prompt accept p50, %d poster(s)", p), "ns"},
			metric{fmt.Sprintf("accept-p99-%d", p), fmt.Sprintf("prompt accept p99, %d poster(s)", p), "ns"},
			metric{fmt.Sprintf("health-p50-%d", p), fmt.Sprintf("control: GET /v1/health p50, %d poster(s)", p), "ns"},
			metric{fmt.Sprintf("health-p99-%d", p), fmt.Sprintf("control: GET /v1/health p99, %d poster(s)", p), "ns"},
			metric{fmt.Sprintf("first-p50-%d", p), fmt.Sprintf("POST to first delta p50, %d poster(s)", p), "ns"},
			metric{fmt.Sprintf("first-p99-%d", p), fmt.Sprintf("POST to first delta p99, %d poster(s)", p), "ns"})
	}
	last := cfg.posters[len(cfg.posters)-1]
	ms = append(ms,
		metric{"runs-per-s", fmt.Sprintf("runs/s, %d posters", last), "/s"},
		metric{"cpu-per-run", "server CPU per run", "ms"})
	return ms
}

func printTable(cfg config, results [][]result) {
	ms := metrics(cfg)
	width := 0
	for _, m := range ms {
		width = max(width, len(m.label))
	}
	fmt.Printf("%-*s", width, "median [min–max] of the reps")
	for i := range cfg.bins {
		fmt.Printf("  %-24s", fmt.Sprintf("bin %d", i+1))
	}
	fmt.Println()
	for _, m := range ms {
		fmt.Printf("%-*s", width, m.label)
		for _, reps := range results {
			var vs []float64
			for _, r := range reps {
				if v, ok := r[m.key]; ok {
					vs = append(vs, v)
				}
			}
			fmt.Printf("  %-24s", summary(m.unit, vs))
		}
		fmt.Println()
	}
	fmt.Println()
	for i, bin := range cfg.bins {
		fmt.Printf("bin %d: %s\n", i+1, bin)
	}
}

func summary(unit string, vs []float64) string {
	if len(vs) == 0 {
		return "-"
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	f := func(v float64) string {
		switch unit {
		case "ns":
			return benchkit.Dur(int64(v))
		case "ms":
			return fmt.Sprintf("%.2fms", v)
		case "/s":
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	if len(vs) == 1 {
		return f(med)
	}
	return fmt.Sprintf("%s [%s–%s]", f(med), f(vs[0]), f(vs[len(vs)-1]))
}

// measure runs the chosen phases against bin: the single-server phases
// on one fresh server, then each phase of its own.
func measure(cfg config, bin, modelURL string) (result, error) {
	res := result{}
	if cfg.has("accept") || cfg.has("delivery") || cfg.has("cancel") || cfg.has("memory") {
		if err := measureShared(cfg, bin, modelURL, res); err != nil {
			return nil, err
		}
	}
	for _, ph := range ownPhases {
		if !cfg.has(ph.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "phase: %s\n", ph.name)
		if err := ph.run(cfg, bin, modelURL, res); err != nil {
			return nil, fmt.Errorf("phase %s: %w", ph.name, err)
		}
	}
	return res, nil
}

// startBench starts a fresh server of bin with one workspace, and a stream
// that follows every run, as a user's UI does; end stops it all.
func startBench(cfg config, bin, modelURL string, res result) (b *bench, end func(), err error) {
	srv, err := startServer(bin, modelURL)
	if err != nil {
		return nil, nil, err
	}
	c := newClient(srv)
	dir, err := os.MkdirTemp("", "loadbench-ws-")
	if err == nil {
		var wsID string
		if wsID, err = c.workspace(dir); err == nil {
			var tracker *runs
			var unfollow func()
			if tracker, unfollow, err = followRuns(c, wsID); err == nil {
				return &bench{cfg: cfg, c: c, srv: srv, ws: wsID, runs: tracker, res: res}, func() {
					unfollow()
					c.close()
					srv.stop()
					os.RemoveAll(dir)
				}, nil
			}
		}
		os.RemoveAll(dir)
	}
	c.close()
	srv.stop()
	return nil, nil, err
}

// measureShared runs the single-server phases on one fresh server.
func measureShared(cfg config, bin, modelURL string, res result) error {
	b, end, err := startBench(cfg, bin, modelURL, res)
	if err != nil {
		return err
	}
	defer end()
	srv := b.srv

	// Warm up, then idle.
	if err := b.posters(1, 20, false); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cfg.has("memory") {
		b.res["rss-idle"] = float64(srv.settledRSS(ctx, time.Second)) / (1 << 20)
	}
	if cfg.has("accept") {
		for _, p := range cfg.posters {
			if err := b.posters(p, cfg.runs, true); err != nil {
				return err
			}
		}
	}
	if cfg.has("delivery") {
		if err := b.delivery(); err != nil {
			return err
		}
	}
	if cfg.has("cancel") {
		if err := b.cancels(); err != nil {
			return err
		}
	}
	if cfg.has("memory") {
		if err := b.burst(); err != nil {
			return err
		}
		// Idle streams once the burst's memory went back to the OS, so
		// that both sides of the measure are in the same state: before
		// the load the heap held its warm-up's garbage, which the streams'
		// own arrival burst could have let go.
		if err := b.idleStreams(); err != nil {
			return err
		}
	}
	return nil
}
