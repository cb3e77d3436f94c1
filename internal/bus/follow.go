package bus

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/internal/store"
)

// Log is the persisted side of workspaces' events, where a follower
// catches up from.
type Log interface {
	// Events returns the kept events with after < seq <= upTo, oldest
	// first, at most limit.
	Events(ctx context.Context, workspaceID string, after, upTo int64, limit int) ([]Event, error)
	// Head is the seq of the workspace's last persisted event, 0 when none:
	// where the log ends while no node publishes the workspace.
	Head(ctx context.Context, workspaceID string) (int64, error)
}

// StoreLog is the Log of a store's events.
func StoreLog(st store.Events) Log { return storeLog{st} }

type storeLog struct{ st store.Events }

func (l storeLog) Events(ctx context.Context, workspaceID string, after, upTo int64, limit int) ([]Event, error) {
	recs, err := l.st.WorkspaceEvents(ctx, workspaceID, after, upTo, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(recs))
	for i, r := range recs {
		out[i] = Event{Seq: r.Seq, Type: r.Type, SessionID: r.SessionID, Kept: true, Data: r.Envelope}
	}
	return out, nil
}

func (l storeLog) Head(ctx context.Context, workspaceID string) (int64, error) {
	return l.st.MaxSeq(ctx, workspaceID)
}

// Defaults of Follower's zero fields.
const (
	DefaultPage      = 512
	DefaultMaxQueued = 1 << 16
	DefaultRetry     = 2 * time.Second
)

// Follower makes feeds: a workspace's events after a seq, from the log
// then live from the bus, in order, with no gap among kept events and no
// duplicate.
type Follower struct {
	Bus Bus
	Log Log
	// Logger gets the errors a feed retries past; nil means slog.Default().
	Logger *slog.Logger
	// Page is how many events a catch-up reads at a time.
	Page int
	// MaxQueued bounds the live events waiting while a feed catches up; past
	// it they are dropped and the feed catches up from the log again.
	MaxQueued int
	// Retry is the longest wait between tries of a failing catch-up.
	Retry time.Duration
	// StallAfter is how long a feed may fail to catch up before it counts
	// as stalled (see FollowOr); DefaultStallAfter when 0.
	StallAfter time.Duration
}

// DefaultStallAfter is Follower.StallAfter's default: a few seconds, far
// less than a client waits in silence before it thinks the server gone.
const DefaultStallAfter = 3 * time.Second

// Feed delivers one workspace's events to its function, from a goroutine
// of its own, until Close.
type Feed struct {
	f  *Follower
	ws string
	fn func(Event)
	// stalled, when set, is called while the feed cannot deliver.
	stalled func()

	mu     sync.Mutex
	queue  []Event
	resync bool // the bus may have dropped events: ask for the head again
	wake   chan struct{}

	cancel    func()
	ctx       context.Context
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Follow starts a feed of the workspace's events with seq > after: first
// the kept ones from the log, up to where the workspace's events end when
// Follow is called, then every event published after Follow returns. fn
// gets them one at a time, in seq order, on the feed's goroutine.
func (f *Follower) Follow(workspaceID string, after int64, fn func(Event)) (*Feed, error) {
	return f.FollowOr(workspaceID, after, fn, nil)
}

// FollowOr is Follow, and calls stalled (on the feed's goroutine) when the
// feed has failed to catch up from the log for StallAfter, and again at
// each failed try after that, until one succeeds: the live events wait
// behind events only the log has (the bus dropped some, or restarted), and
// the log cannot be read. The feed's streams are then silent, which their
// clients cannot tell from a quiet workspace: stalled is the time to end
// them, so they resume from a node that can serve them.
func (f *Follower) FollowOr(workspaceID string, after int64, fn func(Event), stalled func()) (*Feed, error) {
	ctx, stop := context.WithCancel(context.Background())
	fd := &Feed{f: f, ws: workspaceID, fn: fn, stalled: stalled, wake: make(chan struct{}, 1), ctx: ctx, stop: stop,
		done: make(chan struct{})}
	// Subscribe before asking where the events end: whatever is published
	// after the answer is then on its way to us.
	cancel, err := f.Bus.Subscribe(workspaceID, fd.push, fd.lost)
	if err != nil {
		stop()
		return nil, fmt.Errorf("follow workspace %s: %w", workspaceID, err)
	}
	fd.cancel = cancel
	head, err := fd.head()
	if err != nil {
		// The feed asks again until it knows; live events wait meanwhile.
		f.logger().Warn("bus: feed cannot tell where the events end yet", "workspace_id", workspaceID, "err", err)
		head, fd.resync = -1, true
	}
	go fd.run(after, head)
	return fd, nil
}

// Close stops the feed and waits for its goroutine; fn is not called
// after it returns.
func (fd *Feed) Close() {
	fd.closeOnce.Do(func() {
		fd.cancel()
		fd.stop()
		<-fd.done
	})
}

func (fd *Feed) push(e Event) {
	fd.mu.Lock()
	if len(fd.queue) >= fd.f.maxQueued() {
		// Too far behind: drop the backlog and catch up from the log.
		fd.queue, fd.resync = nil, true
	} else {
		fd.queue = append(fd.queue, e)
	}
	fd.mu.Unlock()
	fd.signal()
}

func (fd *Feed) lost() {
	fd.mu.Lock()
	fd.resync = true
	fd.mu.Unlock()
	fd.signal()
}

func (fd *Feed) signal() {
	select {
	case fd.wake <- struct{}{}:
	default:
	}
}

// run delivers until the feed closes. head is where the events ended when
// Follow asked (-1 when it could not tell).
func (fd *Feed) run(last, head int64) {
	defer close(fd.done)
	var (
		batch []Event
		// failing is when the first try of the current run of failed
		// ones began; zero while the feed delivers.
		failing time.Time
	)
	for {
		began := time.Now()
		fd.mu.Lock()
		resync := fd.resync || head >= 0
		fd.resync = false
		batch, fd.queue = fd.queue, batch[:0]
		fd.mu.Unlock()
		var err error
		if resync {
			if head < 0 {
				head, err = fd.head()
			}
			if err == nil && head > last {
				// The live events that came meanwhile are merged in, so
				// the ephemeral ones among them are not lost.
				last, err = fd.catchUp(last, head, batch)
			}
			head = -1
			if err != nil {
				fd.requeue(batch, true)
				batch = nil
			}
		}
		if err == nil {
			var undone []Event
			last, undone, err = fd.deliver(batch, last)
			if err != nil {
				fd.requeue(undone, false)
				batch = nil
			}
		}
		if err != nil {
			if failing.IsZero() {
				failing = began
			}
			if fd.stalled != nil && time.Since(failing) >= fd.f.stallAfter() {
				fd.f.logger().Warn("bus: feed stalled: its streams end, to resume where they can be served",
					"workspace_id", fd.ws, "failing_for", time.Since(failing).Round(time.Millisecond))
				fd.stalled()
			}
			if !fd.retry(err) {
				return
			}
		} else {
			failing = time.Time{}
		}
		clear(batch) // drop references to delivered events' data
		fd.mu.Lock()
		pending := len(fd.queue) > 0 || fd.resync
		fd.mu.Unlock()
		if pending {
			continue
		}
		select {
		case <-fd.wake:
		case <-fd.ctx.Done():
			return
		}
	}
}

// deliver sends the live events of batch not sent yet, reading from the
// log any seqs they skip. On failure it returns the events not sent.
func (fd *Feed) deliver(batch []Event, last int64) (int64, []Event, error) {
	for i, e := range batch {
		if e.Seq <= last {
			continue // already sent, from the log or the bus
		}
		if e.Seq > last+1 {
			// The skipped seqs were published before e, so their kept
			// events are committed: read them.
			var err error
			if last, err = fd.catchUp(last, e.Seq-1, nil); err != nil {
				return last, batch[i:], err
			}
		}
		if err := fd.ctx.Err(); err != nil {
			return last, nil, err
		}
		fd.fn(e)
		last = e.Seq
	}
	return last, nil, nil
}

// requeue puts undelivered events back in front of those that came since.
func (fd *Feed) requeue(es []Event, resync bool) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.queue = append(slices.Clone(es), fd.queue...)
	fd.resync = fd.resync || resync
}

// head is where the workspace's events end now: its publisher's last seq,
// or the log's when no node publishes it.
func (fd *Feed) head() (int64, error) {
	head, ok, err := fd.f.Bus.Head(fd.ctx, fd.ws)
	if err != nil || ok {
		return head, err
	}
	return fd.f.Log.Head(fd.ctx, fd.ws)
}

// catchUp sends the kept events with last < seq <= upTo from the log,
// merged in seq order with the live events of live (in seq order) in that
// range, and returns the last seq it sent. That is not upTo: live events
// above it and up to upTo can only be ephemeral ones (every kept one is in
// the log), still on their way, and they are welcome.
func (fd *Feed) catchUp(last, upTo int64, live []Event) (int64, error) {
	page := fd.f.Page
	if page <= 0 {
		page = DefaultPage
	}
	send := func(e Event) error {
		if err := fd.ctx.Err(); err != nil {
			return err
		}
		fd.fn(e)
		last = e.Seq
		return nil
	}
	// sendLive sends the live events below seq (and above last).
	sendLive := func(below int64) error {
		for len(live) > 0 && live[0].Seq < below {
			if live[0].Seq > last {
				if err := send(live[0]); err != nil {
					return err
				}
			}
			live = live[1:]
		}
		return nil
	}
	for last < upTo {
		es, err := fd.f.Log.Events(fd.ctx, fd.ws, last, upTo, page)
		if err != nil {
			return last, err
		}
		for _, e := range es {
			if err := sendLive(e.Seq); err != nil {
				return last, err
			}
			if e.Seq > last {
				if err := send(e); err != nil {
					return last, err
				}
			}
		}
		if len(es) < page {
			break
		}
	}
	if err := sendLive(upTo + 1); err != nil {
		return last, err
	}
	return last, nil
}

// retry waits before the next try after err; false when the feed is
// closing instead.
func (fd *Feed) retry(err error) bool {
	if fd.ctx.Err() != nil {
		return false
	}
	fd.f.logger().Warn("bus: feed catching up from the log failed; retrying", "workspace_id", fd.ws, "err", err)
	wait := fd.f.Retry
	if wait <= 0 {
		wait = DefaultRetry
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-fd.ctx.Done():
		return false
	}
}

func (f *Follower) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}

func (f *Follower) stallAfter() time.Duration {
	if f.StallAfter <= 0 {
		return DefaultStallAfter
	}
	return f.StallAfter
}

func (f *Follower) maxQueued() int {
	if f.MaxQueued <= 0 {
		return DefaultMaxQueued
	}
	return f.MaxQueued
}
