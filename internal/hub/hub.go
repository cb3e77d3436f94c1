// Package hub fans the live events of each workspace out to its Server-Sent
// Events streams (contract section 6).
//
// A Hub owns one Topic per workspace. The workspace layer assigns seqs,
// persists kept events and then calls Topic.Publish in seq order; each HTTP
// stream handler calls Topic.Serve, which turns its goroutine into the stream's
// writer. Publish never does I/O and never waits for a stream: it appends a
// preformatted frame to each stream's byte-bounded queue and wakes the writer.
// A stream whose queue overflows is evicted instead of slowing anyone down.
package hub

import (
	"github.com/tandem-dev/tandem/internal/event"

	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Defaults for the zero fields of Config.
const (
	DefaultQueueBytes   = 1 << 20
	DefaultBurstGrace   = 2 * time.Second
	DefaultRingSize     = 4096
	DefaultRingBytes    = 8 << 20
	DefaultWriteTimeout = 10 * time.Second
	DefaultHeartbeat    = 15 * time.Second
	// DefaultPresenceDelay is short enough that a person does not see it.
	DefaultPresenceDelay = 100 * time.Millisecond
	// DefaultFlushTick lets a stream of deltas take a write at most every
	// 2 ms: a model's burst (a fast local model's tokens, a tool's output
	// in pieces) reaches a client in one write instead of one per event,
	// and a model streaming at 100 tokens a second is never held back.
	DefaultFlushTick = 2 * time.Millisecond
)

// Errors returned by Topic.Serve.
var (
	// ErrClosed: the topic or its hub is closed. A Serve call on a closed topic
	// returns it before writing anything, so the caller can still answer
	// with an error status.
	ErrClosed = errors.New("hub: topic closed")
	// ErrDisconnected: Topic.Disconnect ended the stream.
	ErrDisconnected = errors.New("hub: stream disconnected")
	// ErrEvicted: the client fell more than Config.QueueBytes behind.
	ErrEvicted = errors.New("hub: stream evicted (slow consumer)")
)

// Backlog reads persisted (kept) events with after < seq <= upTo from the
// database, oldest first, at most limit. The hub pages through it when its
// ring cannot serve a resume. Every event it returns is treated as kept.
// When it cannot serve after (history older than what is kept), it should
// return an error: the stream then gets stream.reset.
type Backlog func(ctx context.Context, after, upTo int64, limit int) ([]event.Event, error)

// Config tunes a Hub. Zero fields take the Default* values.
type Config struct {
	// QueueBytes is how far behind a stream may stay: a stream whose queue
	// (the frames waiting for its writer) goes over it must be taken by its
	// writer within BurstGrace, else the next event evicts it. A burst of
	// large events (a tool's 1 MiB arguments, then the message that carries
	// them) may thus take a healthy stream over it for a moment.
	QueueBytes int
	// MaxQueueBytes bounds a stream's queue whatever the time: a stream
	// that would go over it is evicted at once. 0 means 8 × QueueBytes. A
	// stream with an empty queue always accepts one frame, however big, so
	// a large event alone evicts nobody.
	MaxQueueBytes int
	// BurstGrace is how long a stream's queue may stay over QueueBytes
	// without its writer taking it (see QueueBytes); 0 means
	// DefaultBurstGrace.
	BurstGrace time.Duration
	// RingSize is how many recent kept events each topic keeps in memory to
	// serve resumes without reading the database.
	RingSize int
	// RingBytes bounds the ring's frames too, so a burst of huge events
	// (tool outputs) cannot pin RingSize times their size.
	RingBytes int
	// WriteTimeout bounds every write+flush to a client; a client that does
	// not take the bytes in time is disconnected.
	WriteTimeout time.Duration
	// Heartbeat is the interval of the ": ping" comment, sent by one ticker
	// for the whole Hub (no timer per stream).
	Heartbeat time.Duration
	// PresenceDelay is how late a client's arrival or departure
	// (client.attached, client.detached) may reach the streams, so that
	// each stream writes a burst of them at once; a later event that
	// cannot wait takes them along.
	PresenceDelay time.Duration
	// FlushTick is the least time between a write of deltas (events not
	// kept) to one stream and the next write: what comes meanwhile waits
	// for the end of the tick and goes in the next write with everything
	// else pending (write coalescing). A kept event does not wait and
	// starts no tick, and an event after a quiet tick is written at once.
	// 0 means DefaultFlushTick; a negative tick writes at every wake-up.
	FlushTick time.Duration
	// Logger receives stream errors; nil means slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxQueueBytes <= 0 {
		c.MaxQueueBytes = 8 * c.QueueBytes
	}
	c.MaxQueueBytes = max(c.MaxQueueBytes, c.QueueBytes)
	if c.BurstGrace <= 0 {
		c.BurstGrace = DefaultBurstGrace
	}
	if c.RingSize <= 0 {
		c.RingSize = DefaultRingSize
	}
	if c.RingBytes <= 0 {
		c.RingBytes = DefaultRingBytes
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.PresenceDelay <= 0 {
		c.PresenceDelay = DefaultPresenceDelay
	}
	if c.FlushTick == 0 {
		c.FlushTick = DefaultFlushTick
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Hub is the server-wide registry of topics. It owns the single heartbeat
// ticker goroutine.
type Hub struct {
	cfg Config
	// bufs holds write buffers shared by all writers: a buffer is only
	// needed while a batch is being written, so idle streams hold none.
	bufs sync.Pool

	mu     sync.Mutex
	topics map[string]*Topic
	closed bool

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// New starts a Hub. Call Close to stop its ticker.
func New(cfg Config) *Hub {
	h := &Hub{
		cfg:    cfg.withDefaults(),
		topics: make(map[string]*Topic),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go h.tick()
	return h
}

// Topic returns the topic id, creating it if needed. head (the last seq
// issued so far) and backlog only matter when the topic is created; an
// existing topic keeps its own. After Close, Topic returns a closed topic
// whose Serve returns ErrClosed.
func (h *Hub) Topic(id string, head int64, backlog Backlog) *Topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t, ok := h.topics[id]; ok {
		return t
	}
	t := newTopic(h, id, head, backlog)
	if h.closed {
		t.closed = true
		return t
	}
	h.topics[id] = t
	return t
}

// Close stops the heartbeat ticker and closes every topic (see Topic.Close).
// It waits for the ticker goroutine but not for the Serve calls to return:
// they run on their callers' goroutines and end after a best-effort flush.
func (h *Hub) Close() {
	h.stopOnce.Do(func() { close(h.stop) })
	<-h.done

	h.mu.Lock()
	h.closed = true
	topics := make([]*Topic, 0, len(h.topics))
	for _, t := range h.topics {
		topics = append(topics, t)
	}
	h.mu.Unlock()
	for _, t := range topics {
		t.Close()
	}
}

// forget drops t from the registry so a later Topic call creates a fresh one.
func (h *Hub) forget(t *Topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.topics[t.id] == t {
		delete(h.topics, t.id)
	}
}

func (h *Hub) tick() {
	defer close(h.done)
	ticker := time.NewTicker(h.cfg.Heartbeat)
	defer ticker.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-ticker.C:
			h.heartbeat()
		}
	}
}

func (h *Hub) heartbeat() {
	h.mu.Lock()
	topics := make([]*Topic, 0, len(h.topics))
	for _, t := range h.topics {
		topics = append(topics, t)
	}
	h.mu.Unlock()
	// Topic locks are taken one at a time and never under h.mu, so a
	// heartbeat pass never blocks Topic or Close for long.
	for _, t := range topics {
		t.heartbeat()
	}
}

// getBuf and putBuf recycle write buffers. Buffers that grew past
// maxPooledBuf for a huge frame are left to the GC, so one burst does not
// pin memory forever.
func (h *Hub) getBuf() *[]byte {
	if b, ok := h.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, initialBuf)
	return &b
}

func (h *Hub) putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	h.bufs.Put(b)
}
