package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/proto"
)

// servedRoutes walks the API's router: every route it serves, by routeKey.
func servedRoutes(t testing.TB) []string {
	t.Helper()
	h := New(Config{Token: "owner-secret"}).Handler()
	var keys []string
	require.NoError(t, chi.Walk(h.(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		keys = append(keys, routeKey(method, pattern))
		return nil
	}))
	require.NotEmpty(t, keys)
	return keys
}

// Every route the server serves has a role: a new route without a line in
// routeActions fails here (and, until it has one, needs the owner role).
// Every line of routeActions is a served route, and every action it names is
// in auth's policy table.
func TestEveryRouteHasARole(t *testing.T) {
	served := map[string]bool{}
	for _, key := range servedRoutes(t) {
		served[key] = true
		if publicRoutes[key] {
			continue
		}
		act, ok := routeActions[key]
		if !assert.True(t, ok, "route %s has no role: add it to routeActions (internal/httpapi/auth.go)", key) {
			continue
		}
		assert.True(t, auth.Known(act), "route %s: action %q is not in auth's policy table", key, act)
	}
	for key := range routeActions {
		assert.True(t, served[key], "routeActions names %s, which the server does not serve", key)
	}
	for key := range publicRoutes {
		assert.True(t, served[key], "publicRoutes names %s, which the server does not serve", key)
	}
}

// A route the role table does not know is the owner's only (fail closed),
// and the refusal says which route it is.
func TestRouteWithoutRoleNeedsOwner(t *testing.T) {
	m := routeMatch{key: "POST /v1/new/thing"}
	act, known := m.action()
	require.False(t, known)
	require.NoError(t, auth.Check(auth.Owner, act))
	err := auth.Check(auth.Member, act)
	require.Error(t, err)
	assert.Contains(t, err.Error(), proto.CodeForbidden)
}

// The route table finds the literal route over a parameter (sessions/last
// is not session "last") and names the parameters.
func TestRouteMatch(t *testing.T) {
	a := New(Config{Token: "x"})
	a.Handler()
	m := a.routes.match("GET", "/v1/workspaces/w1/sessions/last")
	assert.Equal(t, "GET /v1/workspaces/{wid}/sessions/last", m.key)
	assert.Equal(t, "w1", m.param("wid"))
	m = a.routes.match("GET", "/v1/workspaces/w1/sessions/s1")
	assert.Equal(t, "GET /v1/workspaces/{wid}/sessions/{sid}", m.key)
	assert.Equal(t, "s1", m.param("sid"))
	m = a.routes.match("POST", "/v1/workspaces/w1/agent/")
	assert.Equal(t, "POST /v1/workspaces/{wid}/agent", m.key)
	assert.Empty(t, a.routes.match("GET", "/v1/nothing").key)
}

// Whatever a client sends as its Authorization header, the API answers 401
// (or 200 for the owner's exact token), never a 5xx, never a panic, and the
// header's content never shows in the answer.
func FuzzAuthorizationHeader(f *testing.F) {
	h := New(Config{Token: "owner-secret"}).Handler()
	for _, seed := range []string{"Bearer owner-secret", "bearer owner-secret", "Bearer  owner-secret", "Bearer", "Bearer ", "Basic b3duZXI=",
		"Bearer tdm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "Bearer owner-secret\x00", "Bearer " + strings.Repeat("a", 600), "Bearer ówner"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/v1/me", nil)
		r.Header["Authorization"] = []string{header}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
			tok, ok := auth.ParseBearer(header)
			require.True(t, ok && tok == "owner-secret", "header %q let in", header)
		case http.StatusUnauthorized:
			if len(header) > 8 && !strings.Contains("missing or wrong bearer token", header) {
				require.NotContains(t, w.Body.String(), header)
			}
		default:
			t.Fatalf("header %q: answered %d %s", header, w.Code, w.Body)
		}
	})
}

// Each route's role is the contract's (section 9), written here apart from
// routeActions and auth's policy table, so that a wrong line in either
// fails: viewers read (every GET but tokens and audit); owners delete,
// manage tokens and read the audit log; members do the rest (open, create,
// update, prompt, steer, cancel, compact, resume, log, switch models,
// answer, fork, import, rewind).
func TestRouteRolesAreTheContracts(t *testing.T) {
	ownerOnly := map[string]bool{"GET /v1/tokens": true, "POST /v1/tokens": true, "GET /v1/audit": true,
		// Forgetting deletes the workspace from the store (section 9: the
		// owner deletes workspaces).
		"POST /v1/workspaces/{wid}/forget": true}
	for _, key := range servedRoutes(t) {
		if publicRoutes[key] {
			continue
		}
		method, _, _ := strings.Cut(key, " ")
		want := auth.Member
		switch {
		case ownerOnly[key] || method == http.MethodDelete:
			want = auth.Owner
		case method == http.MethodGet, key == "POST /v1/signin-codes":
			// A sign-in code hands a browser the token its asker has.
			want = auth.Viewer
		}
		act, ok := routeActions[key]
		require.True(t, ok, key)
		got, _ := auth.MinRole(act)
		assert.Equal(t, want.String(), got.String(), "route %s (action %s)", key, act)
	}
}
