// Package natsbus is the bus of a Tandem cluster (contract section 8):
// events travel between nodes over NATS JetStream, with
// github.com/nats-io/nats.go and its jetstream package.
//
// # The store is the log, JetStream the live feed
//
// Kept events are committed to PostgreSQL before they are published, and
// the store is where every replay comes from; ephemeral events (deltas)
// are live only. The bus carries both to the other nodes through one
// JetStream stream per cluster, in memory and bounded (by age, bytes and
// messages per workspace, discarding the oldest): not a second log, a
// buffer that lets a node read a workspace's events at its own pace.
//
// What JetStream gives over plain pub/sub: each node reads a workspace's
// events through an ordered consumer, which the server feeds as the node
// asks for more. A node that falls behind (a slow stream, a pause) is not
// dropped messages: it reads on from where it was, every event, the
// ephemeral ones too, in order. After a reconnect the ordered consumer
// resumes after the last message it delivered, without a gap. Publishing
// is asynchronous (the server's acknowledgements are handled in the
// background), so the owner's event loop never waits on the bus.
//
// What it cannot cover is told to the subscribers (the lost callback of
// bus.Bus.Subscribe), and bus.Follower then catches up from the store:
//   - events the stream discarded before a node read them (a node further
//     behind than the stream's bounds): each event frame carries the seq
//     of its publisher's previous frame, so the first frame after a hole
//     shows it;
//   - publishes that never reached the stream (an error, a timeout, a
//     full pending window, the connection down): the publisher sends a
//     beacon with its last seq soon after, and a node that has not seen
//     that seq knows it is behind; beacons also go out a second after
//     every burst and every ten seconds when idle, which covers a hole at
//     the very end of a burst, and when a node takes a workspace over, so
//     events its old owner committed but never published are found;
//   - a stream lost with the NATS server (memory storage): on reconnect
//     each node makes sure the stream exists and, when it is a new one,
//     starts its consumers again on it.
//
// # Subjects
//
// Each workspace has two: PREFIX.ws.ID.ev carries its events (the stream's
// subjects are PREFIX.ws.*.ev), and PREFIX.ws.ID.head (plain request/reply,
// not in the stream) is where its owner answers "which seq did you publish
// last". A follower creates its consumer (delivering from then on), then
// requests .head: every event published after the answer reaches it. With
// no owner the request fails at once (no responders) and the store's end
// is used.
//
// A node gets its own events from its local publisher directly, in
// process; the frames carry their origin, and a node skips its own when
// they come back from the stream.
//
// Limits: frames are at most the server's max_payload (1 MiB by default);
// the event log bounds event data below that.
package natsbus

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tandem-dev/tandem/internal/bus"
)

// Defaults of Config's zero fields.
const (
	DefaultPrefix            = "tandem"
	DefaultHeadTimeout       = 2 * time.Second
	DefaultBeaconEvery       = time.Second
	DefaultPendingMsgs       = 1024
	DefaultPendingPublishes  = 1 << 14
	DefaultStreamMaxAge      = 5 * time.Minute
	DefaultStreamMaxBytes    = 256 << 20
	DefaultStreamMaxPerTopic = 1 << 16

	minPendingMsgs = 64
)

// Config is how a node joins the bus.
type Config struct {
	// URL is the NATS server(s), e.g. "nats://10.0.0.5:4222" (a comma
	// separated list for a NATS cluster). JetStream must be enabled.
	URL string
	// Name names the connection on the server: the node id.
	Name string
	// Prefix starts every subject and names the stream, so clusters can
	// share a NATS server.
	Prefix string
	// HeadTimeout bounds a Head request to a workspace's owner, and the
	// JetStream requests of Subscribe and Dial.
	HeadTimeout time.Duration
	// BeaconEvery is how often a publisher that published (or failed to)
	// since its last beacon sends one, and, ten times as long, how often
	// an idle one does.
	BeaconEvery time.Duration
	// PendingMsgs bounds the events a node has read from the stream for
	// one workspace and not yet handed to its subscribers; the rest wait
	// in the stream. At least 64: with pulls of a few messages at a time
	// the consumer was seen to stall until its missed heartbeats reset it
	// (10 s).
	PendingMsgs int
	// PendingPublishes bounds the node's publishes awaiting the server's
	// acknowledgement; past it a publish is dropped (and announced by a
	// beacon) rather than waited for.
	PendingPublishes int
	// StreamMaxAge, StreamMaxBytes and StreamMaxPerWorkspace bound the
	// stream (the oldest events go first): how far behind a node may fall
	// before it has to catch up from the store.
	StreamMaxAge          time.Duration
	StreamMaxBytes        int64
	StreamMaxPerWorkspace int64
	// Replicas is the stream's replica count on a NATS cluster; 0 means 1.
	Replicas int
	// Logger gets connection changes and lost events; nil means
	// slog.Default().
	Logger *slog.Logger
	// Options are added to the connection's (credentials, TLS...).
	Options []nats.Option
}

// Bus is a node's end of the NATS bus. It implements bus.Bus.
type Bus struct {
	cfg    Config
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	local  *bus.Local
	stream string
	origin uint64
	pubOpt []jetstream.PublishOpt

	// ctx ends with Close; upkeep and remote stops run under wg.
	ctx    context.Context
	cancel context.CancelFunc
	kick   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	created   time.Time // the stream's creation, to tell a new one
	remotes   map[string]*remote
	pubs      map[string]*publisher
	bySubject map[string]*publisher
	closed    bool
}

var _ bus.Bus = (*Bus)(nil)

// remote is this node's consumer of a workspace's events, shared by its
// local subscribers.
type remote struct {
	ws, subject string
	topic       *bus.Topic
	refs        int // guarded by Bus.mu
	ready       chan struct{}
	err         error // set before ready closes
	// last is the highest seq seen on the stream; only the consumer's
	// handler writes it, one message at a time.
	last atomic.Int64
	// gone is set when the last subscriber leaves: a consumer still
	// stopping delivers nothing more, even to a topic a new remote feeds.
	gone atomic.Bool

	mu      sync.Mutex
	cons    jetstream.Consumer
	cc      jetstream.ConsumeContext
	stopped bool
}

// Dial connects to NATS and makes sure the cluster's stream exists. The
// connection reconnects for ever; Close ends it.
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
	cfg.PendingMsgs = max(cfg.PendingMsgs, minPendingMsgs)
	if cfg.PendingPublishes <= 0 {
		cfg.PendingPublishes = DefaultPendingPublishes
	}
	if cfg.StreamMaxAge <= 0 {
		cfg.StreamMaxAge = DefaultStreamMaxAge
	}
	if cfg.StreamMaxBytes <= 0 {
		cfg.StreamMaxBytes = DefaultStreamMaxBytes
	}
	if cfg.StreamMaxPerWorkspace <= 0 {
		cfg.StreamMaxPerWorkspace = DefaultStreamMaxPerTopic
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	var o [8]byte
	_, _ = rand.Read(o[:])
	b := &Bus{
		cfg: cfg, log: cfg.Logger, local: bus.NewLocal(),
		stream: token(cfg.Prefix) + "_events", origin: binary.BigEndian.Uint64(o[:]),
		// A full pending window drops the publish at once: Publish never
		// waits (a beacon announces the loss).
		pubOpt:  []jetstream.PublishOpt{jetstream.WithStallWait(time.Nanosecond)},
		kick:    make(chan struct{}, 1),
		remotes: map[string]*remote{}, pubs: map[string]*publisher{}, bySubject: map[string]*publisher{},
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) {
			b.log.Info("natsbus: reconnected")
			b.upkeepSoon()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close
				b.log.Warn("natsbus: disconnected", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			b.log.Warn("natsbus: error", "err", err)
		}),
	}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("natsbus: connect: %w", err)
	}
	b.nc = nc
	b.js, err = jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.PendingPublishes),
		jetstream.WithPublishAsyncTimeout(5*time.Second),
		jetstream.WithPublishAsyncErrHandler(b.publishFailed),
		jetstream.WithDefaultTimeout(cfg.HeadTimeout))
	if err == nil {
		var created time.Time
		created, err = b.ensureStream(b.ctx)
		b.created = created
	}
	if err != nil {
		nc.Close()
		b.cancel()
		return nil, err
	}
	b.wg.Add(1)
	go b.upkeep()
	return b, nil
}

// ensureStream creates the cluster's stream or brings its settings up to
// date, and returns when it was created. Nodes starting together may race
// to create it: the loser updates it.
func (b *Bus) ensureStream(ctx context.Context) (time.Time, error) {
	cfg := jetstream.StreamConfig{
		Name:              b.stream,
		Description:       "Tandem workspace events: a bounded live feed between nodes; the store is the log",
		Subjects:          []string{b.cfg.Prefix + ".ws.*.ev"},
		Storage:           jetstream.MemoryStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            b.cfg.StreamMaxAge,
		MaxBytes:          b.cfg.StreamMaxBytes,
		MaxMsgsPerSubject: b.cfg.StreamMaxPerWorkspace,
		Replicas:          b.cfg.Replicas,
	}
	var err error
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, b.cfg.HeadTimeout)
		var s jetstream.Stream
		s, err = b.js.CreateOrUpdateStream(rctx, cfg)
		cancel()
		if err == nil {
			return s.CachedInfo().Created, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			break
		}
	}
	// Nobody answers JetStream's API on a server that does not run it.
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return time.Time{}, fmt.Errorf("natsbus: the NATS server must run JetStream (nats-server -js): %w", err)
	}
	return time.Time{}, fmt.Errorf("natsbus: stream %s: %w", b.stream, err)
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
	remotes := make([]*remote, 0, len(b.remotes))
	for _, r := range b.remotes {
		remotes = append(remotes, r)
	}
	b.mu.Unlock()
	for _, p := range pubs {
		p.stopBeacons()
	}
	// The server forgets the node's consumers now rather than when they
	// expire.
	for _, r := range remotes {
		<-r.ready
		if r.err == nil {
			r.stop(b, true)
		}
	}
	// What was published reaches the stream before the connection goes.
	select {
	case <-b.js.PublishAsyncComplete():
	case <-time.After(b.cfg.HeadTimeout):
	}
	b.cancel()
	b.nc.Close()
	b.wg.Wait()
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
// node creates the node's consumer of it, delivering from then on: an
// event published anywhere after Subscribe returns reaches fn.
func (b *Bus) Subscribe(workspaceID string, fn func(bus.Event), lost func()) (func(), error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	topic, leave := b.local.Join(workspaceID, fn, lost)
	r := b.remotes[workspaceID]
	first := r == nil
	if first {
		r = &remote{ws: workspaceID, subject: b.subject(workspaceID, "ev"), topic: topic, ready: make(chan struct{})}
		b.remotes[workspaceID] = r
	}
	r.refs++
	b.mu.Unlock()
	if first {
		r.err = b.start(r, jetstream.DeliverNewPolicy)
		close(r.ready)
	} else {
		<-r.ready
	}
	if r.err != nil {
		b.release(r, leave)
		return nil, fmt.Errorf("natsbus: subscribe to %s: %w", workspaceID, r.err)
	}
	var once sync.Once
	return func() { once.Do(func() { b.release(r, leave) }) }, nil
}

// start creates r's ordered consumer and starts reading it.
func (b *Bus) start(r *remote, from jetstream.DeliverPolicy) error {
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.HeadTimeout)
	defer cancel()
	cons, err := b.js.OrderedConsumer(ctx, b.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{r.subject},
		DeliverPolicy:  from,
	})
	if err != nil {
		return err
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { b.receive(r, m) },
		jetstream.PullMaxMessages(b.cfg.PendingMsgs),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// The ordered consumer recreates itself after these (missed
			// heartbeats, a deleted consumer...), resuming where it was.
			b.log.Debug("natsbus: consumer", "workspace_id", r.ws, "err", err)
		}))
	if err != nil {
		b.deleteConsumer(cons)
		return err
	}
	r.mu.Lock()
	stopped := r.stopped
	if !stopped {
		r.cons, r.cc = cons, cc
	}
	r.mu.Unlock()
	if stopped {
		// Released meanwhile (a restart racing the last unsubscribe).
		cc.Stop()
		<-cc.Closed()
		b.deleteConsumer(cons)
	}
	return nil
}

// stop ends r's consumer and waits for its handler to return; with
// forget, the server's consumer is deleted too rather than left to expire.
func (r *remote) stop(b *Bus, forget bool) {
	r.mu.Lock()
	r.stopped = true
	cons, cc := r.cons, r.cc
	r.cons, r.cc = nil, nil
	r.mu.Unlock()
	if cc == nil {
		return
	}
	cc.Stop()
	<-cc.Closed()
	if forget {
		b.deleteConsumer(cons)
	}
}

func (b *Bus) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || !b.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.HeadTimeout)
	defer cancel()
	_ = b.js.DeleteConsumer(ctx, b.stream, info.Name)
}

// release drops a subscriber of r; the last one stops the node's consumer,
// in the background (a stop may wait for the consumer's own recovery to
// give up, and a cancel must not), under the bus's wait group.
func (b *Bus) release(r *remote, leave func()) {
	leave()
	b.mu.Lock()
	defer b.mu.Unlock()
	r.refs--
	if r.refs > 0 || b.remotes[r.ws] != r {
		return
	}
	delete(b.remotes, r.ws)
	r.gone.Store(true)
	if b.closed || r.err != nil {
		return // Close stops it
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		r.stop(b, true)
	}()
}

// receive hands a message of r's subject to the node's subscribers. It
// runs on the consumer's goroutine, one message at a time, in stream
// order.
func (b *Bus) receive(r *remote, m jetstream.Msg) {
	if r.gone.Load() {
		return
	}
	f, err := decode(m.Data())
	if err != nil {
		b.log.Warn("natsbus: dropped a malformed message", "subject", m.Subject(), "err", err)
		return
	}
	last := r.last.Load()
	seq := f.event.Seq
	if f.beacon {
		if seq > last {
			// The owner published events this node never saw.
			r.last.Store(seq)
			r.topic.Lost()
		}
		return
	}
	if seq <= last {
		return // already seen, or a stale owner's
	}
	r.last.Store(seq)
	if last > 0 && f.prev > last {
		// Events between were discarded by the stream before this node
		// read them, or never reached it.
		b.log.Info("natsbus: events lost on the bus; subscribers catch up from the store",
			"workspace_id", r.ws, "after", last, "before", seq)
		r.topic.Lost()
	}
	if f.origin == b.origin {
		return // delivered in process when published
	}
	r.topic.Deliver(f.event)
}

// upkeepSoon asks the upkeep goroutine to check the stream.
func (b *Bus) upkeepSoon() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// upkeep runs after each reconnect until Close: the stream may be a new
// one (a NATS server restarted with memory storage lost it), in which
// case the node's consumers start again on it and their subscribers are
// told they lost events; the node's publishers send a beacon, for what
// they published while cut off.
func (b *Bus) upkeep() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.kick:
		}
		created, err := b.ensureStream(b.ctx)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			b.log.Warn("natsbus: stream check after reconnect failed; retrying", "err", err)
			t := time.NewTimer(b.cfg.BeaconEvery)
			select {
			case <-b.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			b.upkeepSoon()
			continue
		}
		b.mu.Lock()
		fresh := !created.Equal(b.created)
		b.created = created
		var remotes []*remote
		if fresh {
			for _, r := range b.remotes {
				remotes = append(remotes, r)
			}
		}
		pubs := make([]*publisher, 0, len(b.pubs))
		for _, p := range b.pubs {
			pubs = append(pubs, p)
		}
		b.mu.Unlock()
		if fresh {
			b.log.Warn("natsbus: the stream is a new one; consumers start again", "stream", b.stream)
		}
		for _, r := range remotes {
			b.restart(r)
		}
		for _, p := range pubs {
			p.beaconSoon()
		}
	}
}

// restart moves r's consumer to a new stream: everything on it is new to
// r, and what went before it is lost.
func (b *Bus) restart(r *remote) {
	<-r.ready
	if r.err != nil {
		return
	}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	cc := r.cc
	r.cc, r.cons = nil, nil
	r.mu.Unlock()
	if cc != nil {
		cc.Stop()
		<-cc.Closed()
	}
	for b.ctx.Err() == nil {
		err := b.start(r, jetstream.DeliverAllPolicy)
		if err == nil {
			break
		}
		b.log.Warn("natsbus: restart consumer", "workspace_id", r.ws, "err", err)
		select {
		case <-b.ctx.Done():
		case <-time.After(b.cfg.BeaconEvery):
		}
	}
	r.topic.Lost()
}

// Publisher implements bus.Bus: this node's subscribers get the events in
// process, other nodes' through the stream, and the node answers Head
// requests for the workspace until Close.
func (b *Bus) Publisher(workspaceID string, head int64) (bus.Publisher, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	lp, err := b.local.Publisher(workspaceID, head)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	p := &publisher{b: b, ws: workspaceID, local: lp, subject: b.subject(workspaceID, "ev"), prev: head,
		stop: make(chan struct{}), done: make(chan struct{}), soon: make(chan struct{}, 1)}
	p.last.Store(head)
	p.sent.Store(head)
	hs, err := b.nc.Subscribe(b.subject(workspaceID, "head"), func(m *nats.Msg) {
		// Read before replying: whatever is published after this answer
		// is stored in the stream after the asker's consumer was made.
		if err := m.Respond(binary.AppendUvarint(nil, uint64(p.last.Load()))); err != nil {
			b.log.Warn("natsbus: answer head request", "workspace_id", workspaceID, "err", err)
		}
	})
	if err != nil {
		b.mu.Unlock()
		lp.Close()
		return nil, fmt.Errorf("natsbus: publish %s: %w", workspaceID, err)
	}
	p.headSub = hs
	b.pubs[workspaceID] = p
	b.bySubject[p.subject] = p
	b.mu.Unlock()
	go p.beacons(b.cfg.BeaconEvery)
	// Events committed before the takeover and never published (the old
	// owner died first) are found by the nodes this beacon reaches.
	p.beacon()
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
	// last is the last seq published, as Head reports it; sent the last
	// one handed to the connection, as beacons report it: a beacon never
	// goes out ahead of the event it names.
	last, sent atomic.Int64
	prev       int64 // Publish is called from one goroutine at a time
	closed     atomic.Bool
	// failed counts the publishes that did not reach the stream since the
	// last beacon.
	failed atomic.Int64
	// stop ends the beacons goroutine, which closes done as it returns;
	// soon asks it for a beacon now.
	stop, done, soon chan struct{}
	stopOnce         sync.Once
}

func (p *publisher) Publish(e bus.Event) {
	p.last.Store(e.Seq)
	p.local.Publish(e)
	// Each frame has its own buffer: the library keeps the message until
	// the server acknowledges it.
	data := appendEvent(make([]byte, 0, frameSize(e)), e, p.prev, p.b.origin)
	p.prev = e.Seq
	if _, err := p.b.js.PublishMsgAsync(&nats.Msg{Subject: p.subject, Data: data}, p.b.pubOpt...); err != nil {
		p.lost()
	}
	p.sent.Store(e.Seq)
}

// lost counts a publish that did not reach the stream and asks for a
// beacon, which tells the other nodes where the events end.
func (p *publisher) lost() {
	p.failed.Add(1)
	p.beaconSoon()
}

func (p *publisher) beaconSoon() {
	select {
	case p.soon <- struct{}{}:
	default:
	}
}

// publishFailed is the library's report of an asynchronous publish the
// server did not acknowledge.
func (b *Bus) publishFailed(_ jetstream.JetStream, m *nats.Msg, _ error) {
	b.mu.Lock()
	p := b.bySubject[m.Subject]
	b.mu.Unlock()
	if p != nil {
		p.lost()
	}
}

// beacon tells other nodes the last seq published, so those that missed
// events catch up.
func (p *publisher) beacon() {
	if p.closed.Load() {
		return
	}
	if _, err := p.b.js.PublishMsgAsync(&nats.Msg{Subject: p.subject, Data: appendBeacon(nil, p.sent.Load())}, p.b.pubOpt...); err != nil {
		p.failed.Add(1)
	}
}

// beacons sends a beacon every tick after publishes, every ten ticks when
// idle, and at the next tick after a publish failed, until stopBeacons.
func (p *publisher) beacons(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	sent, idle, pending := p.sent.Load(), 0, false
	for {
		select {
		case <-p.stop:
			return
		case <-p.soon:
			pending = true // at the next tick: one beacon for a run of failures
			continue
		case <-t.C:
		}
		idle++
		if n := p.failed.Swap(0); n > 0 {
			p.b.log.Warn("natsbus: events did not reach the stream; other nodes will catch up from the store",
				"workspace_id", p.ws, "failed", n)
			pending = true
		}
		if last := p.sent.Load(); last != sent || idle >= 10 || pending {
			p.beacon()
			sent, idle, pending = last, 0, false
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
		delete(p.b.bySubject, p.subject)
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
