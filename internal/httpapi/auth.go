package httpapi

// People, tokens and roles over HTTP (contract section 9). The decision of
// what a role may do is package auth's (auth.Check over actions); this file
// is its adapter: routeActions names the action of every route, and
// authorize, on the request path of every route but health and the spec,
// authenticates, limits the rate, checks the role and keeps the audit log.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// routeActions is the action each route takes, by "METHOD PATTERN" (the
// pattern as registered, parameters named, no trailing slash). A route
// missing here needs the owner role (auth.MinRole fails closed) and fails
// TestEveryRouteHasARole: a new route gets its line here.
var routeActions = map[string]auth.Action{
	"GET /v1/me":      auth.Me,
	"GET /v1/tokens":  auth.TokenList,
	"POST /v1/tokens": auth.TokenCreate,
	"GET /v1/audit":   auth.AuditRead,

	"POST /v1/signin-codes": auth.Me,

	"DELETE /v1/tokens/{tid}": auth.TokenRevoke,

	"GET /v1/workspaces":                          auth.Read,
	"POST /v1/workspaces":                         auth.WorkspaceOpen,
	"GET /v1/workspaces/{wid}":                    auth.Read,
	"DELETE /v1/workspaces/{wid}":                 auth.WorkspaceDelete,
	"POST /v1/workspaces/{wid}/forget":            auth.WorkspaceDelete,
	"GET /v1/workspaces/{wid}/events":             auth.Read,
	"GET /v1/workspaces/{wid}/permissions":        auth.Read,
	"GET /v1/workspaces/{wid}/mcp":                auth.Read,
	"POST /v1/workspaces/{wid}/permissions/{rid}": auth.PermissionAnswer,
	"POST /v1/workspaces/{wid}/tool-calls/{rid}":  auth.ToolAnswer,

	"POST /v1/workspaces/{wid}/sessions":                    auth.SessionCreate,
	"GET /v1/workspaces/{wid}/sessions":                     auth.Read,
	"GET /v1/workspaces/{wid}/sessions/last":                auth.Read,
	"GET /v1/workspaces/{wid}/sessions/{sid}":               auth.Read,
	"PATCH /v1/workspaces/{wid}/sessions/{sid}":             auth.SessionUpdate,
	"DELETE /v1/workspaces/{wid}/sessions/{sid}":            auth.SessionDelete,
	"GET /v1/workspaces/{wid}/sessions/{sid}/messages":      auth.Read,
	"GET /v1/workspaces/{wid}/sessions/{sid}/events":        auth.Read,
	"POST /v1/workspaces/{wid}/sessions/{sid}/log":          auth.SessionLog,
	"PUT /v1/workspaces/{wid}/sessions/{sid}/model":         auth.SessionUpdate,
	"POST /v1/workspaces/{wid}/sessions/{sid}/resume":       auth.SessionResume,
	"POST /v1/workspaces/{wid}/sessions/{sid}/compact":      auth.Compact,
	"GET /v1/workspaces/{wid}/sessions/{sid}/pending":       auth.Read,
	"POST /v1/workspaces/{wid}/agent":                       auth.Prompt,
	"POST /v1/workspaces/{wid}/agent/sessions/{sid}/cancel": auth.Cancel,
	"GET /v1/workspaces/{wid}/agent/sessions/{sid}":         auth.Read,

	"POST /v1/workspaces/{wid}/sessions/import":                      auth.SessionImport,
	"POST /v1/workspaces/{wid}/sessions/{sid}/fork":                  auth.SessionFork,
	"GET /v1/workspaces/{wid}/sessions/{sid}/export":                 auth.Read,
	"GET /v1/workspaces/{wid}/sessions/{sid}/checkpoints":            auth.Read,
	"GET /v1/workspaces/{wid}/sessions/{sid}/checkpoints/{cid}/diff": auth.Read,
	"POST /v1/workspaces/{wid}/sessions/{sid}/rewind":                auth.SessionRewind,
}

// publicRoutes need no token.
var publicRoutes = map[string]bool{
	"GET /v1/health":       true,
	"GET /v1/openapi.yaml": true,
	"POST /v1/signin":      true, // exchanges a one-time code; rate-limited per address
}

// routeKey is a route's key in routeActions.
func routeKey(method, pattern string) string {
	if len(pattern) > 1 {
		pattern = strings.TrimSuffix(pattern, "/")
	}
	return method + " " + pattern
}

// authRoutes registers the routes of section 9; they run under authorize.
func (a *API) authRoutes(r chi.Router) {
	r.Get("/v1/me", a.me)
	r.Get("/v1/tokens", a.listTokens)
	r.Post("/v1/tokens", a.createToken)
	r.Delete("/v1/tokens/{tid}", a.revokeToken)
	r.Get("/v1/audit", a.auditLog)
	r.Post("/v1/signin-codes", a.issueSigninCode)
}

// authorize is the middleware of every authenticated route (see admit).
func (a *API) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, w, done := a.admit(w, r)
		if r == nil {
			return
		}
		defer done()
		next.ServeHTTP(w, r)
	})
}

// admit authenticates r, takes it from its token's rate and checks its
// role, answering it itself when any fails (nil request). Admitted, the
// request carries its identity (auth.FromContext), and when its action is
// audited, w records the entry as the answer's status is written (so the
// entry is in the store before the client has the answer); done records it
// if the handler wrote nothing.
//
//go:noinline
func (a *API) admit(w http.ResponseWriter, r *http.Request) (*http.Request, http.ResponseWriter, func()) {
	m := a.routes.match(r.Method, r.URL.Path)
	secret, ok := auth.ParseBearer(r.Header.Get("Authorization"))
	if !ok && m.key == routeKey(http.MethodGet, "/v1/workspaces/{wid}/events") {
		q := r.URL.Query()
		secret, ok = q.Get("access_token"), q.Has("access_token")
	}
	if wait, spent := a.auth.Spent(secret); ok && spent {
		a.rateLimited(w, r, wait)
		return nil, nil, nil
	}
	var (
		id   auth.Identity
		name string
		err  error
	)
	if ok {
		id, name, err = a.auth.Authenticate(r.Context(), secret)
	} else {
		err = apierr.Errorf(proto.CodeUnauthorized, "missing or wrong bearer token")
	}
	if err != nil {
		if apierr.ErrorCode(err) == proto.CodeUnauthorized {
			a.deny(r, m, auth.Identity{Name: name}, err)
			a.reject(w, r, err)
		} else {
			a.writeError(w, r, err)
		}
		return nil, nil, nil
	}
	if ok, wait := a.auth.Allow(secret, id); !ok {
		a.rateLimited(w, r, wait)
		return nil, nil, nil
	}
	// The route's action is judged here, before the body is read; what the
	// body asks (a wider permission mode, MCP servers) is judged by the
	// domain (package guard) on the request it decoded, the one it applies.
	action, _ := m.action()
	if err := auth.Check(id.Role, action); err != nil {
		a.deny(r, m, id, err)
		a.reject(w, r, err)
		return nil, nil, nil
	}
	ctx := auth.WithIdentity(r.Context(), id)
	if !auth.Audited(action) {
		return r.WithContext(ctx), w, func() {}
	}
	n := &auditNote{a: a, r: r, entry: store.AuditEntry{TokenID: id.TokenID, Name: id.Name, Action: string(action),
		WorkspaceID: m.param("wid"), SessionID: m.param("sid")}}
	ctx = context.WithValue(ctx, auditKey{}, n)
	aw := &auditWriter{ResponseWriter: w, note: n}
	return r.WithContext(ctx), aw, func() { n.record(http.StatusOK) }
}

// denied records a 403 that the domain (package guard) answered to an
// admitted request: as the request's audit entry, which becomes an
// auth.denied one, or as an entry of its own for an action not audited.
func (a *API) denied(r *http.Request, err error) {
	id, ok := auth.FromContext(r.Context())
	if !ok {
		return // refused by admit, which recorded it
	}
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.entry.Action = string(auth.Denied)
		n.entry.Detail = apierr.ErrorMessage(err)
		return
	}
	a.deny(r, a.routes.match(r.Method, r.URL.Path), id, err)
}

// rateLimited answers 429 rate_limited with Retry-After.
func (a *API) rateLimited(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	a.reject(w, r, apierr.Errorf(proto.CodeRateLimited, "this token is over its rate of requests; retry in %s", wait.Round(time.Millisecond)))
}

// deny records a 401 or 403 in the audit log.
func (a *API) deny(r *http.Request, m routeMatch, id auth.Identity, err error) {
	a.auth.RecordDenied(r.Context(), store.AuditEntry{TokenID: id.TokenID, Name: id.Name,
		WorkspaceID: m.param("wid"), SessionID: m.param("sid"),
		Detail: fmt.Sprintf("%s %s: %s", r.Method, r.URL.Path, apierr.ErrorMessage(err))})
}

type auditKey struct{}

// auditNote is the audit entry of a request, which its handler completes
// (noteAudit) before it answers.
type auditNote struct {
	a     *API
	r     *http.Request
	entry store.AuditEntry
	done  bool
}

func (n *auditNote) record(status int) {
	if n.done {
		return
	}
	n.done = true
	detail := fmt.Sprintf("%s %s -> %d", n.r.Method, n.r.URL.Path, status)
	if n.entry.Detail != "" {
		detail += "; " + n.entry.Detail
	}
	n.entry.Detail = detail
	n.a.auth.Record(n.r.Context(), n.entry)
}

// noteAudit lets a handler complete its request's audit entry: the client
// and session it names in its body, the run it started, the action when its
// body makes it another (a steer), what to add to the detail (Detail).
func noteAudit(r *http.Request, f func(e *store.AuditEntry)) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		f(&n.entry)
	}
}

// auditWriter records the request's audit entry as its status is written.
type auditWriter struct {
	http.ResponseWriter
	note *auditNote
}

func (w *auditWriter) WriteHeader(code int) {
	w.note.record(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	w.note.record(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (a *API) me(w http.ResponseWriter, r *http.Request) {
	id, _ := auth.FromContext(r.Context())
	me := a.auth.Me(id)
	me.WorkspaceRoots = []string{}
	if a.cfg.WorkspaceRoots != nil {
		me.WorkspaceRoots = append(me.WorkspaceRoots, a.cfg.WorkspaceRoots()...)
	}
	writeJSON(w, http.StatusOK, me)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	list, err := a.auth.List(r.Context())
	a.Respond(w, r, http.StatusOK, proto.TokenList{Tokens: list}, err)
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	var req proto.CreateTokenRequest
	if !a.Decode(w, r, &req) {
		return
	}
	created, err := a.auth.Create(r.Context(), req)
	noteAudit(r, func(e *store.AuditEntry) { e.Detail = fmt.Sprintf("name %q, role %s", req.Name, req.Role) })
	if err == nil {
		// The answer is the only place the secret ever goes: not cached.
		w.Header().Set("Cache-Control", "no-store")
	}
	a.Respond(w, r, http.StatusCreated, created, err)
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	t, err := a.auth.Revoke(r.Context(), chi.URLParam(r, "tid"))
	if err == nil {
		noteAudit(r, func(e *store.AuditEntry) { e.Detail = fmt.Sprintf("name %q", t.Name) })
	}
	a.Respond(w, r, http.StatusNoContent, nil, err)
}

func (a *API) auditLog(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageQuery(r)
	if err == nil && (r.URL.Query().Has("limit") && limit == 0 || limit > auth.MaxAuditPage) {
		err = apierr.Invalid("limit must be between 1 and %d, got %d", auth.MaxAuditPage, limit)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	list, err := a.auth.Audit(r.Context(), after, int(limit))
	a.Respond(w, r, http.StatusOK, proto.AuditLog{Entries: list}, err)
}

// routeMatch is the route a request path matched, with its parameters.
type routeMatch struct {
	key    string
	params map[string]string
}

func (m routeMatch) param(name string) string { return m.params[name] }

// action is the route's action; a route with none needs the owner role.
func (m routeMatch) action() (auth.Action, bool) {
	act, ok := routeActions[m.key]
	if !ok {
		return auth.Action("route " + m.key), false
	}
	return act, true
}

// match finds the route of a request: among the routes of its method whose
// segments match, the one with the most literal segments (sessions/last
// over sessions/{sid}).
func (t *routeTable) match(method, path string) routeMatch {
	segs := splitPath(path)
	best, bestLit := -1, -1
	for i, rt := range t.routes {
		if rt.method != method || len(rt.segments) != len(segs) {
			continue
		}
		lit := 0
		ok := true
		for j, s := range rt.segments {
			if s == "{}" {
				continue
			}
			if s != segs[j] {
				ok = false
				break
			}
			lit++
		}
		if ok && lit > bestLit {
			best, bestLit = i, lit
		}
	}
	if best < 0 {
		return routeMatch{}
	}
	rt := t.routes[best]
	m := routeMatch{key: rt.key}
	for j, name := range rt.names {
		if name != "" {
			if m.params == nil {
				m.params = map[string]string{}
			}
			m.params[name] = segs[j]
		}
	}
	return m
}

// RouteAction returns the action of a route as chi registers it (METHOD,
// pattern), for the transports and tools that list what each role may do;
// ok is false for a route without one, which needs the owner role, and
// public is true for the routes that need no token.
func RouteAction(method, pattern string) (act auth.Action, ok, public bool) {
	key := routeKey(method, pattern)
	if publicRoutes[key] {
		return "", true, true
	}
	act, ok = routeActions[key]
	return act, ok, false
}
