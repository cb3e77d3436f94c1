package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-dev/tandem/e2e/benchkit"
)

// bench is one repetition against one server.
type bench struct {
	cfg  config
	c    *client
	srv  *server
	ws   string
	runs *runs
	res  result
}

// runTimeout bounds one run, from its POST to its run.completed.
const runTimeout = time.Minute

// posters runs n fast runs with p posters, each on a session of its own,
// each posting its next prompt once its last run completed. With record,
// it records the accept and first-delta latencies and, for the most
// posters, runs/s and the server's CPU per run.
func (b *bench) posters(p, n int, record bool) error {
	sessions := make([]string, p)
	for i := range sessions {
		sid, err := b.c.session(b.ws)
		if err != nil {
			return err
		}
		sessions[i] = sid
	}
	if record {
		fmt.Fprintf(os.Stderr, "phase: %d poster(s), %d runs\n", p, n)
	}
	think := time.Duration(0)
	if record {
		think = b.cfg.think
	}
	l, err := b.load(sessions, n, think)
	if err != nil || !record {
		return err
	}
	b.res[fmt.Sprintf("accept-p50-%d", p)] = float64(l.accept.Quantile(0.50))
	b.res[fmt.Sprintf("accept-p99-%d", p)] = float64(l.accept.Quantile(0.99))
	b.res[fmt.Sprintf("health-p50-%d", p)] = float64(l.health.Quantile(0.50))
	b.res[fmt.Sprintf("health-p99-%d", p)] = float64(l.health.Quantile(0.99))
	b.res[fmt.Sprintf("first-p50-%d", p)] = float64(l.first.Quantile(0.50))
	b.res[fmt.Sprintf("first-p99-%d", p)] = float64(l.first.Quantile(0.99))
	if p == b.cfg.posters[len(b.cfg.posters)-1] {
		b.res["runs-per-s"] = float64(n) / l.elapsed.Seconds()
		b.res["cpu-per-run"] = float64(l.cpu.Microseconds()) / 1000 / float64(n)
	}
	return nil
}

// loaded is what load measured.
type loaded struct {
	accept, first, health benchkit.Hist
	elapsed, cpu          time.Duration
}

// load runs n fast runs with a poster on each of sessions, each posting
// its next prompt (each prompt its own) once its last run completed, after
// think. A control beside the posters, GET /v1/health, which crosses the
// same listener, middleware and scheduler as a prompt but writes nothing,
// tells an accept tail that is the machine's (waiting for a CPU) from the
// accept's own work.
func (b *bench) load(sessions []string, n int, think time.Duration) (loaded, error) {
	var (
		mu   sync.Mutex
		l    loaded
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, len(sessions))
	)
	probeCtx, stopProbe := context.WithCancel(context.Background())
	probed := make(chan benchkit.Hist, 1)
	go func() { probed <- b.probe(probeCtx) }()
	cpu, began := b.srv.cpu(), time.Now()
	for i, sid := range sessions {
		wg.Go(func() {
			var acc, fst benchkit.Hist
			for k := next.Add(1); k <= int64(n); k = next.Add(1) {
				start := time.Now()
				id, err := b.c.prompt(b.ws, sid, fmt.Sprintf("fast %d", k))
				if err != nil {
					errs[i] = err
					return
				}
				acc.Add(int64(time.Since(start)))
				ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
				f, _, err := b.runs.wait(ctx, id)
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
				if !f.IsZero() {
					fst.Add(int64(f.Sub(start)))
				}
				if think > 0 {
					time.Sleep(think)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			l.accept.Merge(&acc)
			l.first.Merge(&fst)
		})
	}
	wg.Wait()
	l.elapsed, l.cpu = time.Since(began), b.srv.cpu()-cpu
	stopProbe()
	l.health = <-probed
	return l, errors.Join(errs...)
}

// probeGap is the time between two health probes: a light load beside the
// posters' (a few percent of their requests).
const probeGap = 5 * time.Millisecond

// probe times GET /v1/health every probeGap until ctx ends.
func (b *bench) probe(ctx context.Context) benchkit.Hist {
	var h benchkit.Hist
	t := time.NewTicker(probeGap)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return h
		case <-t.C:
		}
		start := time.Now()
		if err := b.c.health(); err != nil {
			continue // the posters' errors are the ones reported
		}
		h.Add(int64(time.Since(start)))
	}
}

// openStreams opens n streams, 50 at a time.
func (b *bench) openStreams(n int) ([]*stream, error) {
	out := make([]*stream, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for i := range out {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i], errs[i] = b.c.open(b.ws)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeStreams(out)
		return nil, err
	}
	return out, nil
}

func closeStreams(ss []*stream) {
	for _, s := range ss {
		if s != nil {
			s.conn.Close()
		}
	}
}

// idleStreams measures the server's RSS per idle stream.
func (b *bench) idleStreams() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := b.srv.settledRSS(ctx, 3*time.Second)
	idle, err := b.openStreams(b.cfg.idle)
	if err != nil {
		return err
	}
	// What the streams hold, not the garbage of their arrival (each one
	// announced to every other stream): 3 s, for the server to give back
	// what the burst left (memtrim looks once a second).
	after := b.srv.settledRSS(ctx, 3*time.Second)
	closeStreams(idle)
	b.res["rss-stream"] = float64(after-before) / float64(b.cfg.idle) / 1024
	return nil
}

// delivery measures delta delivery with each number of attached clients.
func (b *bench) delivery() error {
	sid, err := b.c.session(b.ws)
	if err != nil {
		return err
	}
	for _, n := range b.cfg.clients {
		if err := b.deliver(sid, n); err != nil {
			return fmt.Errorf("delivery to %d clients: %w", n, err)
		}
	}
	return nil
}

func (b *bench) deliver(sid string, n int) error {
	ss, err := b.openStreams(n)
	if err != nil {
		return err
	}
	readers := make([]*reader, n)
	var wg sync.WaitGroup
	for i, s := range ss {
		readers[i] = &reader{s: s}
		wg.Go(readers[i].read)
	}
	defer func() {
		closeStreams(ss)
		wg.Wait()
	}()
	id, err := b.c.prompt(b.ws, sid, fmt.Sprintf("paced %d %s", b.cfg.deltas, b.cfg.gap))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if _, _, err := b.runs.wait(ctx, id); err != nil {
		return err
	}
	for _, rd := range readers {
		for rd.n.Load() < int64(b.cfg.deltas) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("a client got %d of %d deltas: %w", rd.n.Load(), b.cfg.deltas, errTimeout)
			case <-time.After(time.Millisecond):
			}
		}
	}
	closeStreams(ss)
	wg.Wait()
	var all benchkit.Hist
	for _, rd := range readers {
		all.Merge(&rd.hist)
	}
	b.res[fmt.Sprintf("delta-p50-%d", n)] = float64(all.Quantile(0.50))
	b.res[fmt.Sprintf("delta-p99-%d", n)] = float64(all.Quantile(0.99))
	return nil
}

// cancels measures a cancel's POST to the run.completed of the streaming
// run it cancels.
func (b *bench) cancels() error {
	sid, err := b.c.session(b.ws)
	if err != nil {
		return err
	}
	var h benchkit.Hist
	for range b.cfg.cancels {
		id, err := b.c.prompt(b.ws, sid, "hold")
		if err != nil {
			return err
		}
		st := b.runs.get(id)
		select {
		case <-st.started:
		case <-time.After(runTimeout):
			return fmt.Errorf("run %s: no delta: %w", id, errTimeout)
		}
		start := time.Now()
		if err := b.c.cancel(b.ws, sid); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		_, end, err := b.runs.wait(ctx, id)
		cancel()
		if err != nil {
			return err
		}
		h.Add(int64(end.Sub(start)))
	}
	b.res["cancel-p50"] = float64(h.Quantile(0.50))
	b.res["cancel-p99"] = float64(h.Quantile(0.99))
	return nil
}

// afterBurst is how soon after a burst of runs the server should have given
// its memory back: a user watching top sees it within seconds.
const afterBurst = 10 * time.Second

// burst runs cfg.burst runs with 16 posters, then samples the server's RSS
// for afterBurst and records its value at the end, and that less the idle
// RSS (the target: at most 64 MiB).
func (b *bench) burst() error {
	fmt.Fprintf(os.Stderr, "phase: a burst of %d runs, then %v idle\n", b.cfg.burst, afterBurst)
	if err := b.posters(16, b.cfg.burst, false); err != nil {
		return err
	}
	b.res["rss-burst"] = float64(b.srv.rss()) / (1 << 20)
	time.Sleep(afterBurst) // the measure is what a user sees after this wait
	after := float64(b.srv.rss()) / (1 << 20)
	b.res["rss-after"] = after
	b.res["rss-given"] = after - b.res["rss-idle"]
	return nil
}
