package compute

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Many runs at once: never more than n compute, whatever mix of holds,
// waits and cancels they go through, and every slot comes back.
func TestAtMostNCompute(t *testing.T) {
	const n = 3
	s := New(n)
	var computing, most atomic.Int64
	compute := func() {
		c := computing.Add(1)
		for {
			m := most.Load()
			if c <= m || most.CompareAndSwap(m, c) {
				break
			}
		}
		time.Sleep(10 * time.Microsecond)
		computing.Add(-1)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for j := range 30 {
				h, hctx, err := s.Hold(ctx)
				require.NoError(t, err)
				compute()
				From(hctx).BeginWait()
				if (i+j)%3 == 0 {
					time.Sleep(2 * Patience) // a model that thinks
				}
				From(hctx).EndWait()
				compute()
				h.Done()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(n))
	assert.Positive(t, most.Load())
	assert.Zero(t, len(s.c), "every slot came back")
}

// A run whose model thinks for longer than Patience lets another run
// compute meanwhile, and takes a slot again before it goes on.
func TestALongWaitLetsAnotherRunIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		a, actx, err := s.Hold(t.Context())
		require.NoError(t, err)
		model := make(chan struct{})
		var bHolds, bDone atomic.Bool
		go func() {
			b, _, err := s.Hold(t.Context())
			if err != nil {
				return
			}
			bHolds.Store(true)
			<-model // b computes until a's model answers
			bDone.Store(true)
			b.Done()
		}()
		From(actx).BeginWait()
		synctest.Wait()
		assert.False(t, bHolds.Load(), "a kept its slot within its patience")
		time.Sleep(Patience) // the model is still thinking
		synctest.Wait()
		assert.True(t, bHolds.Load(), "b computes while a waits")
		close(model)
		a.EndWait()
		assert.True(t, bDone.Load(), "a went on only once b let the slot go")
		assert.Equal(t, 1, len(s.c))
		a.Done()
		assert.Zero(t, len(s.c))
	})
}

// A model that streams back to back keeps its run's slot: the others wait.
func TestAShortWaitKeepsTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		a, actx, err := s.Hold(t.Context())
		require.NoError(t, err)
		var bHolds atomic.Bool
		go func() {
			b, _, err := s.Hold(t.Context())
			if err == nil {
				bHolds.Store(true)
				b.Done()
			}
		}()
		for range 100 {
			From(actx).BeginWait()
			time.Sleep(Patience / 2)
			From(actx).EndWait()
		}
		synctest.Wait()
		assert.False(t, bHolds.Load())
		a.Done()
		synctest.Wait()
		assert.True(t, bHolds.Load())
	})
}

// A run whose model streams slowly (a wait after its first outlasted
// Patience) lets its slot go as soon as it waits again while another run
// waits for one; with nobody waiting it keeps it through its patience, and
// a run slow only to answer at all (its first wait) keeps Patience.
func TestASlowModelLetsTheSlotGoAtOnceWhenOthersWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		a, actx, err := s.Hold(t.Context())
		require.NoError(t, err)
		wait := func(d time.Duration) {
			From(actx).BeginWait()
			time.Sleep(d)
			From(actx).EndWait()
		}
		wait(2 * Patience) // the time to answer: not slow yet
		wait(Patience / 2)
		// another starts b, which waits for the slot; it holds it until
		// release is closed.
		another := func() (holds *atomic.Bool, release chan struct{}) {
			holds, release = new(atomic.Bool), make(chan struct{})
			go func() {
				b, _, err := s.Hold(t.Context())
				if err == nil {
					holds.Store(true)
					<-release
					b.Done()
				}
			}()
			synctest.Wait()
			return holds, release
		}
		bHolds, release := another()
		From(actx).BeginWait()
		synctest.Wait()
		assert.False(t, bHolds.Load(), "a's first long wait was its answer's; a keeps its patience")
		time.Sleep(2 * Patience) // a wait after the first outlasts it: slow
		synctest.Wait()
		assert.True(t, bHolds.Load())
		close(release)
		From(actx).EndWait()
		assert.Equal(t, 1, len(s.c), "a again")

		// Slow now: with nobody waiting, a wait keeps the slot...
		From(actx).BeginWait()
		synctest.Wait()
		assert.Equal(t, 1, len(s.c))
		From(actx).EndWait()
		// ...and with someone waiting it goes at once.
		bHolds, release = another()
		From(actx).BeginWait()
		synctest.Wait()
		assert.True(t, bHolds.Load(), "no patience for a slow model while b waits")
		close(release)
		From(actx).EndWait()
		a.Done()
		assert.Zero(t, len(s.c))
	})
}

// A run canceled while it waits for a slot goes on at once (to end), holds
// nothing, and gives nothing back it did not take.
func TestACanceledRunDoesNotWaitForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		ctx, cancel := context.WithCancel(t.Context())
		a, actx, err := s.Hold(ctx)
		require.NoError(t, err)
		From(actx).BeginWait()
		time.Sleep(2 * Patience)
		b, _, err := s.Hold(t.Context()) // takes the slot a let go
		require.NoError(t, err)
		cancel()
		a.EndWait() // returns without a slot
		a.Done()
		assert.Equal(t, 1, len(s.c), "b's slot, still b's")
		_, _, err = s.Hold(ctx)
		assert.ErrorIs(t, err, context.Canceled)
		b.Done()
		assert.Zero(t, len(s.c))
	})
}

// Without Slots nothing is bounded and nothing fails.
func TestNilSlotsBoundNothing(t *testing.T) {
	var s *Slots
	h, ctx, err := s.Hold(t.Context())
	require.NoError(t, err)
	assert.Nil(t, From(ctx))
	h.BeginWait()
	h.EndWait()
	h.Done()
	From(context.Background()).BeginWait()
	From(context.Background()).EndWait()
}

// FuzzHolders drives holders through any sequence of holds, waits begun,
// outlasted and ended, and dones (with a context already canceled, so that
// nothing blocks, and the patience endless, so that the fuzzer decides when
// a wait outlasts it): the slots taken are always the holders holding one,
// never more than n, and all of them once every holder is done.
func FuzzHolders(f *testing.F) {
	f.Add(uint8(1), []byte{0, 4, 1, 2, 4, 3, 0, 131})
	f.Add(uint8(2), []byte{0, 4, 8, 1, 5, 2, 6, 9, 3, 7, 0, 131, 135})
	f.Fuzz(func(t *testing.T, n uint8, ops []byte) {
		s := New(int(n%4) + 1)
		s.patience = time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		const holders = 8
		var hs [holders]*Holder
		for _, op := range ops {
			i := int(op>>2) % holders // bits 2-4; bit 7 picks Done over EndWait
			h := hs[i]
			switch op % 4 {
			case 0:
				if h == nil {
					if h, _, err := s.Hold(ctx); err == nil {
						hs[i] = h
					}
				}
			case 1:
				h.BeginWait()
			case 2:
				if h != nil {
					h.expire() // the wait outlasted the patience
				}
			case 3:
				if op&0x80 != 0 {
					h.Done()
				} else {
					h.EndWait()
				}
			}
			held := 0
			for _, h := range hs {
				if h != nil {
					h.mu.Lock()
					if h.held {
						held++
					}
					h.mu.Unlock()
				}
			}
			if held != len(s.c) || held > cap(s.c) {
				t.Fatalf("%d holders hold a slot, %d of %d slots taken", held, len(s.c), cap(s.c))
			}
		}
		for _, h := range hs {
			h.Done()
		}
		if len(s.c) != 0 {
			t.Fatalf("%d slots still taken", len(s.c))
		}
	})
}
