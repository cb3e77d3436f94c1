package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// writeCounter is a Sink that keeps what it was written and counts the
// writes: each is a system call on a real connection.
type writeCounter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (w *writeCounter) Open() error                      { return nil }
func (w *writeCounter) Flush() error                     { return nil }
func (w *writeCounter) SetWriteDeadline(time.Time) error { return nil }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

// state returns the writes so far and the seqs of the frames written.
func (w *writeCounter) state(t *testing.T) (int, []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var seqs []int64
	err := parseSSE(bytes.NewReader(w.buf.Bytes()), func(f frame) {
		if f.HasID {
			seqs = append(seqs, f.seq(t))
		}
	})
	require.True(t, errors.Is(err, io.EOF), "%v", err)
	return w.writes, seqs
}

// servedCounted serves a fresh topic to one stream written to a
// writeCounter; stop ends the stream, checks that it ended cleanly, and
// closes the hub.
func servedCounted(t *testing.T) (tp *Topic, sink *writeCounter, stop func()) {
	h := New(Config{Logger: quietLogger()})
	tp = h.Topic("ws", 0, nil)
	sink = &writeCounter{}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- tp.Serve(ctx, sink, &ServeOptions{ClientID: "c"}) }()
	return tp, sink, func() {
		cancel()
		require.NoError(t, <-served)
		h.Close()
	}
}

// A burst of arrivals and departures (a reconnect storm) reaches each
// stream in one write, within PresenceDelay, in order; an event that
// cannot wait goes at once and takes the waiting ones along, in order.
func TestPresenceIsWrittenInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, sink, stop := servedCounted(t)
		defer stop()
		synctest.Wait()
		opened, _ := sink.state(t) // stream.opened

		var want []int64
		for seq := int64(1); seq <= 50; seq++ {
			typ := proto.EventClientAttached
			if seq%2 == 0 {
				typ = proto.EventClientDetached
			}
			tp.Publish(ev(seq, typ, "", false))
			want = append(want, seq)
		}
		synctest.Wait()
		writes, seqs := sink.state(t)
		assert.Equal(t, opened, writes, "presence waits")
		assert.Empty(t, seqs)

		time.Sleep(DefaultPresenceDelay)
		synctest.Wait()
		writes, seqs = sink.state(t)
		assert.Equal(t, opened+1, writes, "the burst goes in one write")
		assert.Equal(t, want, seqs)

		// A delta does not wait for presence (only for the end of the
		// flush tick the last write began), and what waited before it
		// goes first.
		tp.Publish(ev(51, proto.EventClientAttached, "", false))
		tp.Publish(ev(52, proto.EventMessageDelta, "s", false))
		time.Sleep(DefaultFlushTick)
		synctest.Wait()
		writes, seqs = sink.state(t)
		assert.Equal(t, opened+2, writes)
		assert.Equal(t, append(want, 51, 52), seqs)

		// Nothing is left to wake the stream for.
		time.Sleep(DefaultPresenceDelay)
		synctest.Wait()
		writes, _ = sink.state(t)
		assert.Equal(t, opened+2, writes)

	})
}

// A topic closed while presence waits stops its timer: nothing is
// written after the streams ended.
func TestPresenceWaitingWhenTheTopicCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Config{Logger: quietLogger()})
		defer h.Close()
		tp := h.Topic("ws", 0, nil)
		sink := &writeCounter{}
		served := make(chan error, 1)
		go func() { served <- tp.Serve(t.Context(), sink, &ServeOptions{ClientID: "c"}) }()
		synctest.Wait()
		tp.Publish(ev(1, proto.EventClientAttached, "", false))
		tp.Close()
		require.ErrorIs(t, <-served, ErrClosed)
		_, seqs := sink.state(t)
		assert.Equal(t, []int64{1}, seqs, "the stream's last flush took what waited")
		writes, _ := sink.state(t)
		time.Sleep(2 * DefaultPresenceDelay)
		synctest.Wait()
		after, _ := sink.state(t)
		assert.Equal(t, writes, after)
	})
}

// A stream of deltas takes at most one write per flush tick: deltas that
// come one by one within a tick of a write go together at the tick's end,
// in order; a delta after a quiet tick is written at once, and so is a kept
// event, whenever it comes.
func TestWritesAreCoalescedPerFlushTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp, sink, stop := servedCounted(t)
		defer stop()
		time.Sleep(DefaultFlushTick) // stream.opened was written a tick ago
		synctest.Wait()
		opened, _ := sink.state(t)

		tp.Publish(ev(1, proto.EventMessageDelta, "s", false))
		synctest.Wait()
		writes, seqs := sink.state(t)
		assert.Equal(t, opened+1, writes, "after a quiet tick, at once")
		assert.Equal(t, []int64{1}, seqs)

		step := DefaultFlushTick / 5
		for seq := int64(2); seq <= 4; seq++ {
			time.Sleep(step)
			tp.Publish(ev(seq, proto.EventMessageDelta, "s", false))
			synctest.Wait()
		}
		writes, _ = sink.state(t)
		assert.Equal(t, opened+1, writes, "within the tick nothing more is written")
		time.Sleep(DefaultFlushTick - 3*step)
		synctest.Wait()
		writes, seqs = sink.state(t)
		assert.Equal(t, opened+2, writes, "the tick's deltas in one write")
		assert.Equal(t, []int64{1, 2, 3, 4}, seqs)

		// A kept event (the run's end) does not wait for the tick, and
		// takes the delta waiting before it along.
		tp.Publish(ev(5, proto.EventMessageDelta, "s", false))
		synctest.Wait()
		writes, _ = sink.state(t)
		assert.Equal(t, opened+2, writes)
		tp.Publish(ev(6, proto.EventRunCompleted, "s", true))
		synctest.Wait()
		writes, seqs = sink.state(t)
		assert.Equal(t, opened+3, writes)
		assert.Equal(t, []int64{1, 2, 3, 4, 5, 6}, seqs)
		// ...and starts no tick: the next delta goes at once.
		tp.Publish(ev(7, proto.EventMessageDelta, "s", false))
		synctest.Wait()
		writes, _ = sink.state(t)
		assert.Equal(t, opened+4, writes)

	})
}
