// Package server wires Tandem together: store, hub, workspaces, sessions and the
// HTTP API, and stops them in the right order.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/bus/natsbus"
	"github.com/tandem-dev/tandem/internal/checkpoint"
	"github.com/tandem-dev/tandem/internal/cluster"
	"github.com/tandem-dev/tandem/internal/compute"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/coordinator"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/guard"
	"github.com/tandem-dev/tandem/internal/httpapi"
	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/mcp"
	"github.com/tandem-dev/tandem/internal/memtrim"
	"github.com/tandem-dev/tandem/internal/pending"
	"github.com/tandem-dev/tandem/internal/provider/registry"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/internal/toolset"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
	"github.com/tandem-dev/tandem/web"
)

// httpGrace is how long Shutdown lets requests in flight finish before it
// closes every connection left.
const httpGrace = time.Second

// Version is the server's version string.
const Version = "0.1.0"

// Config configures a Server. Zero durations take the contract's defaults.
type Config struct {
	DataDir string
	// Dir is the data dir already opened (and locked) with OpenDataDir, for
	// callers that need it before the server exists (to read the token
	// only once no other server can write it). The server owns it from New
	// on, failure included. nil means New opens DataDir.
	Dir   *DataDir
	Token string
	// DefaultModel is --model or TANDEM_MODEL: when set, it wins over the
	// configuration files' model; else theirs, else echo.
	DefaultModel string
	// Config is the server's configuration file, read and checked
	// (config.LoadServer); nil for none. Each workspace's own file is read
	// as its prompts need it.
	Config      *config.File
	CreateGrace time.Duration
	DetachGrace time.Duration
	Heartbeat   time.Duration
	// StreamQueueBytes bounds each stream's queue; 0 means 1 MiB.
	StreamQueueBytes int
	// MaxBody bounds request bodies; 0 means 16 MiB.
	MaxBody int64
	// AllowedOrigins are the browser origins, besides the server's own,
	// allowed to call the API (--allowed-origins).
	AllowedOrigins []string
	// App serves the web app on / and every path outside /v1; nil serves
	// the one embedded in the binary (package web).
	App http.Handler
	// BodyTimeout bounds the time a request body may take to arrive after
	// its headers; 0 means 30 s.
	BodyTimeout time.Duration
	// Getenv reads provider settings (OPENAI_API_KEY...); nil means os.Getenv.
	Getenv func(string) string
	// MCPHandshakeTimeout bounds an MCP server's start up to its first
	// tool list; 0 means 30 s (servers run through npx or uvx may download
	// themselves first).
	MCPHandshakeTimeout time.Duration
	// ModelRetryBackoff is the wait before model retry n; nil means 1s, 2s, 4s.
	ModelRetryBackoff func(n int) time.Duration
	Logger            *slog.Logger

	// StoreURL, when set (postgres://...), makes the server a node of a
	// cluster on that PostgreSQL database, with BusURL (nats://...) as its
	// bus (contract section 8); both or neither. NodeID names the node;
	// "" means the host name plus a random suffix.
	StoreURL string
	BusURL   string
	NodeID   string
	// LeaseTTL is how long a node's hold on a workspace lasts unrenewed;
	// 0 means cluster.DefaultLeaseTTL.
	LeaseTTL time.Duration
	// ClusterTick is how often a node renews its leases, looks for
	// workspaces to take over and refreshes its claims; it must be well
	// under LeaseTTL. 0 means cluster.DefaultTick.
	ClusterTick time.Duration
	// IdleSweeps are the ticks of the sweeps that drop what the caches keep
	// for sessions idle since the sweep before (histories, encodings,
	// session records, system prompts, session approvals), so that memory
	// comes back once the load is gone; nil means every IdleSweepEvery.
	IdleSweeps <-chan time.Time
	// ComputeSlots is how many runs may compute at once (package compute);
	// 0 means compute.Default(), one per CPU but one. Runs waiting for
	// their models hold none.
	ComputeSlots int
	// Rate is each token's requests per second when RateSet (--rate; 0
	// is unlimited), which limits the owner token too; unset, every
	// other token gets auth.DefaultRate and the owner none.
	Rate    float64
	RateSet bool
	// TokenWatchEvery is how often open streams' tokens are checked
	// against the store; 0 means auth.DefaultWatchEvery.
	TokenWatchEvery time.Duration
	// SandboxHelper is the tandem binary the agent's commands are started
	// through, confined (contract section 12): tandem serve's own. ""
	// confines nothing, so only commands whose sandbox is "off" run.
	SandboxHelper string
}

// IdleSweepEvery is how often a server sweeps its caches: what an idle
// session kept goes 5 to 10 minutes after its last run.
const IdleSweepEvery = 5 * time.Minute

// Server is a running Tandem.
type Server struct {
	cfg        Config
	log        *slog.Logger
	store      store.Store
	hub        *hub.Hub
	workspaces *workspace.Manager
	sessions   *session.Service
	broker     *pending.Broker
	runs       *coordinator.Coordinator
	tools      *toolset.Set
	providers  *registry.Registry
	api        *httpapi.API
	auth       *auth.Service
	// services is the domain the API serves (the cluster's router on a
	// node of one), for the transports of this process that need no HTTP.
	services domain.Services
	http     *http.Server
	dir      *DataDir
	// A cluster node's: nil on a single node.
	node   *cluster.Node
	bus    *natsbus.Bus
	natsc  *nats.Conn
	nodeID string

	// stopSweeps ends the idle sweeps, and sweepsDone is closed once they
	// have.
	stopSweeps     chan struct{}
	sweepsDone     chan struct{}
	stopSweepsOnce sync.Once
	// trim gives the heap back to the OS when a burst of load ends.
	trim *memtrim.Trimmer
	// sandbox starts the agent's commands confined.
	sandbox *sandbox.Launcher
	// lost is why the server lost its data dir to another process, once
	// it did (see DataDir.Guard); Serve returns it.
	lost atomic.Pointer[error]
}

// New opens the database in cfg.DataDir and builds the server.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.CreateGrace == 0 {
		cfg.CreateGrace = 30 * time.Second
	}
	if cfg.DetachGrace == 0 {
		cfg.DetachGrace = 10 * time.Second
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	var bad error
	if cfg.Token == "" {
		bad = errors.New("server needs a token")
	}
	configs, err := config.NewLoader(cfg.Config)
	if err != nil && bad == nil {
		bad = err
	}
	for _, o := range cfg.AllowedOrigins {
		if _, err := httpapi.CheckOrigin(o); err != nil && bad == nil {
			bad = fmt.Errorf("allowed origins: %w", err)
		}
	}
	if bad != nil {
		if cfg.Dir != nil {
			cfg.Dir.Close()
		}
		return nil, bad
	}
	dir := cfg.Dir
	if dir == nil {
		var err error
		if dir, err = OpenDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	nodeID := cfg.NodeID
	if nodeID == "" {
		nodeID = DefaultNodeID()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, dir: dir, providers: registry.New(), nodeID: nodeID}
	var (
		db       store.Store
		fences   *postgres.Fences
		follower *bus.Follower
	)
	if cfg.StoreURL != "" || cfg.BusURL != "" {
		var err error
		if fences, err = s.joinCluster(ctx); err != nil {
			dir.Close()
			return nil, err
		}
		db = fences
		follower = &bus.Follower{Bus: s.bus, Log: bus.StoreLog(fences.DB), Logger: cfg.Logger}
	} else {
		sq, err := sqlite.Open(ctx, filepath.Join(dir.Path(), "tandem.db"))
		if err != nil {
			dir.Close()
			return nil, fmt.Errorf("open database: %w", err)
		}
		db = sq
	}
	s.store = db
	if cfg.SandboxHelper != "" {
		s.sandbox = sandbox.NewLauncher(ctx, cfg.SandboxHelper)
	}
	s.hub = hub.New(hub.Config{
		QueueBytes: cfg.StreamQueueBytes,
		Heartbeat:  cfg.Heartbeat,
		Logger:     cfg.Logger,
	})
	// The coordinator needs the components below, which call back into it:
	// they are given its Hooks, which coordinator.New binds to it.
	hooks := &coordinator.Hooks{}
	broker := pending.New(db, hooks.Answered, cfg.Logger)
	s.broker = broker
	tools := toolset.New(broker)
	s.tools = tools
	s.workspaces = workspace.NewManager(workspace.Config{
		Store: db,
		Hub:   s.hub,
		// The seam between the event logs and this node's streams; in a
		// cluster the owner of a workspace publishes to the NATS bus too
		// (workspace.Own), and its followers feed this one from there.
		Bus:         bus.NewLocal(),
		Follower:    follower,
		CreateGrace: cfg.CreateGrace,
		DetachGrace: cfg.DetachGrace,
		Hooks: workspace.Hooks{
			Closed:     hooks.WorkspaceClosed,
			ClientGone: func(ws *workspace.Workspace, clientID string) { tools.DropClient(ws.ID, clientID) },
			// Called in a cluster only, once the node exists (below).
			StreamsChanged: func(ws *workspace.Workspace) { s.node.StreamsChanged(ws) },
		},
		Logger: cfg.Logger,
	})
	s.sessions = session.NewService(session.Config{
		Tools:         tools,
		Store:         db,
		Workspaces:    s.workspaces,
		Configs:       configs,
		ModelOverride: cfg.DefaultModel,
		Runtime:       hooks,
		Logger:        cfg.Logger,
	})
	s.runs = coordinator.New(coordinator.Config{
		Store:      db,
		Workspaces: s.workspaces,
		Sessions:   s.sessions,
		Runner: &agent.Runner{
			Store:   db,
			Tools:   tools,
			Backoff: cfg.ModelRetryBackoff,
			Slots:   compute.New(cfg.ComputeSlots),
			Logger:  cfg.Logger,
		},
		Broker:      broker,
		Tools:       tools,
		Configs:     configs,
		MCP:         mcp.PoolOptions{HandshakeTimeout: cfg.MCPHandshakeTimeout, ClientVersion: Version},
		NewProvider: s.providers.Provider,
		Checkpoints: checkpoint.NewManager(filepath.Join(dir.Path(), "checkpoints")),
		Sandbox:     s.sandbox,
		SandboxDir:  dir.Path(),
		Getenv:      cfg.Getenv,
		Hooks:       hooks,
		Logger:      cfg.Logger,
	})
	// Runs a crash left half done end now, before anyone can see the gap.
	// In a cluster each workspace's new owner does it as it takes over.
	if fences == nil {
		if err := s.runs.Recover(ctx); err != nil {
			s.sandbox.Close()
			db.Close()
			dir.Close()
			return nil, err
		}
	}
	app := cfg.App
	if app == nil {
		app = web.Handler()
	}
	// Every call is held to its caller's role here, under the cluster's
	// router, so that a command from another node is judged as a request
	// to this one is.
	services := guard.Wrap(localDomain(s.workspaces, s.sessions, s.runs), guard.Config{
		DataDir: dir.Path(),
		Roots:   configs.WorkspaceRoots,
		SandboxBase: func(ctx context.Context, wid string) sandbox.Settings {
			ws, err := s.workspaces.Get(ctx, wid)
			if err != nil {
				return sandbox.Settings{}
			}
			cfg, err := configs.Workspace(ws.Path)
			if err != nil {
				return sandbox.Settings{}
			}
			return cfg.Sandbox
		},
	})
	if fences != nil {
		// A node of a cluster: every call on a workspace goes to its
		// owner, through the router.
		s.node = cluster.New(cluster.Config{
			NodeID:     nodeID,
			Store:      fences,
			Bus:        s.bus,
			NATS:       s.natsc,
			Workspaces: s.workspaces,
			Local:      services,
			Recover:    s.runs,
			LeaseTTL:   cfg.LeaseTTL,
			Tick:       cfg.ClusterTick,
			Logger:     cfg.Logger,
		})
		services = s.node.Domain()
	}
	s.auth = newAuth(cfg, db, dir)
	s.services = services
	s.api = httpapi.New(httpapi.Config{
		Token:          cfg.Token,
		Version:        Version,
		DefaultModel:   configs.Server().DefaultModel(cfg.DefaultModel),
		MaxBody:        cfg.MaxBody,
		BodyTimeout:    cfg.BodyTimeout,
		AllowedOrigins: cfg.AllowedOrigins,
		App:            app,
		Services:       services,
		NodeID:         nodeID,
		Sandbox:        s.SandboxStatus(),
		Auth:           s.auth,
		WorkspaceRoots: configs.WorkspaceRoots,
		Logger:         cfg.Logger,
	})
	handler := s.api.Handler()
	if s.node != nil {
		if err := s.node.Start(); err != nil {
			s.auth.Close()
			s.sandbox.Close()
			s.leaveCluster()
			db.Close()
			dir.Close()
			return nil, err
		}
	}
	s.http = &http.Server{
		Handler: handler,
		// No WriteTimeout: it would cut every stream. The hub sets a write
		// deadline per write instead.
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       httpapi.BaseContext,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.stopSweeps, s.sweepsDone = make(chan struct{}), make(chan struct{})
	go s.sweepIdle(cfg.IdleSweeps)
	// What other processes read to find this server comes back if the data
	// dir is emptied under it; the token file too, when it was there.
	keep := map[string][]byte{}
	if raw, err := os.ReadFile(filepath.Join(dir.Path(), tokenFileName)); err == nil {
		keep[tokenFileName] = raw
	}
	dir.Guard(keep, cfg.Logger, func(err error) {
		s.lost.Store(&err)
		s.log.Error("stopping: the data dir is another server's now", "err", err)
		_ = s.http.Close()
	})
	s.trim = memtrim.Start(memtrim.Config{Trimmed: func(allocated uint64, took time.Duration) {
		s.log.Debug("gave memory back after a load", "allocated_mib", allocated>>20, "took", took)
	}})
	return s, nil
}

// sweepIdle sweeps the caches at every tick until Shutdown.
func (s *Server) sweepIdle(ticks <-chan time.Time) {
	defer close(s.sweepsDone)
	if ticks == nil {
		t := time.NewTicker(IdleSweepEvery)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-s.stopSweeps:
			return
		case <-ticks:
			s.runs.SweepIdle()
			s.sessions.SweepIdle()
			s.broker.SweepIdle()
			s.providers.SweepIdle()
		}
	}
}

// SandboxStatus says whether the agent's commands can be confined here,
// and how (GET /v1/health, tandem serve's line at start).
func (s *Server) SandboxStatus() proto.SandboxStatus {
	if s.sandbox == nil {
		return proto.SandboxStatus{Mechanism: "none", Reason: "no sandbox helper was configured"}
	}
	st := s.sandbox.Status()
	return proto.SandboxStatus{Available: st.Available, Mechanism: st.Mechanism, Reason: st.Reason}
}

// Local is what a transport in this process needs to serve the server's
// owner without HTTP (package localbridge): the domain the HTTP API serves,
// and the audit log it writes. Such a transport checks no token: it must
// only ever act for the person who started the process.
func (s *Server) Local() (domain.Services, *auth.Service) { return s.services, s.auth }

// Handler is the server's root HTTP handler (tests serve it with httptest).
func (s *Server) Handler() http.Handler { return s.http.Handler }

// Listen listens on addr and records the listener's URL in
// DATA_DIR/server.json, where client commands look for the server.
func (s *Server) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := s.dir.Publish(LocalURL(ln.Addr())); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(ln)
	if lost := s.lost.Load(); lost != nil {
		return *lost
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// LocalURL is the URL a client on this machine reaches a listener at: an
// unspecified address (0.0.0.0, ::) is reached on loopback.
func LocalURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	ip := tcp.IP
	switch {
	case ip == nil || ip.Equal(net.IPv4zero):
		ip = net.IPv4(127, 0, 0, 1)
	case ip.Equal(net.IPv6unspecified):
		ip = net.IPv6loopback
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

// Shutdown stops accepting work, tells every stream the workspace is closing,
// cancels runs, ends streams and closes the database. It is safe to call on a
// server that never served (tests using Handler).
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopSweepsOnce.Do(func() { close(s.stopSweeps) })
	<-s.sweepsDone
	if s.trim != nil {
		s.trim.Stop()
	}
	s.api.BeginShutdown()
	s.workspaces.Shutdown(ctx)
	var errs []error
	if err := s.runs.Wait(ctx); err != nil {
		errs = append(errs, err)
	}
	// Handing over: once this node's runs ended, its leases go, and the
	// other nodes take its workspaces at once.
	s.leaveCluster()
	s.providers.Close()
	s.hub.Close()
	// Shutdown waits for every connection to go idle, but a connection that
	// never sent a request (browsers pre-connect), or whose headers or body
	// trickle in, is never idle: after a grace for the requests in flight,
	// what is left is closed. That is the normal end of such a client, not
	// a failed shutdown.
	gctx, cancel := context.WithTimeout(ctx, httpGrace)
	err := s.http.Shutdown(gctx)
	cancel()
	if err != nil {
		s.log.Debug("closing the connections left after the grace", "err", err)
		_ = s.http.Close()
	}
	// Close does not wait for handlers: they end as their connections fail,
	// and must be done before the store closes under them.
	if err := s.api.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop http server: %w", err))
	}
	s.auth.Close()
	s.sandbox.Close()
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close database: %w", err))
	}
	// Last: the data dir is free for another server once the database is.
	if err := s.dir.Close(); err != nil {
		errs = append(errs, fmt.Errorf("release data dir: %w", err))
	}
	return errors.Join(errs...)
}
