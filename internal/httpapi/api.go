// Package httpapi is Tandem's HTTP layer: it decodes requests, calls the domain
// packages and encodes their answers. It holds no state of its own beyond the
// shutdown flag.
package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/api"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/signin"
	"github.com/tandem-dev/tandem/proto"
)

// DefaultMaxBody is the request body limit when Config.MaxBody is zero.
const DefaultMaxBody = 16 << 20

// DefaultBodyTimeout is how long a request body may take to arrive after its
// headers when Config.BodyTimeout is zero.
const DefaultBodyTimeout = 30 * time.Second

// Config wires the API to the domain.
type Config struct {
	Token        string
	Version      string
	DefaultModel string
	// NodeID is the node id GET /v1/health reports.
	NodeID string
	// Sandbox is whether the agent's commands can be confined here.
	Sandbox proto.SandboxStatus
	MaxBody int64
	// BodyTimeout bounds the time a request body may take to arrive after
	// its headers; 0 means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// AllowedOrigins are the origins besides the server's own whose
	// browser requests are served (CORS), in any form CheckOrigin accepts;
	// invalid ones are ignored (the server checks them at start).
	AllowedOrigins []string
	// App serves the web app: GET and HEAD of / and of any path outside /v1,
	// without a token and under the same origin and host checks. nil leaves
	// those paths 404.
	App http.Handler
	// Services is the domain the routes call: the local one on a single
	// server, the cluster's router on a node of a cluster.
	domain.Services
	// Auth knows people's tokens and roles (section 9); nil knows only
	// Token, the owner's.
	Auth *auth.Service
	// WorkspaceRoots are where members may open workspaces, which GET
	// /v1/me tells them; nil: none.
	WorkspaceRoots func() []string
	// SignIn keeps the one-time sign-in codes (POST /v1/signin-codes and
	// /v1/signin); nil makes a set of the API's own.
	SignIn *signin.Codes
	Logger *slog.Logger
}

// API serves the /v1 routes.
type API struct {
	cfg      Config
	log      *slog.Logger
	origins  map[string]struct{} // AllowedOrigins, normalized
	stopping atomic.Bool
	auth     *auth.Service
	routes   *routeTable // filled by Handler
	signin   *signin.Codes

	signinLimits signinLimits

	// active counts the handlers running, so a shutdown that had to close
	// connections under them can wait for them before the store closes.
	mu     sync.Mutex
	active int
	idle   chan struct{} // closed when active drops to 0; nil while idle
}

// New returns the API for cfg.
func New(cfg Config) *API {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	origins := make(map[string]struct{}, len(cfg.AllowedOrigins))
	for _, o := range cfg.AllowedOrigins {
		if n, err := CheckOrigin(o); err == nil {
			origins[n] = struct{}{}
		}
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.New(auth.Config{OwnerToken: cfg.Token})
	}
	if cfg.SignIn == nil {
		cfg.SignIn = signin.New(nil)
	}
	return &API{cfg: cfg, log: cfg.Logger, origins: origins, auth: cfg.Auth, routes: &routeTable{}, signin: cfg.SignIn}
}

// BeginShutdown makes every later request but health answer 503 shutting_down.
func (a *API) BeginShutdown() { a.stopping.Store(true) }

// Wait waits until no handler is running, or ctx ends.
func (a *API) Wait(ctx context.Context) error {
	a.mu.Lock()
	if a.active == 0 {
		a.mu.Unlock()
		return nil
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("handlers still running: %w", ctx.Err())
	}
}

// track counts the request among the running handlers for Wait.
func (a *API) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.enter()
		defer a.leave()
		next.ServeHTTP(w, r)
	})
}

func (a *API) enter() {
	a.mu.Lock()
	a.active++
	a.mu.Unlock()
}

func (a *API) leave() {
	a.mu.Lock()
	a.active--
	if a.active == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
	a.mu.Unlock()
}

// Handler returns the root handler.
func (a *API) Handler() http.Handler {
	r := chi.NewRouter()
	routes := a.routes
	r.Use(a.track, a.logRequests, a.recoverer, a.guard(routes), a.limitBody)
	// The app is what no route takes, so it can never shadow one of /v1.
	r.NotFound(a.serveApp)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		a.reject(w, r, apierr.Errorf(proto.CodeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.Get("/v1/health", a.health)
	r.Get("/v1/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(api.Spec)
	})
	// The event stream is routed from the top and checks the token and
	// the shutdown itself (admit): an idle stream keeps its goroutine's
	// stack for as long as its client stays, and each router and
	// middleware it went through stays on it (see streamEvents).
	r.Get("/v1/workspaces/{wid}/events", a.streamEvents)
	r.With(a.refuseWhileStopping).Post("/v1/signin", a.signIn)
	r.Group(func(r chi.Router) {
		r.Use(a.refuseWhileStopping, a.authorize)
		a.authRoutes(r)
		r.Route("/v1/workspaces", func(r chi.Router) {
			r.Post("/", a.createWorkspace)
			r.Get("/", a.listWorkspaces)
			r.Route("/{wid}", func(r chi.Router) {
				r.Get("/", a.getWorkspace)
				r.Delete("/", a.deleteWorkspace)
				r.Post("/forget", a.forgetWorkspace)
				r.Get("/permissions", a.permissions)
				r.Get("/mcp", a.mcpServers)
				r.Post("/permissions/{rid}", a.answerPermission)
				r.Post("/tool-calls/{rid}", a.answerToolCall)
				r.Route("/sessions", func(r chi.Router) {
					r.Post("/", a.createSession)
					r.Get("/", a.listSessions)
					r.Get("/last", a.lastSession)
					r.Post("/import", a.importSession)
					r.Route("/{sid}", func(r chi.Router) {
						r.Get("/", a.getSession)
						r.Patch("/", a.updateSession)
						r.Delete("/", a.deleteSession)
						r.Get("/messages", a.listMessages)
						r.Get("/events", a.listSessionEvents)
						r.Post("/log", a.logToSession)
						r.Put("/model", a.setModel)
						r.Post("/resume", a.resume)
						r.Post("/compact", a.compact)
						r.Get("/pending", a.pending)
						a.routeRewinds(r)
					})
				})
			})
		})
		r.Route("/v1/workspaces/{wid}/agent", func(r chi.Router) {
			r.Post("/", a.prompt)
			r.Post("/sessions/{sid}/cancel", a.cancel)
			r.Get("/sessions/{sid}", a.agentStatus)
		})
	})
	if err := routes.fill(r); err != nil {
		// Walk fails only on a malformed router, which is a bug here.
		panic(fmt.Sprintf("httpapi: list routes: %v", err))
	}
	return r
}

func (a *API) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, proto.Health{Status: "ok", Version: a.cfg.Version, DefaultModel: a.cfg.DefaultModel, NodeID: a.cfg.NodeID, Sandbox: a.cfg.Sandbox})
}

func (a *API) refuseWhileStopping(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.refused(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refused answers 503 and reports true while the server shuts down.
func (a *API) refused(w http.ResponseWriter, r *http.Request) bool {
	if a.stopping.Load() {
		a.reject(w, r, apierr.Errorf(proto.CodeShuttingDown, "server is shutting down"))
		return true
	}
	return false
}

// limitBody bounds the request body in size and in time: it must arrive
// within BodyTimeout of the headers. The deadline is the connection's read
// deadline, set only while a body is on its way: left on the connection of a
// streaming GET, it would end the stream (net/http's background read would
// fail and cancel the request).
func (a *API) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			rc := http.NewResponseController(w)
			// Not every connection supports deadlines (ErrNotSupported);
			// such a body is bounded by the server's own timeouts only.
			if rc.SetReadDeadline(time.Now().Add(a.cfg.BodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// hasBody reports whether a request body may still be on its way.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// deadlineBody lifts the body's read deadline once the body has arrived, so
// a handler that runs long afterwards keeps its connection (and its
// request's context, which net/http cancels when a read fails).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// reject answers a request before its body is read: a missing token, a
// refused origin, a route that does not exist. A body still on its way is not
// waited for: the connection is closed after the answer, and its read
// deadline is moved to now so that net/http, which drains what is left of a
// body before it reuses or closes a connection, does not wait for it either.
func (a *API) reject(w http.ResponseWriter, r *http.Request, err error) {
	if hasBody(r) {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	a.writeError(w, r, err)
}

// statusWriter records the status for the request log. It unwraps so
// http.ResponseController reaches the connection (flush, write deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	start  time.Time // when the request came in
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logRequests logs one line per request. It logs the path without the query
// string, which may hold an access token.
func (a *API) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, start: time.Now()}
		next.ServeHTTP(sw, r)
		a.logRequest(r, sw)
	})
}

// logRequest is logRequests' line, in a function of its own: the
// middleware's frame stays below every stream's wait (see streamEvents).
//
//go:noinline
func (a *API) logRequest(r *http.Request, sw *statusWriter) {
	route := r.URL.Path
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		route = rc.RoutePattern()
	}
	status := sw.status
	if status == 0 {
		// Nothing written: net/http answered 200, or a stream took the
		// connection over after its 200 (see streamDetached).
		status = http.StatusOK
	}
	a.log.Info("request", "method", r.Method, "route", route, "path", r.URL.Path,
		"status", status, "duration", time.Since(sw.start))
}

func stack() string { return string(debug.Stack()) }
