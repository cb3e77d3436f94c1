// Package cluster makes several Tandem servers one (contract section 8):
// each workspace has one owner at a time, the node holding its lease in
// PostgreSQL, which executes its runs, numbers its events and holds its
// pending waiters. Other nodes serve its streams from the bus and send the
// calls that act on it to the owner as typed commands over NATS
// request/reply (Router): the cluster is one more implementation of the
// domain's interfaces, under every transport.
//
// Ownership is taken on demand (the first node a request for an unowned
// workspace reaches takes it) and over from a dead or departed owner: each
// node renews its leases and watches the others', and takes a workspace
// whose lease expired or was released (a clean stop hands over this way).
// Taking over follows one order: acquire the lease, number from above
// every seq used so far, publish, then recover what the last owner left
// (its active runs end interrupted, its parked work stays suspended and
// answerable, its queued runs run here). A node that loses a lease stops
// writing for the workspace at once: its writes are fenced on the lease's
// epoch in the database, whatever the node believes.
package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/goroutine"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Defaults of Config's zero durations. A dead owner's workspace is taken
// within LeaseTTL + takeGrace + Tick (about 11 s), inside the contract's
// 15 s.
const (
	DefaultLeaseTTL = 5 * time.Second
	DefaultTick     = time.Second
	// DefaultForward bounds a command sent to a workspace's owner: past
	// it the owner is taken for gone (workspace_unavailable).
	DefaultForward = 10 * time.Second
)

// Recoverer takes over what a previous owner left of a workspace's runs
// (coordinator.RecoverWorkspace).
type Recoverer interface {
	RecoverWorkspace(ctx context.Context, workspaceID string) (queued int, err error)
}

// Store is what a node needs of the cluster's store (PostgreSQL's
// postgres.Fences): the leases, the fence on this node's writes, and the
// blobs that carry what is too large for one bus message.
type Store interface {
	AcquireLease(ctx context.Context, workspaceID, owner string, ttl time.Duration) (store.Lease, error)
	RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error)
	ReleaseLease(ctx context.Context, l store.Lease) error
	GetLease(ctx context.Context, workspaceID string) (store.Lease, error)
	Leases(ctx context.Context) ([]store.Lease, error)
	// Hold lets this node write for the workspace while l holds; Drop
	// stops its writes at once.
	Hold(l store.Lease)
	Drop(workspaceID string)
	GetWorkspace(ctx context.Context, id string) (store.Workspace, error)
	MaxSeq(ctx context.Context, workspaceID string) (int64, error)
	PutBlob(ctx context.Context, id string, data []byte) error
	TakeBlob(ctx context.Context, id string) ([]byte, error)
	DeleteBlobsOlderThan(ctx context.Context, age time.Duration) error
}

// Config is what a node needs.
type Config struct {
	NodeID string
	Store  Store
	Bus    bus.Bus
	// NATS carries the commands between nodes.
	NATS       *nats.Conn
	Workspaces *workspace.Manager
	// Local is this node's own domain: the router calls it for the
	// workspaces this node owns, and for the commands other nodes send.
	Local   domain.Services
	Recover Recoverer
	// LeaseTTL, Tick and ForwardTimeout default to the constants above.
	LeaseTTL       time.Duration
	Tick           time.Duration
	ForwardTimeout time.Duration
	Logger         *slog.Logger
}

// Node is one server's membership in the cluster.
type Node struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	owned  map[string]store.Lease
	owners map[string]store.Lease // other nodes' live leases, as last read
	locks  map[string]*sync.Mutex // one takeover at a time per workspace
	// claims are the other nodes' streams of the workspaces this node
	// owns (see claims.go).
	claims map[string]*remoteClaims
	// reported is set for the workspaces whose last claims report (see
	// reportClaims) was not empty.
	reported map[string]bool
	// changed holds the workspaces whose streams here changed since the
	// claims goroutine last reported them; kick wakes it.
	changed map[string]*workspace.Workspace
	kick    chan struct{}
	closed  bool
	// reporting makes one claims report at a time, so two reports of one
	// workspace (the tick's refresh and a change's) are stamped in the
	// order their counts were read. stamp starts at the node's start
	// time, so a restarted node's reports are not taken for stale ones.
	reporting sync.Mutex
	stamp     atomic.Uint64

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	// spawned runs the work handed off the NATS handlers' goroutines.
	spawned goroutine.Group
	sub     *nats.Subscription
	csub    *nats.Subscription
	// swept is when the loop last swept the blobs nobody took.
	swept time.Time
	// heardSince is when the loop last found this node's bus connection
	// up after it was down (its start, at first); zero while it is down.
	// Only the loop uses it.
	heardSince time.Time
	// serving counts the commands being served, bounded by maxServing so
	// a flood cannot start unbounded goroutines.
	serving chan struct{}
}

// New returns a node; Start makes it act.
func New(cfg Config) *Node {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForward
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	n := &Node{cfg: cfg, log: cfg.Logger.With("node_id", cfg.NodeID),
		owned: map[string]store.Lease{}, owners: map[string]store.Lease{}, locks: map[string]*sync.Mutex{}, claims: map[string]*remoteClaims{}, reported: map[string]bool{},
		changed: map[string]*workspace.Workspace{}, kick: make(chan struct{}, 1),
		ctx: ctx, stop: stop, serving: make(chan struct{}, maxServing)}
	n.stamp.Store(uint64(time.Now().UnixNano()))
	return n
}

// ID is the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Start serves the commands other nodes send this one with the local
// domain, and starts renewing leases and watching for workspaces to take
// over.
func (n *Node) Start() error {
	sub, err := n.cfg.NATS.Subscribe(commandSubject(n.cfg.NodeID), n.serveCommand)
	if err != nil {
		return fmt.Errorf("cluster: listen for commands: %w", err)
	}
	n.sub = sub
	if n.csub, err = n.cfg.NATS.Subscribe(claimsSubject(n.cfg.NodeID), n.claimed); err != nil {
		return fmt.Errorf("cluster: listen for claims: %w", err)
	}
	if err := n.cfg.NATS.Flush(); err != nil {
		return fmt.Errorf("cluster: listen for commands: %w", err)
	}
	n.heardSince = time.Now()
	n.wg.Add(2)
	go n.loop()
	go n.claimsLoop()
	return nil
}

// owns reports whether this node holds the workspace's lease.
func (n *Node) owns(workspaceID string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.owned[workspaceID]
	return ok
}

func (n *Node) lockOf(workspaceID string) *sync.Mutex {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.locks[workspaceID]
	if l == nil {
		l = &sync.Mutex{}
		n.locks[workspaceID] = l
	}
	return l
}

// errUnavailable is the contract's answer while nobody owns a workspace.
func errUnavailable(workspaceID string) error {
	return apierr.Errorf(proto.CodeWorkspaceUnavailable, "workspace %s has no owner right now (its owner is being replaced); try again in a few seconds", workspaceID)
}

// route returns the node that owns the workspace, taking it when nobody
// does. store.ErrNotFound when the workspace does not exist.
func (n *Node) route(ctx context.Context, workspaceID string) (string, error) {
	if n.owns(workspaceID) {
		return n.cfg.NodeID, nil
	}
	now := time.Now()
	n.mu.Lock()
	known, ok := n.owners[workspaceID]
	n.mu.Unlock()
	if ok && n.held(known, now) {
		return known.Owner, nil
	}
	l, err := n.cfg.Store.GetLease(ctx, workspaceID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, err := n.cfg.Store.GetWorkspace(ctx, workspaceID); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	case n.held(l, now) && l.Owner != n.cfg.NodeID:
		n.remember(l)
		return l.Owner, nil
	case live(l, now):
		// Ours by the store but not in memory: a takeover under way here
		// (wait for it), or a lease of this node's previous life.
		n.lockOf(workspaceID).Lock()
		n.lockOf(workspaceID).Unlock()
		if n.owns(workspaceID) {
			return n.cfg.NodeID, nil
		}
		return "", errUnavailable(workspaceID)
	}
	if err := n.take(ctx, workspaceID); err != nil {
		var held *store.HeldError
		if errors.As(err, &held) && held.Held.Owner != n.cfg.NodeID {
			n.remember(held.Held)
			return held.Held.Owner, nil
		}
		return "", err
	}
	return n.cfg.NodeID, nil
}

func (n *Node) remember(l store.Lease) {
	n.mu.Lock()
	n.owners[l.WorkspaceID] = l
	n.mu.Unlock()
}

// forget drops what this node believes of another's lease, after the
// owner did not answer.
func (n *Node) forget(workspaceID string) {
	if workspaceID == "" {
		return
	}
	n.mu.Lock()
	delete(n.owners, workspaceID)
	n.mu.Unlock()
}

// forgetHere forgets the workspace on this node, its owner or nobody's,
// and lets go of its lease, which the store removed with it: nothing is
// renewed or taken over for a workspace that is gone.
func (n *Node) forgetHere(ctx context.Context, workspaceID string) error {
	if err := n.cfg.Local.Workspaces.Forget(ctx, workspaceID); err != nil {
		return err
	}
	n.cfg.Store.Drop(workspaceID)
	n.mu.Lock()
	delete(n.owned, workspaceID)
	delete(n.owners, workspaceID)
	claims := n.claims[workspaceID]
	delete(n.claims, workspaceID)
	n.mu.Unlock()
	if claims != nil {
		claims.releaseAll()
	}
	return nil
}

// take acquires the workspace's lease and takes the workspace over.
func (n *Node) take(ctx context.Context, workspaceID string) error {
	mu := n.lockOf(workspaceID)
	mu.Lock()
	defer mu.Unlock()
	n.mu.Lock()
	_, owned := n.owned[workspaceID]
	closed := n.closed
	n.mu.Unlock()
	if owned {
		return nil
	}
	if closed {
		return errUnavailable(workspaceID)
	}
	// Bounded by the node's life, not the request that triggered it: a
	// takeover, once begun, finishes.
	ctx = context.WithoutCancel(ctx)
	lease, err := n.cfg.Store.AcquireLease(ctx, workspaceID, n.cfg.NodeID, n.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := n.takeOver(ctx, lease); err != nil {
		n.log.Error("take over workspace", "workspace_id", workspaceID, "err", err)
		n.lose(workspaceID, "takeover_failed")
		if rerr := n.cfg.Store.ReleaseLease(ctx, lease); rerr != nil {
			n.log.Warn("release lease after a failed takeover", "workspace_id", workspaceID, "err", rerr)
		}
		return errUnavailable(workspaceID)
	}
	n.log.Info("workspace taken", "workspace_id", workspaceID, "epoch", lease.Epoch, "took", time.Since(start))
	return nil
}

// takeOver is the order of a takeover, once the lease is held.
func (n *Node) takeOver(ctx context.Context, lease store.Lease) error {
	id := lease.WorkspaceID
	n.cfg.Store.Hold(lease)
	n.mu.Lock()
	n.owned[id] = lease
	delete(n.owners, id)
	n.mu.Unlock()
	ws, err := n.cfg.Workspaces.Get(ctx, id)
	if err != nil {
		return err
	}
	rec, err := n.cfg.Store.GetWorkspace(ctx, id)
	if err != nil {
		return err
	}
	maxSeq, err := n.cfg.Store.MaxSeq(ctx, id)
	if err != nil {
		return err
	}
	// Above every seq persisted or reserved by any earlier owner.
	head := max(maxSeq, rec.SeqReserved)
	pub, err := n.cfg.Bus.Publisher(id, head)
	if err != nil {
		return err
	}
	ws.Own(pub, head)
	// Open for the create grace: queued runs taken over need an open
	// workspace, and parked work must stay answerable; claims keep it
	// open after that as on one server.
	if err := ws.HoldOpen(); err != nil {
		return err
	}
	queued, err := n.cfg.Recover.RecoverWorkspace(ctx, id)
	if err != nil {
		return err
	}
	if queued > 0 {
		n.log.Info("runs queued on the previous owner run here", "workspace_id", id, "runs", queued)
	}
	return nil
}

// lose ends this node's ownership of the workspace: writes are refused
// from now on, and the workspace's runs end here. Ending them waits for
// them, so the loop, whose renewals must not be late, does that part on
// a goroutine of its own.
func (n *Node) lose(workspaceID, reason string) {
	if n.drop(workspaceID, reason) {
		n.disown(workspaceID, reason)
	}
}

// drop forgets the lease; it reports whether the node held it.
func (n *Node) drop(workspaceID, reason string) bool {
	n.cfg.Store.Drop(workspaceID)
	n.mu.Lock()
	_, was := n.owned[workspaceID]
	delete(n.owned, workspaceID)
	n.mu.Unlock()
	if was {
		n.log.Warn("workspace lost", "workspace_id", workspaceID, "reason", reason)
	}
	return was
}

func (n *Node) disown(workspaceID, reason string) {
	n.mu.Lock()
	claims := n.claims[workspaceID]
	delete(n.claims, workspaceID)
	n.mu.Unlock()
	ws, err := n.cfg.Workspaces.Get(context.Background(), workspaceID)
	if err == nil {
		ws.Disown(reason)
	}
	if claims != nil {
		claims.releaseAll()
	}
}

// claimsOf returns the other nodes' claims on ws, which this node owns.
func (n *Node) claimsOf(ws *workspace.Workspace) *remoteClaims {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.claims[ws.ID]
	if c == nil {
		c = newRemoteClaims(ws)
		n.claims[ws.ID] = c
	}
	return c
}

// loop renews this node's leases and takes the workspaces whose owner
// died or left.
func (n *Node) loop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.renew()
		n.watch()
		n.reportClaims()
		n.sweepBlobs()
	}
}

// reportClaims tells the owners of the workspaces this node streams which
// clients have streams here: a stream on any node is a claim (it keeps
// the workspace open, announces its client, keeps its client's tools).
// Every tick refreshes them all (the owner expires the claims of nodes
// that stopped reporting); a change is reported at once besides (see
// StreamsChanged). And the owner releases the claims of nodes that
// stopped reporting.
//
// Silence from the bus is not the departure of clients: while this node
// cannot hear the bus, and until it has heard it for as long as a report
// is counted, it keeps the claims it last knew. A workspace whose clients
// are all on other nodes is not closed, its runs not canceled nor its
// clients' tools dropped, by an outage of the bus.
func (n *Node) reportClaims() {
	maxAge := claimsMaxAge * n.cfg.Tick
	switch up := n.cfg.NATS.IsConnected(); {
	case !up:
		n.heardSince = time.Time{}
	case n.heardSince.IsZero():
		n.heardSince = time.Now()
	}
	heard := !n.heardSince.IsZero() && time.Since(n.heardSince) > maxAge
	for _, ws := range n.cfg.Workspaces.Loaded() {
		if ws.Owned() {
			if heard {
				n.claimsOf(ws).expire(maxAge)
			}
			continue
		}
		n.reportClaimsOf(ws)
	}
}

// reportClaimsOf sends the owner of ws this node's streams of it. A
// report that went empty is sent once more, so the owner releases at
// once rather than when the node's reports expire.
func (n *Node) reportClaimsOf(ws *workspace.Workspace) {
	if ws.Owned() || !n.claimsToReport(ws) {
		return
	}
	// Found (or taken: a claim needs an owner) before the counts are read
	// for good, so that a takeover, slow, delays no other report.
	owner, err := n.route(n.ctx, ws.ID)
	if err != nil || owner == n.cfg.NodeID {
		return
	}
	n.reporting.Lock()
	defer n.reporting.Unlock()
	counts := ws.StreamCounts()
	n.mu.Lock()
	was := n.reported[ws.ID]
	if len(counts) > 0 {
		n.reported[ws.ID] = true
	} else {
		delete(n.reported, ws.ID)
	}
	n.mu.Unlock()
	if len(counts) == 0 && !was {
		return
	}
	data, _ := json.Marshal(claims{WorkspaceID: ws.ID, Node: n.cfg.NodeID, Stamp: n.stamp.Add(1), Clients: counts})
	if err := n.cfg.NATS.Publish(claimsSubject(owner), data); err != nil {
		n.log.Warn("report claims", "workspace_id", ws.ID, "err", err)
	}
}

// claimsToReport reports whether ws has streams here, or had at the last
// report.
func (n *Node) claimsToReport(ws *workspace.Workspace) bool {
	if len(ws.StreamCounts()) > 0 {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reported[ws.ID]
}

// StreamsChanged reports this node's streams of ws to its owner without
// waiting for the next tick: a new stream is a claim at once, so a
// workspace about to close for want of claims stays open and the client
// is announced. It never waits: the claims goroutine sends the report,
// one per workspace however many streams changed meanwhile.
func (n *Node) StreamsChanged(ws *workspace.Workspace) {
	n.mu.Lock()
	n.changed[ws.ID] = ws
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// claimsLoop sends the reports StreamsChanged asked for.
func (n *Node) claimsLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
		}
		n.mu.Lock()
		changed := n.changed
		n.changed = map[string]*workspace.Workspace{}
		n.mu.Unlock()
		for _, ws := range changed {
			n.reportClaimsOf(ws)
		}
	}
}

// claimsMaxAge is how many ticks an owner counts a node's last report.
const claimsMaxAge = 4

// claims is a node's report of its streams of a workspace.
type claims struct {
	WorkspaceID string `json:"workspace_id"`
	Node        string `json:"node"`
	// Stamp grows with each report of the node: the owner applies them
	// concurrently, and ignores one that a later report overtook.
	Stamp   uint64         `json:"stamp"`
	Clients map[string]int `json:"clients,omitempty"`
}

func claimsSubject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".claims"
}

// claimed applies another node's report, when this node owns the
// workspace.
func (n *Node) claimed(m *nats.Msg) {
	var c claims
	if err := json.Unmarshal(m.Data, &c); err != nil || c.Node == "" || c.Node == n.cfg.NodeID {
		return
	}
	if !n.owns(c.WorkspaceID) {
		return
	}
	ws, err := n.cfg.Workspaces.Get(n.ctx, c.WorkspaceID)
	if err != nil {
		return
	}
	// Off the connection's goroutine: announcing a client writes an event.
	claims := n.claimsOf(ws)
	n.spawn(func() { claims.set(c.Node, c.Stamp, c.Clients) })
}

// spawn runs f on a goroutine Close waits for, unless the node is closed.
func (n *Node) spawn(f func()) bool { return n.spawned.Go(f) }

func (n *Node) renew() {
	n.mu.Lock()
	leases := slices.Collect(maps.Values(n.owned))
	n.mu.Unlock()
	for _, l := range leases {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Tick)
		got, err := n.cfg.Store.RenewLease(ctx, l, n.cfg.LeaseTTL)
		cancel()
		switch {
		case err == nil:
			n.mu.Lock()
			if cur, ok := n.owned[l.WorkspaceID]; ok && cur.Epoch == got.Epoch {
				n.owned[l.WorkspaceID] = got
			}
			n.mu.Unlock()
		case errors.Is(err, store.ErrLeaseLost) || !time.Now().Before(l.Expires.Add(n.keepGrace())):
			// Lost, or cannot tell before the grace past its end is over:
			// either way another node may own it now. Within the grace
			// (the database restarting, say) its runs go on: no other
			// node takes a lease before its takeover grace (watch), and
			// renewing an expired lease nobody took takes it back at the
			// same epoch.
			if n.drop(l.WorkspaceID, "lease_lost") {
				n.spawn(func() { n.disown(l.WorkspaceID, "lease_lost") })
			}
		default:
			n.log.Warn("renew lease", "workspace_id", l.WorkspaceID, "err", err)
		}
	}
}

// watch takes over workspaces whose lease expired or was released.
func (n *Node) watch() {
	ctx, cancel := context.WithTimeout(n.ctx, 5*n.cfg.Tick)
	defer cancel()
	leases, err := n.cfg.Store.Leases(ctx)
	if err != nil {
		n.log.Warn("list leases", "err", err)
		return
	}
	now := time.Now()
	for _, l := range leases {
		if n.owns(l.WorkspaceID) {
			continue
		}
		if n.held(l, now) {
			n.remember(l)
			continue
		}
		// A takeover recovers the runs left behind: off the loop, whose
		// renewals must not wait for it.
		n.spawn(func() {
			if err := n.take(n.ctx, l.WorkspaceID); err != nil && !errors.Is(err, store.ErrLeaseHeld) {
				n.log.Warn("take over workspace", "workspace_id", l.WorkspaceID, "err", err)
			}
		})
	}
}

// Close stops the node: it stops renewing and taking, releases its leases
// (handing its workspaces to the other nodes at once) and stops answering
// commands. Call it after the workspaces closed and the runs
// ended, so what they wrote was written as owner.
func (n *Node) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	n.spawned.Stop()
	n.stop()
	for _, sub := range []*nats.Subscription{n.sub, n.csub} {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
	}
	n.wg.Wait()
	n.spawned.Wait()
	n.mu.Lock()
	leases := slices.Collect(maps.Values(n.owned))
	n.mu.Unlock()
	for _, l := range leases {
		n.lose(l.WorkspaceID, "shutdown")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := n.cfg.Store.ReleaseLease(ctx, l); err != nil {
			n.log.Warn("release lease", "workspace_id", l.WorkspaceID, "err", err)
		}
		cancel()
	}
}

// live reports whether a lease read from the store is held now. The
// store's clock decides expiry on writes; this read side compares with
// the local clock, which only makes a node ask a dead owner a little
// longer or take over a little earlier, never write without a lease.
func live(l store.Lease, now time.Time) bool {
	return !l.Expires.IsZero() && l.Expires.After(now)
}

// An owner that cannot renew its lease (the database restarting, or out
// of its reach) keeps its workspaces, their runs going on, for keepGrace
// past the lease's end, trying to renew; the other nodes leave an expired
// lease to its owner for takeGrace, longer, before they take it. So an
// owner that reaches the database again within keepGrace takes its lease
// back with no other owner in between, and its runs are not interrupted;
// a dead owner's workspaces are taken within LeaseTTL + takeGrace + Tick.

// keepGrace is how long past its end this node keeps a lease it could not
// renew.
func (n *Node) keepGrace() time.Duration { return n.cfg.LeaseTTL / 2 }

// takeGrace is how long past its end an unreleased lease is still left to
// its owner.
func (n *Node) takeGrace() time.Duration { return n.cfg.LeaseTTL }

// held reports whether another node's lease l is still its owner's at now:
// live, or expired (not released) less than takeGrace ago.
func (n *Node) held(l store.Lease, now time.Time) bool {
	return !l.Expires.IsZero() && l.Expires.Add(n.takeGrace()).After(now)
}
