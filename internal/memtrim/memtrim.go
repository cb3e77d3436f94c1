// Package memtrim gives the memory a burst of load used back to the OS
// once the burst is over.
//
// The Go runtime returns free heap pages slowly: the next collection's goal
// stays where the load left it, and the forced collection comes two minutes
// later, so a server that ran a few thousand runs kept around 100 MiB for
// minutes after its users went quiet. A Trimmer watches how fast the
// process allocates, a figure the runtime keeps anyway, and when a busy
// spell is followed by a quiet tick it collects and returns the free pages
// at once. Under load it does nothing but read that figure once a tick, so
// it costs no throughput; at rest it does nothing at all.
package memtrim

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Config says when a Trimmer trims. The zero value is usable.
type Config struct {
	// Every is how often the Trimmer looks; zero means DefaultEvery.
	Every time.Duration
	// Busy is how many bytes the process must have allocated since the
	// last trim for a quiet tick to trim: below it, there is little to
	// give back and a trim is not worth a collection. Zero means
	// DefaultBusy.
	Busy uint64
	// Quiet is how many bytes a tick may see allocated and still count as
	// quiet: idle streams' heartbeats and a user reading allocate a little.
	// Zero means DefaultQuiet.
	Quiet uint64

	// Ticks, when set, replaces the Trimmer's own clock (tests).
	Ticks <-chan time.Time
	// Allocated, when set, replaces the runtime's count of bytes
	// allocated since the process started (tests).
	Allocated func() uint64
	// Trim, when set, replaces debug.FreeOSMemory (tests).
	Trim func()
	// Trimmed, when set, is called after each trim with how much the
	// process had allocated since the one before (logs).
	Trimmed func(allocated uint64, took time.Duration)
}

// The defaults: a load that allocated 8 MiB (a few dozen runs, or hundreds
// of clients arriving at once), then a second that allocated
// under 2 MiB (a few runs' worth).
const (
	DefaultEvery = time.Second
	DefaultBusy  = 8 << 20
	DefaultQuiet = 2 << 20
)

// Trimmer is the goroutine that trims. Stop ends it.
type Trimmer struct {
	cfg  Config
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts a Trimmer.
func Start(cfg Config) *Trimmer {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Busy == 0 {
		cfg.Busy = DefaultBusy
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.Allocated == nil {
		cfg.Allocated = allocated
	}
	if cfg.Trim == nil {
		cfg.Trim = debug.FreeOSMemory
	}
	t := &Trimmer{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{})}
	go t.loop()
	return t
}

// Stop ends the Trimmer and waits for it. It is safe to call more than once.
func (t *Trimmer) Stop() {
	t.once.Do(func() { close(t.stop) })
	<-t.done
}

func (t *Trimmer) loop() {
	defer close(t.done)
	ticks := t.cfg.Ticks
	if ticks == nil {
		tk := time.NewTicker(t.cfg.Every)
		defer tk.Stop()
		ticks = tk.C
	}
	var w watch
	w.reset(t.cfg.Allocated())
	for {
		select {
		case <-t.stop:
			return
		case <-ticks:
		}
		now := t.cfg.Allocated()
		if !w.tick(now, t.cfg.Busy, t.cfg.Quiet) {
			continue
		}
		began := time.Now()
		t.cfg.Trim()
		if t.cfg.Trimmed != nil {
			t.cfg.Trimmed(now-w.since, time.Since(began))
		}
		// What the collection itself allocated is not load.
		w.reset(t.cfg.Allocated())
	}
}

// watch is the Trimmer's decision, apart from its clock: the allocation
// count at the last trim and at the last tick.
type watch struct {
	since, last uint64
}

func (w *watch) reset(now uint64) { w.since, w.last = now, now }

// tick takes the count at a tick and says whether to trim: the process
// allocated at least busy bytes since the last trim, and at most quiet in
// this tick.
func (w *watch) tick(now, busy, quiet uint64) bool {
	step := now - w.last
	w.last = now
	return now-w.since >= busy && step <= quiet
}

// allocated is the runtime's count of heap bytes allocated since the
// process started: cheap to read (no stop of the world, unlike
// runtime.ReadMemStats).
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
