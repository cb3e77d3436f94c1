// Package compute bounds how many runs compute at once.
//
// Go's scheduler has no priorities. A server whose runs keep both CPUs busy
// (sixteen sessions prompting back to back against a fast model) had every
// run's goroutine runnable at once, and a request that came in (a prompt's
// 202, a cancel, an answer, a health check) waited behind all of them for a
// CPU: most of the 16-poster accept tail was that wait, before the handler
// even started. With Slots, at most one run fewer than there are CPUs
// computes (see Default); the others wait for a slot without being
// runnable, so a request queues behind a goroutine or two, not behind every
// run.
//
// A run holds a slot only while it computes. Waiting for its model (the
// response's headers, each read of its stream) for longer than Patience,
// it lets its slot go to another run; the HTTP client marks those waits
// (BeginWait, EndWait) on the Holder the run put in the request's context.
// So a thousand runs waiting on a slow model hold no slot, while a run
// whose model streams back to back (a fast local server, a burst) keeps
// its slot through the short waits between reads: letting it go at each
// read would let every run in again.
//
// What comes after a long wait is read without a slot: a token the model
// sent after thinking is published at once, never queued behind another
// run's compute (100 sessions streaming beside busy runs waited up to
// 250 ms for a slot to show a delta). Such a read is a few microseconds
// of work. Only reads that keep finding the model's data ready (a burst)
// are compute again, and wait for a slot.
package compute

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Slots is a fixed number of slots. A nil *Slots bounds nothing.
type Slots struct {
	c chan struct{}
	// patience is Patience; the fuzz target makes it endless.
	patience time.Duration
}

// New returns n slots; n <= 0 means Default().
func New(n int) *Slots {
	if n <= 0 {
		n = Default()
	}
	return &Slots{c: make(chan struct{}, n), patience: Patience}
}

// Hold waits for a slot and returns its Holder, and ctx carrying it (see
// From). It fails only when ctx ends first; the caller must call the
// Holder's Done when its work is over, which lets the slot go for good.
func (s *Slots) Hold(ctx context.Context) (*Holder, context.Context, error) {
	h := &Holder{s: s, ctx: ctx}
	if s == nil {
		return h, ctx, nil
	}
	if !s.acquire(ctx) {
		return nil, ctx, ctx.Err()
	}
	h.held = true
	return h, context.WithValue(ctx, holderKey{}, h), nil
}

// Default is one slot per CPU Go uses (GOMAXPROCS) but one, and at least
// one. With a slot per CPU, runs could keep every P busy, and Go looks at
// the network for new requests only when a P runs out of work, or every
// 10 ms from its monitor: a prompt's 202 and a health check waited for
// that (16 posters on 2 CPUs, busy host: accept p50 5.2 ms, health p99
// 17 ms). With a CPU left to requests they took 1.8 and 5.9 ms, at the
// same runs/s.
func Default() int {
	return max(1, runtime.GOMAXPROCS(0)-1)
}

func (s *Slots) acquire(ctx context.Context) bool {
	// A free slot is taken even by work being canceled: a select with
	// both ready would pick at random.
	select {
	case s.c <- struct{}{}:
		return true
	default:
	}
	select {
	case s.c <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Slots) release() { <-s.c }

// A Holder is one piece of work's claim on a slot. It lets its slot go
// while it waits long (BeginWait, EndWait) and goes on without one until
// its reads burst, until Done. It stands for one goroutine's work: its
// waits must not overlap.
type Holder struct {
	s   *Slots
	ctx context.Context
	// timer lets the slot go when a wait outlasts Patience; one per
	// holder, since a run waits once for every read of its model's stream.
	timer *time.Timer

	mu   sync.Mutex
	held bool
	done bool
	// waiting is set during a wait, expired once it outlasted Patience.
	waiting, expired bool
	// ready counts the short waits in a row of a holder without a slot:
	// burstReads of them and the model bursts, which is compute.
	ready int
}

// burstReads is how many reads in a row that find the model's data (nearly)
// ready make a stream compute again: one or two are tokens that came while
// the run was busy; a run of them is a burst (a fast model, after its time
// to answer).
const burstReads = 4

func (h *Holder) releaseLocked() {
	if h.held {
		h.held = false
		h.s.release()
	}
}

// resume waits for a slot again, unless the holder is done, already holds
// one, or its context ends first (then it goes on without one: the work is
// being canceled and must not wait).
func (h *Holder) resume() {
	h.mu.Lock()
	if h.held || h.done {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	// Waiting under the lock would keep Done from returning the slot of
	// a holder that gave up.
	if !h.s.acquire(h.ctx) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held || h.done {
		h.s.release()
		return
	}
	h.held = true
}

// Done lets the slot go for good: a later wait takes none.
func (h *Holder) Done() {
	if h == nil || h.s == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	h.releaseLocked()
	if h.timer != nil {
		h.timer.Stop()
	}
}

// Patience is how long a wait keeps its slot: a run whose model streams
// back to back keeps computing, and one whose model thinks lets another
// run in. Tokens of a model come some milliseconds apart at best; a wait
// shorter than that is for a CPU, not for the model.
const Patience = 2 * time.Millisecond

// BeginWait marks the start of a wait for something outside (the model,
// over the network): should it last longer than Patience, the slot goes
// to another holder. EndWait ends it.
func (h *Holder) BeginWait() {
	if h == nil || h.s == nil {
		return
	}
	h.mu.Lock()
	h.waiting, h.expired = true, false
	if h.timer == nil {
		h.timer = time.AfterFunc(h.s.patience, h.expire)
	} else {
		h.timer.Reset(h.s.patience)
	}
	h.mu.Unlock()
}

func (h *Holder) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting {
		h.expired = true
		h.releaseLocked()
	}
}

// EndWait ends a wait BeginWait began. A holder that let its slot go goes
// on without one, so that what the model sent after its long wait is
// published at once; it waits for a slot again only once burstReads waits
// in a row were short: the model bursts, and reading it is compute.
func (h *Holder) EndWait() {
	if h == nil || h.s == nil {
		return
	}
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
	}
	h.waiting = false
	take := false
	switch {
	case h.held || h.done:
	case h.expired:
		h.ready = 0
	default:
		h.ready++
		if h.ready >= burstReads {
			h.ready = 0
			take = true
		}
	}
	h.mu.Unlock()
	if take {
		h.resume()
	}
}

type holderKey struct{}

// From returns the Holder that Hold put in ctx, or nil (whose methods do
// nothing).
func From(ctx context.Context) *Holder {
	h, _ := ctx.Value(holderKey{}).(*Holder)
	return h
}
