package hub

import (
	"github.com/tandem-dev/tandem/internal/event"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

const (
	// backlogPage is how many events one Backlog call may return.
	backlogPage = 500
	// finalTimeout bounds the last writes of a stream that is ending
	// (stream.evicted, the flush before Close): they are best effort and must
	// not hold a shutdown for a full WriteTimeout.
	finalTimeout = time.Second
	// maxSpare is the biggest queue slice a writer keeps between batches;
	// bigger ones, left by a burst, are given back to the GC. An idle
	// stream keeps two (this one and its queue), so this is most of what
	// a stream weighs after a burst: at 256 entries, 500 clients arriving
	// at once (each arrival queued to every stream, in batches) left each
	// stream 16 KiB heavier for good.
	maxSpare = 32
)

// ServeOptions describe one stream.
type ServeOptions struct {
	ClientID    string
	WorkspaceID string
	// SessionID filters the stream: when set, only events with this
	// SessionID and workspace-level events (SessionID "") are delivered,
	// replay included.
	SessionID string
	// LastEventID is the seq the client saw last; valid when Resume is true.
	LastEventID int64
	Resume      bool
	// OnSubscribed is called once the subscription is registered, before
	// anything is written, so events it publishes (client.attached) reach
	// the new stream live. It is called whenever Serve does not return
	// ErrClosed at once, so it can be paired with cleanup after Serve.
	// It must not block on the stream itself.
	OnSubscribed func()
}

// Serve streams the topic to sink until ctx ends (it then returns nil), the
// stream is evicted (ErrEvicted), a write fails, the topic is disconnected
// (ErrDisconnected) or the topic or hub closes (ErrClosed). On a closed topic
// it returns ErrClosed before writing anything.
//
// The calling goroutine is the stream's writer: no goroutine is started per
// stream. The first frame is stream.opened with head_seq, the last seq
// published before the stream registered; every later event follows live.
// With opts.Resume, the kept events in (LastEventID, head_seq] are replayed
// first (from the ring, else from the Backlog), or stream.reset is sent when
// that cannot be done.
func (t *Topic) Serve(ctx context.Context, sink Sink, opts *ServeOptions) error {
	// An idle stream parks its goroutine in live for as long as its client
	// stays, under the caller's frames: the work before and after the wait
	// is done in functions of their own, so that what stays on the stack is
	// small. The runtime shrinks a parked goroutine's stack (grown while
	// the request was routed and the stream set up) only when it uses
	// less than a quarter of it.
	sw, err := t.start(ctx, sink, opts)
	if sw == nil {
		return err
	}
	defer t.unregister(sw.s)
	if err == nil {
		err = sw.live(ctx)
	}
	return t.stop(ctx, sw, opts, err)
}

// start registers the stream, then sends the response's headers,
// stream.opened and, on a resume, what the client missed. It returns a nil
// writer when the topic is closed.
//
//go:noinline
func (t *Topic) start(ctx context.Context, sink Sink, opts *ServeOptions) (*streamWriter, error) {
	s := newSubscriber(opts.SessionID)
	after := max(opts.LastEventID, 0)
	reg, err := t.register(s, opts.Resume, after)
	if err != nil {
		return nil, err
	}
	if opts.OnSubscribed != nil {
		opts.OnSubscribed()
	}
	sw := &streamWriter{w: sink, h: t.h, s: s, last: reg.head, timeout: t.h.cfg.WriteTimeout}
	if err := sink.Open(); err != nil {
		return sw, fmt.Errorf("hub: open stream: %w", err)
	}
	sw.control(proto.EventStreamOpened, proto.StreamOpened{
		ClientID:    opts.ClientID,
		WorkspaceID: opts.WorkspaceID,
		HeadSeq:     reg.head,
	})
	// Flush stream.opened alone: a replay may wait on the database and the
	// client should see its stream open meanwhile.
	if err := sw.send(); err != nil || !opts.Resume {
		return sw, err
	}
	err = t.replay(ctx, s, sw, reg, after)
	if err == nil {
		err = sw.send()
	}
	// Whatever stopped the replay, the queued live events must not follow
	// it: the client would see a hole it cannot detect.
	if errors.Is(err, ErrEvicted) {
		sw.evicted()
	}
	return sw, err
}

// stop ends the stream: see ended.
//
//go:noinline
func (t *Topic) stop(ctx context.Context, sw *streamWriter, opts *ServeOptions, err error) error {
	sw.release()
	return t.ended(ctx, sw.s, opts, err)
}

// replay writes what a resuming client missed, up to reg.head; the live
// queue holds everything after it.
func (t *Topic) replay(ctx context.Context, s *subscriber, sw *streamWriter, reg registration, after int64) error {
	switch {
	case after > reg.head:
		// The client saw seqs this server never issued (another database,
		// a restore): nothing it has can be trusted.
		sw.control(proto.EventStreamReset, proto.StreamReset{HeadSeq: reg.head})
		return nil
	case reg.fromRing:
		sw.last = after
		for _, e := range reg.ring {
			if err := sw.frame(e.seq, e.frame); err != nil {
				return err
			}
		}
		return nil
	}
	sw.last = after
	readErr, err := t.replayBacklog(ctx, s, sw, reg.head)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if readErr != nil {
		level := slog.LevelError
		if errors.Is(readErr, errNoBacklog) {
			level = slog.LevelDebug // by design: such a topic serves resumes from its ring only
		}
		t.h.cfg.Logger.Log(ctx, level, "hub: cannot replay backlog, resetting stream",
			"topic", t.id, "last_event_id", after, "err", readErr)
		// Events already replayed stay valid; the reset tells the client
		// there may be a hole after them.
		sw.control(proto.EventStreamReset, proto.StreamReset{HeadSeq: reg.head})
	}
	sw.last = max(sw.last, reg.head)
	return nil
}

var errNoBacklog = errors.New("topic has no backlog")

// replayBacklog pages the kept events in (sw.last, head] from the database.
// readErr means the database failed (the stream can go on after a reset);
// err means the stream must end: a write failed, the client left, or the
// stream was evicted or disconnected meanwhile.
func (t *Topic) replayBacklog(ctx context.Context, s *subscriber, sw *streamWriter, head int64) (readErr, err error) {
	if t.backlog == nil {
		return errNoBacklog, nil
	}
	after := sw.last
	for after < head {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := s.ended(); err != nil {
			return nil, err
		}
		evs, err := t.backlog(ctx, after, head, backlogPage)
		if err != nil {
			return err, nil
		}
		progressed := false
		for _, e := range evs {
			if e.Seq <= after || e.Seq > head {
				continue
			}
			after, progressed = e.Seq, true
			if !s.wants(e.SessionID) {
				continue
			}
			if err := sw.event(e); err != nil {
				return nil, err
			}
		}
		// Send each page on its own deadline, so a long replay to a
		// healthy client does not trip WriteTimeout.
		if err := sw.send(); err != nil {
			return nil, err
		}
		if len(evs) < backlogPage || !progressed {
			break
		}
	}
	return nil, nil
}

// live writes queued frames until the stream ends. Each wake-up drains the
// whole queue into one buffered write and one flush. A stream of deltas
// takes at most one write per FlushTick: a wake-up within a tick of a write
// of deltas only waits for the tick's end, so that all that comes
// meanwhile goes in the same write; a kept event (a run's start or end, a
// message) is written at once, and takes the deltas before it along.
func (sw *streamWriter) live(ctx context.Context) error {
	// The end of ctx wakes the writer like an event does, so an idle
	// stream waits on one channel (a smaller frame than a select's).
	stop := context.AfterFunc(ctx, sw.s.signal)
	defer stop()
	for {
		<-sw.s.wake
		if ctx.Err() != nil {
			return nil
		}
		if !sw.tickOut(ctx) {
			return nil
		}
		if err := sw.drain(); err != nil {
			return err
		}
	}
}

// tickOut waits for the end of the flush tick the last write of deltas
// began, unless something urgent is queued or comes meanwhile. It reports
// false when ctx ended.
func (sw *streamWriter) tickOut(ctx context.Context) bool {
	if sw.flushed.IsZero() {
		return true
	}
	for !sw.s.hurried() {
		wait := sw.h.cfg.FlushTick - time.Since(sw.flushed)
		if wait <= 0 {
			break
		}
		// Made on first use: a stream that never bursts holds no timer.
		if sw.tick == nil {
			sw.tick = time.NewTimer(wait)
		} else {
			sw.tick.Reset(wait)
		}
		select {
		case <-sw.tick.C:
		case <-sw.s.wake:
			sw.tick.Stop()
		}
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}

// drain writes the frames queued, then ends the stream if it must.
//
//go:noinline
func (sw *streamWriter) drain() error {
	// Let a publisher in the middle of a burst queue the rest of it first:
	// one write for the burst instead of one per event.
	runtime.Gosched()
	batch, urgent, end := sw.s.take(sw.spare)
	if end != nil {
		sw.timeout = min(sw.timeout, finalTimeout)
	}
	for _, e := range batch {
		var err error
		if e.frame == nil {
			err = sw.ping()
		} else {
			err = sw.frame(e.seq, e.frame)
		}
		if err != nil {
			if end != nil {
				return end
			}
			return err
		}
	}
	clear(batch) // let the frames go as soon as they are written
	sw.spare = batch[:0]
	if cap(sw.spare) > maxSpare {
		sw.spare = nil
	}
	wrote := sw.wrote || (sw.buf != nil && len(*sw.buf) > 0)
	err := sw.send()
	// Only a write of deltas starts a tick: the first delta after a run
	// started goes at once, the ones that follow it within the tick wait.
	switch {
	case !wrote:
	case urgent || sw.h.cfg.FlushTick <= 0:
		sw.flushed = time.Time{}
	default:
		sw.flushed = time.Now()
	}
	if end != nil {
		// The reason beats a failed best-effort flush.
		if errors.Is(end, ErrEvicted) {
			sw.evicted()
		}
		return end
	}
	return err
}

// ended turns the writer's outcome into Serve's result and logs what the
// caller cannot see otherwise.
func (t *Topic) ended(ctx context.Context, s *subscriber, opts *ServeOptions, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrDisconnected) {
		return err
	}
	if s.evicted() {
		// Evicted while the writer was stuck in a write: report the
		// cause, not only the timeout it produced.
		if !errors.Is(err, ErrEvicted) {
			err = fmt.Errorf("%w: %w", ErrEvicted, err)
		}
		t.h.cfg.Logger.Warn("hub: slow stream evicted",
			"topic", t.id, "client_id", opts.ClientID, "queue_bytes", t.h.cfg.QueueBytes)
		return err
	}
	if ctx.Err() != nil {
		// The client went away while we were writing to it.
		return nil
	}
	return err
}

// streamWriter gathers frames in a pooled buffer and hands them to the
// connection in large writes, each batch under one write deadline and
// followed by one flush. It tracks the last seq written so no event is ever
// written twice, whatever path (ring, backlog, live) it came from.
type streamWriter struct {
	w   Sink
	h   *Hub
	s   *subscriber
	buf *[]byte // nil while idle, so idle streams hold no buffer
	// spare is an emptied earlier batch, so a busy stream reuses two
	// slices instead of allocating one per batch.
	spare []entry
	last  int64
	// timeout bounds each batch: WriteTimeout, shortened for the last
	// frames of a stream that is ending.
	timeout time.Duration

	deadlineSet bool // for the current batch
	wrote       bool // since the last flush
	// flushed is when the last write of deltas only was flushed, zero if
	// the last write had a kept event (see live).
	flushed time.Time
	tick    *time.Timer
}

func (sw *streamWriter) bytes() *[]byte {
	if sw.buf == nil {
		sw.buf = sw.h.getBuf()
	}
	return sw.buf
}

// frame adds a preformatted event frame unless seq was already written.
func (sw *streamWriter) frame(seq int64, frame []byte) error {
	if seq <= sw.last {
		return nil
	}
	sw.last = seq
	b := sw.bytes()
	*b = append(*b, frame...)
	return sw.maybeWrite()
}

// event formats and adds a backlog event unless its seq was already written.
func (sw *streamWriter) event(e event.Event) error {
	if e.Seq <= sw.last {
		return nil
	}
	sw.last = e.Seq
	b := sw.bytes()
	*b = appendFrame(*b, e.Seq, e.Type, e.Data)
	return sw.maybeWrite()
}

func (sw *streamWriter) ping() error {
	b := sw.bytes()
	*b = append(*b, pingFrame...)
	return sw.maybeWrite()
}

// evicted tells the client why it is disconnected, best effort: the
// write gets a short deadline and its error is moot.
func (sw *streamWriter) evicted() {
	sw.timeout = min(sw.timeout, finalTimeout)
	sw.control(proto.EventStreamEvicted, proto.StreamEvicted{Reason: "slow_consumer"})
	_ = sw.send()
}

func (sw *streamWriter) control(typ string, v any) {
	b := sw.bytes()
	*b = appendControl(*b, typ, v)
}

// maybeWrite hands a full chunk to the connection early, which bounds the
// buffer when a burst or a replay is larger than chunkBytes.
func (sw *streamWriter) maybeWrite() error {
	if len(*sw.buf) < chunkBytes {
		return nil
	}
	return sw.write()
}

func (sw *streamWriter) write() error {
	if sw.buf == nil || len(*sw.buf) == 0 {
		return nil
	}
	if !sw.deadlineSet {
		// A sink without deadlines relies on its transport's timeouts.
		_ = sw.w.SetWriteDeadline(time.Now().Add(sw.timeout))
		sw.deadlineSet = true
	}
	_, err := sw.w.Write(*sw.buf)
	*sw.buf = (*sw.buf)[:0]
	sw.wrote = true
	if err != nil {
		return fmt.Errorf("hub: write to client: %w", err)
	}
	return nil
}

// send writes what is buffered and flushes it, then gives the buffer back.
func (sw *streamWriter) send() error {
	err := sw.write()
	if err == nil && sw.wrote {
		if ferr := sw.w.Flush(); ferr != nil {
			err = fmt.Errorf("hub: flush to client: %w", ferr)
		}
	}
	sw.deadlineSet, sw.wrote = false, false
	sw.release()
	return err
}

func (sw *streamWriter) release() {
	if sw.buf != nil {
		sw.h.putBuf(sw.buf)
		sw.buf = nil
	}
}
