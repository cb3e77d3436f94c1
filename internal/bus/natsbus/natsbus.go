// Package natsbus is the bus of a Tandem cluster (contract section 8):
// events travel between nodes over NATS, with github.com/nats-io/nats.go.
//
// # Core NATS, not JetStream
//
// Kept events are committed to PostgreSQL before they are published, and
// the store is where every replay comes from; ephemeral events (deltas)
// are live only. A JetStream stream would keep a second copy of what the
// store already has, cost an acknowledged, persisted write per event on
// the path of every delta, and could disagree with the store. What a
// stream needs from the bus is only what core NATS gives: low-latency
// fan-out, in publish order per publisher and subject. What it may lose (a
// slow consumer's dropped messages, what a reconnect missed) is recovered
// from the store by bus.Follower, which this bus tells about the loss.
//
// # Subjects
//
// Each workspace has two: PREFIX.ws.ID.ev carries its events, and
// PREFIX.ws.ID.head is where its owner answers "which seq did you publish
// last". A follower subscribes to .ev, then requests .head on the same
// connection, so the server has its subscription before the owner answers:
// every event published after the answer reaches it. With no owner the
// request fails at once (no responders) and the store's end is used.
//
// The connection does not echo: a node gets its own events from its local
// publisher directly, in process, and none twice.
//
// Limits: ordering holds within one NATS server or cluster (not across
// gateways or leaf nodes, where interest propagates differently). Frames
// are at most the server's max_payload (1 MiB by default); the event log
// bounds event data below that.
package natsbus

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/bus"
)

// Defaults of Config's zero fields.
const (
	DefaultPrefix       = "tandem"
	DefaultHeadTimeout  = 2 * time.Second
	DefaultBeaconEvery  = time.Second
	DefaultPendingMsgs  = 1 << 16
	DefaultPendingBytes = 256 << 20
)

// Config is how a node joins the bus.
type Config struct {
	// URL is the NATS server(s), e.g. "nats://10.0.0.5:4222" (a comma
	// separated list for a NATS cluster).
	URL string
	// Name names the connection on the server: the node id.
	Name string
	// Prefix starts every subject, so clusters can share a NATS server.
	Prefix string
	// HeadTimeout bounds a Head request to a workspace's owner.
	HeadTimeout time.Duration
	// BeaconEvery is how often a publisher that published since its last
	// beacon sends one (and, ten times as long, how often an idle one
	// does). A subscriber whose dropped messages included the last events
	// of a burst learns from it that it is behind: nats.go reports a slow
	// consumer once per episode, and nothing else would tell it.
	BeaconEvery time.Duration
	// PendingMsgs and PendingBytes bound the events received for one
	// workspace and not yet handed to its subscribers; past them NATS
	// drops messages and the subscribers are told they lost some.
	PendingMsgs, PendingBytes int
	// Logger gets connection changes and dropped messages; nil means
	// slog.Default().
	Logger *slog.Logger
	// Options are added to the connection's (credentials, TLS...).
	Options []nats.Option
}

// Bus is a node's end of the NATS bus. It implements bus.Bus.
type Bus struct {
	cfg   Config
	log   *slog.Logger
	nc    *nats.Conn
	local *bus.Local

	mu      sync.Mutex
	remotes map[string]*remote
	bySub   map[*nats.Subscription]string
	pubs    map[string]*publisher
	closed  bool
}

var _ bus.Bus = (*Bus)(nil)

// remote is this node's NATS subscription to a workspace's events, shared
// by its local subscribers.
type remote struct {
	sub   *nats.Subscription
	topic *bus.Topic
	refs  int
}

// Dial connects to NATS. The connection reconnects for ever; Close ends it.
func Dial(cfg Config) (*Bus, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.HeadTimeout <= 0 {
		cfg.HeadTimeout = DefaultHeadTimeout
	}
	if cfg.BeaconEvery <= 0 {
		cfg.BeaconEvery = DefaultBeaconEvery
	}
	if cfg.PendingMsgs <= 0 {
		cfg.PendingMsgs = DefaultPendingMsgs
	}
	if cfg.PendingBytes <= 0 {
		cfg.PendingBytes = DefaultPendingBytes
	}
	b := &Bus{
		cfg: cfg, log: cfg.Logger, local: bus.NewLocal(),
		remotes: map[string]*remote{}, bySub: map[*nats.Subscription]string{}, pubs: map[string]*publisher{},
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectHandler(b.reconnected),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close
				b.log.Warn("natsbus: disconnected", "err", err)
			}
		}),
		nats.ErrorHandler(b.asyncError),
	}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natsbus: connect: %w", err)
	}
	b.nc = nc
	return b, nil
}

// Close ends the node's subscriptions and publishers and the connection.
func (b *Bus) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	pubs := make([]*publisher, 0, len(b.pubs))
	for _, p := range b.pubs {
		pubs = append(pubs, p)
	}
	b.mu.Unlock()
	for _, p := range pubs {
		p.stopBeacons()
	}
	b.nc.Close()
}

// ErrClosed is returned by calls on a closed bus.
var ErrClosed = errors.New("natsbus: closed")

func (b *Bus) subject(workspaceID, kind string) string {
	return b.cfg.Prefix + ".ws." + token(workspaceID) + "." + kind
}

// token makes a workspace id a single subject token: ids of letters,
// digits, '-' and '_' (UUIDs) as they are, anything else hex-encoded
// behind a '~' no plain id has.
func token(id string) string {
	if id != "" {
		plain := true
		for _, c := range []byte(id) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				plain = false
				break
			}
		}
		if plain {
			return id
		}
	}
	return "~" + hex.EncodeToString([]byte(id))
}

// Subscribe implements bus.Bus. The first subscriber of a workspace on this
// node subscribes the node to its subject, and waits until the server has
// the subscription: an event published anywhere after Subscribe returns
// reaches fn.
func (b *Bus) Subscribe(workspaceID string, fn func(bus.Event), lost func()) (func(), error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	topic, leave := b.local.Join(workspaceID, fn, lost)
	r := b.remotes[workspaceID]
	if r == nil {
		r = &remote{topic: topic}
		sub, err := b.nc.Subscribe(b.subject(workspaceID, "ev"), func(m *nats.Msg) { b.receive(r, m) })
		if err == nil {
			err = sub.SetPendingLimits(b.cfg.PendingMsgs, b.cfg.PendingBytes)
		}
		if err != nil {
			leave()
			b.mu.Unlock()
			return nil, fmt.Errorf("natsbus: subscribe to %s: %w", workspaceID, err)
		}
		r.sub = sub
		b.remotes[workspaceID] = r
		b.bySub[sub] = workspaceID
	}
	r.refs++
	b.mu.Unlock()
	// A round trip: the server has our subscription once it answers.
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.HeadTimeout)
	defer cancel()
	if err := b.nc.FlushWithContext(ctx); err != nil {
		b.unsubscribe(workspaceID, r, leave)
		return nil, fmt.Errorf("natsbus: subscribe to %s: %w", workspaceID, err)
	}
	var once sync.Once
	return func() { once.Do(func() { b.unsubscribe(workspaceID, r, leave) }) }, nil
}

func (b *Bus) unsubscribe(workspaceID string, r *remote, leave func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	leave()
	r.refs--
	if r.refs == 0 && b.remotes[workspaceID] == r {
		delete(b.remotes, workspaceID)
		delete(b.bySub, r.sub)
		if !b.closed {
			_ = r.sub.Unsubscribe()
		}
	}
}

// receive hands a message of r's subject to the node's subscribers. It
// runs on the subscription's goroutine, one message at a time.
func (b *Bus) receive(r *remote, m *nats.Msg) {
	f, err := decode(m.Data)
	if err != nil {
		b.log.Warn("natsbus: dropped a malformed message", "subject", m.Subject, "err", err)
		return
	}
	if f.beacon {
		// The owner may have published while we could not hear it.
		r.topic.Lost()
		return
	}
	r.topic.Deliver(f.event)
}

// asyncError is nats.go's report of problems with no caller to return
// them to; a slow consumer means messages were dropped.
func (b *Bus) asyncError(_ *nats.Conn, sub *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrSlowConsumer) && sub != nil {
		b.mu.Lock()
		ws, ok := b.bySub[sub]
		r := b.remotes[ws]
		b.mu.Unlock()
		if ok && r != nil {
			b.log.Warn("natsbus: slow consumer, events dropped; subscribers catch up from the store", "workspace_id", ws)
			r.topic.Lost()
		}
		return
	}
	b.log.Warn("natsbus: error", "err", err)
}

// reconnected runs once the connection is back (nats.go has sent our
// subscriptions again): subscribers may have missed events, and remote
// subscribers may have missed ours.
func (b *Bus) reconnected(*nats.Conn) {
	b.log.Info("natsbus: reconnected")
	b.mu.Lock()
	topics := make([]*bus.Topic, 0, len(b.remotes))
	for _, r := range b.remotes {
		topics = append(topics, r.topic)
	}
	pubs := make([]*publisher, 0, len(b.pubs))
	for _, p := range b.pubs {
		pubs = append(pubs, p)
	}
	b.mu.Unlock()
	for _, t := range topics {
		t.Lost()
	}
	for _, p := range pubs {
		p.beacon()
	}
}

// Publisher implements bus.Bus: this node's subscribers get the events in
// process, other nodes' over NATS, and the node answers Head requests for
// the workspace until Close.
func (b *Bus) Publisher(workspaceID string, head int64) (bus.Publisher, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	lp, err := b.local.Publisher(workspaceID, head)
	if err != nil {
		return nil, err
	}
	p := &publisher{b: b, ws: workspaceID, local: lp, subject: b.subject(workspaceID, "ev")}
	p.last.Store(head)
	hs, err := b.nc.Subscribe(b.subject(workspaceID, "head"), func(m *nats.Msg) {
		// Read before replying: whatever is published after this answer
		// goes out on this connection after it.
		if err := m.Respond(binary.AppendUvarint(nil, uint64(p.last.Load()))); err != nil {
			b.log.Warn("natsbus: answer head request", "workspace_id", workspaceID, "err", err)
		}
	})
	if err != nil {
		lp.Close()
		return nil, fmt.Errorf("natsbus: publish %s: %w", workspaceID, err)
	}
	p.headSub = hs
	b.pubs[workspaceID] = p
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.beacons(b.cfg.BeaconEvery)
	// The server has the responder once it answers: a Head from any node
	// after Publisher returns finds it.
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.HeadTimeout)
	defer cancel()
	if err := b.nc.FlushWithContext(ctx); err != nil {
		b.log.Warn("natsbus: publisher not yet known to the server", "workspace_id", workspaceID, "err", err)
	}
	return p, nil
}

type publisher struct {
	b       *Bus
	ws      string
	local   bus.Publisher
	subject string
	headSub *nats.Subscription
	last    atomic.Int64
	buf     []byte // Publish is called from one goroutine at a time
	closed  atomic.Bool
	// stop ends the beacons goroutine, which closes done as it returns.
	stop, done chan struct{}
	stopOnce   sync.Once
	// failing is set while publishes fail, so one error is logged per run
	// of failures.
	failing atomic.Bool
}

func (p *publisher) Publish(e bus.Event) {
	p.last.Store(e.Seq)
	p.local.Publish(e)
	// nats.go copies the frame into its write buffer before returning, so
	// one buffer serves every publish.
	p.buf = appendEvent(p.buf[:0], e)
	if err := p.b.nc.Publish(p.subject, p.buf); err != nil {
		// Lost for other nodes; a beacon after the reconnect tells them.
		if !p.failing.Swap(true) {
			p.b.log.Warn("natsbus: publish failed; other nodes will catch up from the store",
				"workspace_id", p.ws, "seq", e.Seq, "err", err)
		}
		return
	}
	p.failing.Store(false)
}

// beacon tells other nodes the last seq published, so those that missed
// events catch up.
func (p *publisher) beacon() {
	if p.closed.Load() {
		return
	}
	if err := p.b.nc.Publish(p.subject, appendBeacon(nil, p.last.Load())); err != nil {
		p.b.log.Warn("natsbus: beacon", "workspace_id", p.ws, "err", err)
	}
}

// beacons sends a beacon every tick after publishes, and every ten ticks
// when idle, until stopBeacons.
func (p *publisher) beacons(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	sent, idle := p.last.Load(), 0
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		idle++
		if last := p.last.Load(); last != sent || idle >= 10 {
			p.beacon()
			sent, idle = last, 0
		}
	}
}

func (p *publisher) stopBeacons() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

func (p *publisher) Close() {
	if p.closed.Swap(true) {
		return
	}
	p.stopBeacons()
	p.b.mu.Lock()
	if p.b.pubs[p.ws] == p {
		delete(p.b.pubs, p.ws)
	}
	closed := p.b.closed
	p.b.mu.Unlock()
	if !closed {
		_ = p.headSub.Unsubscribe()
		// Once the server has the unsubscription, a Head for the
		// workspace fails at once (no responders) instead of waiting for
		// an answer that will not come.
		ctx, cancel := context.WithTimeout(context.Background(), p.b.cfg.HeadTimeout)
		defer cancel()
		_ = p.b.nc.FlushWithContext(ctx)
	}
	p.local.Close()
}

// Head implements bus.Bus: this node's own publisher's last seq, or the
// answer of the node that publishes the workspace; false when none does.
func (b *Bus) Head(ctx context.Context, workspaceID string) (int64, bool, error) {
	b.mu.Lock()
	p := b.pubs[workspaceID]
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return 0, false, ErrClosed
	}
	if p != nil {
		return p.last.Load(), true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.HeadTimeout)
	defer cancel()
	m, err := b.nc.RequestWithContext(ctx, b.subject(workspaceID, "head"), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("natsbus: head of %s: %w", workspaceID, err)
	}
	seq, n := binary.Uvarint(m.Data)
	if n <= 0 || n != len(m.Data) || seq > 1<<62 {
		return 0, false, fmt.Errorf("natsbus: head of %s: malformed answer", workspaceID)
	}
	return int64(seq), true, nil
}
