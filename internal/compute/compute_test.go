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
				thinks := (i+j)%3 == 0
				if thinks {
					time.Sleep(2 * Patience) // a model that thinks
				}
				From(hctx).EndWait()
				if !thinks {
					compute() // a short wait kept the slot
				}
				// After a long wait, what the model sent is published
				// without a slot; only a burst of short waits computes.
				for range burstReads {
					From(hctx).BeginWait()
					From(hctx).EndWait()
				}
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
// compute meanwhile, and goes on without waiting for it: what its model
// sent is published at once.
func TestALongWaitLetsAnotherRunIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		a, actx, err := s.Hold(t.Context())
		require.NoError(t, err)
		release := make(chan struct{})
		var bHolds atomic.Bool
		go func() {
			b, _, err := s.Hold(t.Context())
			if err != nil {
				return
			}
			bHolds.Store(true)
			<-release // b computes until told to stop
			b.Done()
		}()
		From(actx).BeginWait()
		synctest.Wait()
		assert.False(t, bHolds.Load(), "a kept its slot within its patience")
		time.Sleep(Patience) // the model is still thinking
		synctest.Wait()
		assert.True(t, bHolds.Load(), "b computes while a waits")
		a.EndWait() // returns while b holds the only slot
		assert.Equal(t, 1, len(s.c), "b's slot")
		a.Done()
		close(release)
		synctest.Wait()
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

// After a long wait a run reads its model's stream without a slot, even
// while another run holds every slot, quick reads (tokens that came while
// it was busy) included; a burst of quick reads is compute again and waits
// for a slot, which it then keeps through short waits until a long one.
func TestAStreamAfterALongWaitNeedsNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		a, actx, err := s.Hold(t.Context())
		require.NoError(t, err)
		wait := func(d time.Duration) {
			From(actx).BeginWait()
			time.Sleep(d)
			From(actx).EndWait()
		}
		// another starts a run that waits for the slot and holds it until
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
		wait(Patience / 2)
		assert.False(t, bHolds.Load(), "a short wait keeps the slot")
		wait(2 * Patience) // the model's time to answer
		synctest.Wait()
		assert.True(t, bHolds.Load(), "b took a's slot")
		// b holds the slot from now on; a's stream goes on beside it.
		for range 3 {
			wait(Patience / 2)
			wait(2 * Patience)
		}
		for range burstReads - 1 {
			wait(Patience / 2)
		}
		assert.Equal(t, 1, len(s.c), "b's slot")
		// One more quick read: a burst, which is compute.
		var computes atomic.Bool
		go func() {
			wait(Patience / 2)
			computes.Store(true)
		}()
		time.Sleep(Patience)
		synctest.Wait()
		assert.False(t, computes.Load(), "a burst waits for a slot")
		close(release)
		synctest.Wait()
		assert.True(t, computes.Load())
		assert.Equal(t, 1, len(s.c), "a's slot")

		// Streaming back to back, a keeps it; a long wait lets it go.
		cHolds, release := another()
		wait(Patience / 2)
		synctest.Wait()
		assert.False(t, cHolds.Load())
		From(actx).BeginWait()
		time.Sleep(2 * Patience)
		synctest.Wait()
		assert.True(t, cHolds.Load())
		From(actx).EndWait()
		close(release)
		synctest.Wait()
		assert.Zero(t, len(s.c), "a goes on without a slot")
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
		a.EndWait()
		for range burstReads { // a burst, which would wait for a slot
			a.BeginWait()
			a.EndWait()
		}
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
