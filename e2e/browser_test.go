package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

const listedOrigin = "http://app.example:5173"

func withAllowedOrigins(origins ...string) option {
	return func(c *serverConfig) { c.AllowedOrigins = origins }
}

func withApp(h http.Handler) option { return func(c *serverConfig) { c.App = h } }

// browserReq is one request as a browser would send it: headers, the Host
// it names, an optional token. It goes through the env's validating client
// unless plain is set (preflights are no operation of the spec).
type browserReq struct {
	method, path, body string
	host               string
	headers            map[string]string
	token              bool
	plain              bool
}

func (e *env) browser(b browserReq) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if b.body != "" {
		rd = strings.NewReader(b.body)
	}
	req, err := http.NewRequest(b.method, e.ts.URL+b.path, rd)
	require.NoError(e.t, err)
	if b.host != "" {
		req.Host = b.host
	}
	for k, v := range b.headers {
		req.Header.Set(k, v)
	}
	if b.token {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	c := e.client
	if b.plain {
		c = &http.Client{}
	}
	resp, err := c.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp, raw
}

func errorCode(t *testing.T, raw []byte) string {
	t.Helper()
	var eb proto.ErrorBody
	require.NoError(t, json.Unmarshal(raw, &eb), "%s", raw)
	return eb.Error.Code
}

func TestRequestsFromOtherOriginsAreForbidden(t *testing.T) {
	e := startEnv(t, withAllowedOrigins(listedOrigin))
	origin := func(o string) map[string]string { return map[string]string{"Origin": o} }

	for _, o := range []string{"http://evil.example", "null", "http://app.example:5174", "https://app.example:5173", "not an origin"} {
		for _, r := range []browserReq{
			{method: "GET", path: "/v1/health"},
			{method: "GET", path: "/v1/openapi.yaml"},
			{method: "GET", path: "/v1/workspaces", token: true},
			{method: "POST", path: "/v1/workspaces", token: true, body: `{"path": "` + e.workDir + `"}`},
		} {
			r.headers = origin(o)
			resp, raw := e.browser(r)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s %s from %s", r.method, r.path, o)
			assert.Equal(t, proto.CodeForbiddenOrigin, errorCode(t, raw))
			assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	var list proto.WorkspaceList
	e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &list)
	assert.Empty(t, list.Workspaces, "a refused request changed nothing")

	// A listed origin is served, and told so; the comparison ignores case
	// and default ports, the answer repeats the origin as sent.
	for _, o := range []string{listedOrigin, "HTTP://App.Example:5173"} {
		resp, raw := e.browser(browserReq{method: "POST", path: "/v1/workspaces", token: true, body: `{"path": "` + e.workDir + `"}`, headers: origin(o)})
		assert.Contains(t, []int{http.StatusOK, http.StatusCreated}, resp.StatusCode, "%s", raw)
		assert.Equal(t, o, resp.Header.Get("Access-Control-Allow-Origin"))
		assert.Contains(t, resp.Header.Values("Vary"), "Origin")
	}
	// The server's own origin needs no listing and gets no CORS headers.
	resp, raw := e.browser(browserReq{method: "GET", path: "/v1/workspaces", token: true, headers: origin(e.ts.URL)})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	// A listed origin still needs the token.
	resp, raw = e.browser(browserReq{method: "GET", path: "/v1/workspaces", headers: origin(listedOrigin)})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", raw)
}

func TestPreflightsOfListedOrigins(t *testing.T) {
	e := startEnv(t, withAllowedOrigins(listedOrigin, "https://other.example"))
	ws := e.createWorkspace()
	preflight := func(path, origin, method string) *http.Response {
		resp, _ := e.browser(browserReq{method: "OPTIONS", path: path, plain: true, headers: map[string]string{
			"Origin":                         origin,
			"Access-Control-Request-Method":  method,
			"Access-Control-Request-Headers": "authorization, content-type",
		}})
		return resp
	}
	for path, methods := range map[string]string{
		"/v1/workspaces":                      "GET, POST",
		"/v1/workspaces/" + ws.ID:             "GET, DELETE",
		"/v1/workspaces/" + ws.ID + "/events": "GET",
		"/v1/workspaces/" + ws.ID + "/agent":  "POST",
		"/v1/health":                          "GET",
		"/v1/workspaces/" + ws.ID + "/sessions/" + newClientID() + "/model": "PUT",
	} {
		resp := preflight(path, listedOrigin, "GET")
		require.Equal(t, http.StatusNoContent, resp.StatusCode, path)
		h := resp.Header
		assert.Equal(t, listedOrigin, h.Get("Access-Control-Allow-Origin"), path)
		assert.Equal(t, "Authorization, Content-Type, Last-Event-ID", h.Get("Access-Control-Allow-Headers"), path)
		assert.Equal(t, methods, h.Get("Access-Control-Allow-Methods"), path)
		assert.Contains(t, h.Values("Vary"), "Origin", path)
		assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"), path)
	}
	resp := preflight("/v1/workspaces", "https://other.example", "POST")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "https://other.example", resp.Header.Get("Access-Control-Allow-Origin"), "never *")

	resp = preflight("/v1/workspaces", "http://evil.example", "POST")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Methods"))

	resp = preflight("/v1/nowhere", listedOrigin, "GET")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// DNS rebinding: a page of evil.example whose name now resolves to
// 127.0.0.1 is same-origin with itself, but its requests name its host.
func TestNonLoopbackHostsAreForbiddenOnLoopback(t *testing.T) {
	e := startEnv(t)
	port := e.ts.Listener.Addr().String()[strings.LastIndex(e.ts.Listener.Addr().String(), ":"):]
	for _, host := range []string{"evil.example" + port, "evil.example", "192.168.1.10" + port, "localhost.evil.example" + port} {
		resp, raw := e.browser(browserReq{method: "GET", path: "/v1/health", host: host})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, host)
		assert.Equal(t, proto.CodeForbiddenHost, errorCode(t, raw), host)
		resp, raw = e.browser(browserReq{method: "GET", path: "/v1/workspaces", host: host, token: true,
			headers: map[string]string{"Origin": "http://" + host}})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, host)
		assert.Equal(t, proto.CodeForbiddenHost, errorCode(t, raw), host)
	}
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "app.localhost" + port, "LOCALHOST" + port, "127.0.0.2" + port} {
		resp, raw := e.browser(browserReq{method: "GET", path: "/v1/health", host: host})
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", host, raw)
	}
}

func TestEveryResponseSaysNosniff(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	for _, r := range []browserReq{
		{method: "GET", path: "/v1/health"},
		{method: "GET", path: "/v1/openapi.yaml"},
		{method: "GET", path: "/v1/workspaces"},
		{method: "GET", path: "/v1/workspaces", token: true},
		{method: "GET", path: "/v1/workspaces/" + newClientID(), token: true},
		{method: "POST", path: "/v1/workspaces", token: true, body: "{"},
		{method: "GET", path: "/v1/nowhere", token: true},
		{method: "PATCH", path: "/v1/workspaces", token: true},
		{method: "GET", path: "/"},
		{method: "GET", path: "/v1/workspaces/" + ws.ID + "/events", token: true},
	} {
		resp, _ := e.browser(r)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), "%s %s (%d)", r.method, r.path, resp.StatusCode)
	}
	resp, raw := e.browser(browserReq{method: "GET", path: "/v1/openapi.yaml"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the spec needs no token: %s", raw)
	resp, raw = e.browser(browserReq{method: "GET", path: "/v1/health"})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "health needs no token: %s", raw)
}

func TestAppIsServedOutsideV1WithoutAToken(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "app "+r.Method+" "+r.URL.Path)
	})
	e := startEnv(t, withApp(app), withAllowedOrigins(listedOrigin))
	for _, path := range []string{"/", "/index.html", "/assets/app.js"} {
		resp, raw := e.browser(browserReq{method: "GET", path: path})
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, "app GET "+path, string(raw))
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	}
	resp, _ := e.browser(browserReq{method: "HEAD", path: "/"})
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, raw := e.browser(browserReq{method: "POST", path: "/", body: "{}"})
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, proto.CodeMethodNotAllowed, errorCode(t, raw))
	// /v1 stays the API's: an unknown route there is the API's 404.
	resp, raw = e.browser(browserReq{method: "GET", path: "/v1/nowhere", token: true})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, proto.CodeNotFound, errorCode(t, raw))
	// The same origin and host rules.
	resp, raw = e.browser(browserReq{method: "GET", path: "/", headers: map[string]string{"Origin": "http://evil.example"}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, proto.CodeForbiddenOrigin, errorCode(t, raw))
	resp, raw = e.browser(browserReq{method: "GET", path: "/", host: "evil.example"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, proto.CodeForbiddenHost, errorCode(t, raw))
	resp, _ = e.browser(browserReq{method: "OPTIONS", path: "/assets/app.js", plain: true, headers: map[string]string{
		"Origin": listedOrigin, "Access-Control-Request-Method": "GET"}})
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Access-Control-Allow-Methods"))
}
