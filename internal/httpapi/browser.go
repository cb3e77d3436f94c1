package httpapi

// Browser safety (contract section 2). A page on any site can make a
// browser send requests to a server on localhost; the token keeps it from
// reading or changing anything, but not from trying, and DNS rebinding can
// make such a page look same-origin. So: a request that carries an Origin
// is served only for the server's own origin or a listed one, a request
// that reached a loopback listener must name a loopback host, and no
// response can be sniffed into something executable.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/proto"
)

// corsHeaders are the request headers a listed origin may send.
const corsHeaders = "Authorization, Content-Type, Last-Event-ID"

// corsMaxAge lets a browser keep a preflight's answer for 10 minutes.
const corsMaxAge = "600"

// preflightMethods are the methods a preflight may be answered with.
var preflightMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// CheckOrigin validates an origin for --allowed-origins and returns it in
// the form requests are compared in: scheme://host[:port], lower case,
// without the scheme's default port.
func CheckOrigin(origin string) (string, error) {
	o, ok := normalizeOrigin(origin)
	if !ok {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https and nothing after the port (\"*\" and \"null\" are never allowed)", origin)
	}
	return o, nil
}

// normalizeOrigin returns origin in its comparable form, or false when it is
// not an http(s) origin.
func normalizeOrigin(origin string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", false
	}
	if u.Path != "" && u.Path != "/" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", false
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), true
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, true
}

type listenAddrKey struct{}

// BaseContext is the API's http.Server.BaseContext: it tells the host check
// the address the server listens on.
func BaseContext(ln net.Listener) context.Context {
	return context.WithValue(context.Background(), listenAddrKey{}, ln.Addr())
}

// onLoopback reports whether the server that got r listens on a loopback
// address. Without BaseContext (a test server) the connection's own local
// address stands in for it.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(listenAddrKey{}).(net.Addr)
	if !ok {
		addr, ok = r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	}
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// loopbackHost reports whether a Host header names this machine's loopback:
// localhost (and its subdomains, which browsers resolve to loopback
// themselves) or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isAPIPath reports whether path belongs to the /v1 API rather than the app.
func isAPIPath(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/")
}

// routeTable lists the API's routes by method, to tell a preflight which
// methods a path serves. (chi's Mux.Match says yes to any method on the
// exact path of a mounted subrouter, so it cannot be asked.)
type routeTable struct {
	routes []route
}

type route struct {
	method   string
	segments []string // "{}" matches any one segment
	key      string   // routeKey of the route
	names    []string // the parameters' names by segment, "" for literals
}

// fill reads the routes of r; it runs once the routes are registered.
func (t *routeTable) fill(r chi.Routes) error {
	return chi.Walk(r, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		var segs, names []string
		for _, seg := range splitPath(pattern) {
			name := ""
			if strings.HasPrefix(seg, "{") {
				name, seg = strings.Trim(seg, "{}"), "{}"
			}
			segs, names = append(segs, seg), append(names, name)
		}
		t.routes = append(t.routes, route{method: method, segments: segs, key: routeKey(method, pattern), names: names})
		return nil
	})
}

// methods returns the methods path is served with, in preflightMethods order.
func (t *routeTable) methods(path string) []string {
	segs := splitPath(path)
	found := map[string]bool{}
	for _, rt := range t.routes {
		if len(rt.segments) != len(segs) {
			continue
		}
		match := true
		for i, s := range rt.segments {
			if s != "{}" && s != segs[i] {
				match = false
				break
			}
		}
		if match {
			found[rt.method] = true
		}
	}
	var out []string
	for _, m := range preflightMethods {
		if found[m] {
			out = append(out, m)
		}
	}
	return out
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// guard applies the browser rules to every request before it is routed,
// and answers CORS preflights. routes tells a preflight the methods of a
// path.
func (a *API) guard(routes *routeTable) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.screen(routes, w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// screen applies guard's checks and answers the request itself (a refusal
// or a preflight) unless it reports that the request goes on. It is a
// function of its own so that guard's frame, which stays below every
// stream's wait, is small (see streamEvents).
//
//go:noinline
func (a *API) screen(routes *routeTable, w http.ResponseWriter, r *http.Request) (next bool) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	// Empty only in HTTP/1.0, which no browser speaks.
	if r.Host != "" && onLoopback(r) && !loopbackHost(r.Host) {
		a.reject(w, r, apierr.Errorf(proto.CodeForbiddenHost,
			"host %q is not a loopback name: this server listens on loopback only", r.Host))
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	h.Add("Vary", "Origin")
	listed, ok := a.originAllowed(r, origin)
	if !ok {
		a.reject(w, r, apierr.Errorf(proto.CodeForbiddenOrigin,
			"origin %q is not allowed: it is not this server's and not in --allowed-origins", origin))
		return false
	}
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if listed || preflight {
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if preflight {
		a.preflight(routes, w, r)
		return false
	}
	return true
}

// originAllowed reports whether a request's Origin may be served: the
// server's own (ok) or one listed in AllowedOrigins (listed and ok).
func (a *API) originAllowed(r *http.Request, origin string) (listed, ok bool) {
	o, valid := normalizeOrigin(origin)
	if !valid {
		return false, false
	}
	if _, found := a.origins[o]; found {
		return true, true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own, valid := normalizeOrigin(scheme + "://" + r.Host)
	return false, valid && o == own
}

// preflight answers a CORS preflight with the methods the path serves.
func (a *API) preflight(routes *routeTable, w http.ResponseWriter, r *http.Request) {
	var methods []string
	if !isAPIPath(r.URL.Path) && a.cfg.App != nil {
		methods = []string{http.MethodGet, http.MethodHead}
	} else {
		methods = routes.methods(r.URL.Path)
	}
	if len(methods) == 0 {
		a.reject(w, r, apierr.Errorf(proto.CodeNotFound, "no route %s", r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	if hasBody(r) {
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveApp serves the web app for GET and HEAD outside /v1; everything else
// that no route takes is a 404 (405 for the app's paths).
func (a *API) serveApp(w http.ResponseWriter, r *http.Request) {
	if a.cfg.App == nil || isAPIPath(r.URL.Path) {
		a.reject(w, r, apierr.Errorf(proto.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		a.reject(w, r, apierr.Errorf(proto.CodeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	a.cfg.App.ServeHTTP(w, r)
}
