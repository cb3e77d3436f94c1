package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

const (
	// defaultIdleTimeout is four of the server's default heartbeats: a
	// stream silent for that long is taken for a dead connection (a NAT or
	// a sleeping laptop dropped it without a FIN) and reopened.
	defaultIdleTimeout = 60 * time.Second
	minBackoff         = 100 * time.Millisecond
	maxBackoff         = 5 * time.Second
	// streamBuffer is how many events may wait for the reader. When it is
	// full the stream stops reading the connection, the server's queue fills
	// and it evicts the stream; the reconnect then replays what was kept, so
	// a slow reader costs memory on neither side.
	streamBuffer = 256
	// deletedReason is workspace.closing's reason for DeleteWorkspace.
	deletedReason = "deleted"
)

// EventsOptions configures an event stream.
type EventsOptions struct {
	// SessionID keeps only that session's events and the workspace-level
	// ones (client.*, workspace.*).
	SessionID string
	// LastEventID resumes after this seq, typically a LastSeq saved by an
	// earlier stream: the server first replays every kept event after it.
	// Zero starts live.
	LastEventID int64
	// IdleTimeout reopens a connection on which nothing, not even a
	// heartbeat, arrived for that long. Zero means 60s; negative disables
	// it. Set it above the server's --heartbeat.
	IdleTimeout time.Duration
	// OnDisconnect, when set, is called from the stream's goroutine each
	// time a connection drops or a reconnect fails, before the stream
	// retries, so that a user interface can say it is reconnecting. The
	// next stream.opened says it is back. It must not block.
	OnDisconnect func(err error)
}

// EventStream is a workspace's event stream that survives disconnects. One
// goroutine, owned by the stream, reads the connection and reconnects with
// Last-Event-ID set to the last seq it passed on, with exponential backoff
// and jitter (up to 5s); events at or below that seq are dropped, so the
// reader sees every kept event once and in order across reconnects. Events
// that are not kept (deltas, presence) that were in flight when a connection
// dropped are lost, as the contract says.
//
// Next returns control frames too, with Seq 0: stream.opened after every
// (re)connect, stream.evicted before the server drops a slow reader, and
// stream.reset when the server could not replay from the stream's seq; after
// a reset, state must be refetched over REST because events may be missing.
//
// A stream is meant for one reader goroutine; Close may be called from any.
type EventStream struct {
	c      *Client
	wsID   string
	opts   EventsOptions
	items  chan item
	done   chan struct{}
	cancel context.CancelCauseFunc
	once   sync.Once

	// err is why the goroutine ended; read it only after done is closed.
	err error

	mu   sync.Mutex
	last int64
}

// item is an event with the stream's cursor right after it, so LastSeq
// follows what the reader got, not what the goroutine has buffered.
type item struct {
	ev     proto.Event
	cursor int64
}

// Events opens the event stream of a workspace (which reopens the workspace
// if it was closed, and keeps it open while the stream lives). The first
// connection is made before Events returns, so a wrong token, an unknown
// workspace or session fails here as an *APIError; later failures are
// retried, except those that retrying cannot fix (4xx answers), which end
// the stream with that error. The stream lives until Close or until ctx ends.
func (c *Client) Events(ctx context.Context, workspaceID string, opts EventsOptions) (*EventStream, error) {
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &EventStream{
		c: c, wsID: workspaceID, opts: opts,
		items: make(chan item, streamBuffer), done: make(chan struct{}), cancel: cancel,
		last: opts.LastEventID,
	}
	cur := cursor{seq: opts.LastEventID, resume: opts.LastEventID > 0}
	cn, err := s.connect(sctx, cur)
	if err != nil {
		cancel(err)
		return nil, err
	}
	go s.run(sctx, cn, cur)
	return s, nil
}

// Next returns the next event, waiting for it. After the stream ended it
// returns why: ErrStreamClosed after Close, the context's error when the
// stream's ctx ended, ErrWorkspaceDeleted, or the *APIError a reconnect got.
func (s *EventStream) Next(ctx context.Context) (proto.Event, error) {
	// Checked first so that once the stream has ended (after Close, say)
	// Next says so at once rather than by the luck of a select.
	select {
	case <-s.done:
		return s.ended()
	default:
	}
	select {
	case it := <-s.items:
		return s.deliver(it), nil
	case <-s.done:
		return s.ended()
	case <-ctx.Done():
		return proto.Event{}, ctx.Err()
	}
}

// ended is Next on a stream whose goroutine is gone: what was buffered
// before the end is still handed out, unless the reader itself asked for
// the end, then the reason.
func (s *EventStream) ended() (proto.Event, error) {
	if !errors.Is(s.err, ErrStreamClosed) {
		select {
		case it := <-s.items:
			return s.deliver(it), nil
		default:
		}
	}
	return proto.Event{}, s.err
}

// All ranges over the stream's events until ctx or the stream ends; the last
// pair carries the error that ended it.
func (s *EventStream) All(ctx context.Context) iter.Seq2[proto.Event, error] {
	return func(yield func(proto.Event, error) bool) {
		for {
			ev, err := s.Next(ctx)
			if err != nil {
				yield(proto.Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// LastSeq is the stream's position after the events Next returned: pass it
// as EventsOptions.LastEventID to resume a later stream where this one left.
func (s *EventStream) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Close ends the stream and waits for its goroutine and connection to be
// released. It is safe to call more than once.
func (s *EventStream) Close() error {
	s.once.Do(func() { s.cancel(ErrStreamClosed) })
	<-s.done
	return nil
}

func (s *EventStream) deliver(it item) proto.Event {
	s.mu.Lock()
	s.last = it.cursor
	s.mu.Unlock()
	return it.ev
}

// cursor is the goroutine's position: seq is the last seq passed on (or the
// baseline a stream.opened or stream.reset gave), resume whether seq is
// meaningful yet and must be sent as Last-Event-ID.
type cursor struct {
	seq    int64
	resume bool
}

// conn is one HTTP connection of the stream.
type conn struct {
	resp   *http.Response
	cancel context.CancelFunc
}

func (cn *conn) close() {
	cn.cancel()
	cn.resp.Body.Close()
}

func (s *EventStream) connect(ctx context.Context, cur cursor) (*conn, error) {
	q := url.Values{"client_id": {s.c.clientID}}
	if s.opts.SessionID != "" {
		q.Set("session_id", s.opts.SessionID)
	}
	p := path("workspaces", s.wsID, "events")
	cctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, s.c.baseURL+p+"?"+q.Encode(), nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tandem: GET %s: %w", p, err)
	}
	// The token goes in the header, never in ?access_token=, so no error
	// or log line that quotes the URL can carry it.
	req.Header.Set("Authorization", "Bearer "+s.c.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("User-Agent", userAgent)
	if cur.resume {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(cur.seq, 10))
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tandem: GET %s: %w", p, err)
	}
	if resp.StatusCode != http.StatusOK {
		err := readAPIError(resp)
		resp.Body.Close()
		cancel()
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("tandem: GET %s answered %q, not an event stream", p, resp.Header.Get("Content-Type"))
	}
	return &conn{resp: resp, cancel: cancel}, nil
}

// run owns the connection: it reads cn, then reconnects until ctx ends or a
// failure that retrying cannot fix.
func (s *EventStream) run(ctx context.Context, cn *conn, cur cursor) {
	defer close(s.done)
	log := s.c.log.With("workspace_id", s.wsID, "client_id", s.c.clientID)
	failures := 0
	for {
		if cn != nil {
			healthy, err := s.consume(ctx, cn, &cur)
			cn.close()
			cn = nil
			if errors.Is(err, ErrWorkspaceDeleted) {
				s.err = err
				return
			}
			if healthy {
				failures = 0
			}
			if ctx.Err() == nil {
				log.Info("tandem stream dropped, reconnecting", "last_seq", cur.seq, "err", err)
				s.disconnected(err)
			}
		}
		failures++
		if !sleep(ctx, backoff(failures)) {
			s.err = context.Cause(ctx)
			return
		}
		var err error
		cn, err = s.connect(ctx, cur)
		switch {
		case ctx.Err() != nil:
			if cn != nil {
				cn.close()
			}
			s.err = context.Cause(ctx)
			return
		case permanent(err):
			log.Warn("tandem stream cannot reconnect", "err", err)
			s.err = err
			return
		case err != nil:
			log.Info("tandem stream reconnect failed", "attempt", failures, "err", err)
			s.disconnected(err)
		}
	}
}

func (s *EventStream) disconnected(err error) {
	if s.opts.OnDisconnect != nil {
		s.opts.OnDisconnect(err)
	}
}

// consume passes on the frames of one connection until it ends. healthy
// reports that the server opened the stream, so the next reconnect need not
// back off.
func (s *EventStream) consume(ctx context.Context, cn *conn, cur *cursor) (healthy bool, err error) {
	watch := func() {}
	pause := func() {}
	if d := s.opts.IdleTimeout; d > 0 {
		t := time.AfterFunc(d, cn.cancel)
		defer t.Stop()
		watch = func() { t.Reset(d) }
		pause = func() { t.Stop() }
	}
	rd := newSSEReader(cn.resp.Body, watch)
	for {
		f, err := rd.next()
		if err != nil {
			return healthy, err
		}
		ev, ok := s.parse(f, cur)
		if !ok {
			continue
		}
		if ev.Type == proto.EventStreamOpened {
			healthy = true
		}
		// A reader that is slow to take events is not a dead connection.
		pause()
		select {
		case s.items <- item{ev: ev, cursor: cur.seq}:
		case <-ctx.Done():
			return healthy, ctx.Err()
		}
		watch()
		if ev.Type == proto.EventWorkspaceClosing {
			var wc proto.WorkspaceClosing
			if json.Unmarshal(ev.Data, &wc) == nil && wc.Reason == deletedReason {
				return healthy, ErrWorkspaceDeleted
			}
		}
	}
}

// parse turns a frame into the event to pass on, moving the cursor. ok is
// false for a frame to drop: a duplicate (seq at or below the cursor, as a
// replay overlapping what was already passed on) or a malformed one.
func (s *EventStream) parse(f sseFrame, cur *cursor) (proto.Event, bool) {
	if !f.hasID {
		ev := proto.Event{Type: f.event, WorkspaceID: s.wsID, Data: json.RawMessage(f.data)}
		switch f.event {
		case proto.EventStreamOpened:
			var o proto.StreamOpened
			if err := json.Unmarshal(ev.Data, &o); err != nil {
				s.c.log.Warn("tandem stream: malformed stream.opened", "err", err)
				return ev, true
			}
			// A live stream starts after head_seq: that is the position
			// to resume from if this connection drops before any event.
			if !cur.resume {
				cur.seq, cur.resume = o.HeadSeq, true
			}
		case proto.EventStreamReset:
			var r proto.StreamReset
			if err := json.Unmarshal(ev.Data, &r); err != nil {
				s.c.log.Warn("tandem stream: malformed stream.reset", "err", err)
				return ev, true
			}
			// The server goes live after head_seq, which may be below the
			// cursor (another database): keeping the cursor would drop
			// every live event as a duplicate.
			cur.seq, cur.resume = r.HeadSeq, true
		}
		return ev, true
	}
	var ev proto.Event
	if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
		// Skipping it and moving past its id keeps the stream alive; a
		// reconnect would only replay the same bad frame.
		s.c.log.Warn("tandem stream: malformed event, skipped", "id", f.id, "event", f.event, "err", err)
		if n, err := strconv.ParseInt(f.id, 10, 64); err == nil && n > cur.seq {
			cur.seq = n
		}
		return ev, false
	}
	if ev.Seq == 0 {
		ev.Seq, _ = strconv.ParseInt(f.id, 10, 64)
	}
	if ev.Type == "" {
		ev.Type = f.event
	}
	if ev.Seq <= cur.seq {
		return ev, false
	}
	cur.seq, cur.resume = ev.Seq, true
	return ev, true
}

// backoff is the wait before reconnect attempt n (from 1): exponential up to
// maxBackoff, jittered over its upper half so that the clients of a
// restarted server do not all come back in the same instant.
func backoff(n int) time.Duration {
	d := maxBackoff
	if n <= 6 {
		d = min(minBackoff<<(n-1), maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// permanent reports an answer that the same request will get again: a 4xx,
// except those that say "later" (408, 409 such as workspace_closing, 429).
func permanent(err error) bool {
	var e *APIError
	if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
		return false
	}
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return false
	}
	return true
}

// sleep waits d, reporting false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
