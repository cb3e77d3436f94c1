package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/httpapi"
	"github.com/tandem-dev/tandem/proto"
)

// as sends a request with a person's secret.
func (e *env) as(secret, method, path string, body any, out any) (int, []byte) {
	e.t.Helper()
	return e.doRaw(method, path, body, out, map[string]string{"Authorization": "Bearer " + secret})
}

// refusedAs sends a request the server should refuse 401, with a client
// that does not check the answer against the spec (which cannot know the
// token was revoked).
func (e *env) refusedAs(secret, method, path string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, raw
}

// person creates a token and returns its secret.
func (e *env) person(name, role string) (proto.Token, string) {
	e.t.Helper()
	var created proto.TokenCreated
	status, body := e.do("POST", "/v1/tokens", proto.CreateTokenRequest{Name: name, Role: role}, &created)
	require.Equal(e.t, http.StatusCreated, status, "create token %s: %s", name, body)
	require.NotEmpty(e.t, created.Secret)
	return created.Token, created.Secret
}

func bearer(secret string) streamOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+secret) }
}

// A token's life: created with its secret shown once, listed without it,
// /v1/me names its person, a taken name is a 409, the owner token cannot be
// revoked, and a revoked token's next request is a 401.
func TestTokenLifecycle(t *testing.T) {
	e := startEnv(t)
	var me proto.Me
	e.must(http.StatusOK, "GET", "/v1/me", nil, &me)
	assert.Equal(t, proto.Me{TokenID: auth.OwnerTokenID, Name: "owner", Role: "owner", WorkspaceRoots: []string{}}, me)

	alice, secret := e.person("alice", "member")
	assert.Equal(t, "member", alice.Role)
	status, _ := e.as(secret, "GET", "/v1/me", nil, &me)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, proto.Me{TokenID: alice.ID, Name: "alice", Role: "member", WorkspaceRoots: []string{}}, me)

	var list proto.TokenList
	_, raw := e.do("GET", "/v1/tokens", nil, &list)
	assert.NotContains(t, string(raw), secret)
	require.Len(t, list.Tokens, 2)
	assert.Equal(t, "owner", list.Tokens[0].Name)
	assert.Equal(t, "alice", list.Tokens[1].Name)
	require.NotNil(t, list.Tokens[1].LastUsedAt, "alice's use is recorded")

	status, body := e.do("POST", "/v1/tokens", proto.CreateTokenRequest{Name: "alice", Role: "viewer"}, nil)
	assert.Equal(t, http.StatusConflict, status)
	assert.Equal(t, proto.CodeAlreadyExists, errorCode(t, body))
	status, body = e.do("POST", "/v1/tokens", proto.CreateTokenRequest{Name: "owner", Role: "viewer"}, nil)
	assert.Equal(t, http.StatusConflict, status, "%s", body)
	for _, bad := range []proto.CreateTokenRequest{{Name: "a b", Role: "viewer"}, {Name: "x", Role: "admin"}, {Name: "y", ExpiresIn: "soon"}, {Name: strings.Repeat("z", 65)}} {
		status, body = e.do("POST", "/v1/tokens", bad, nil)
		assert.Equal(t, http.StatusBadRequest, status, "%+v: %s", bad, body)
	}

	status, body = e.do("DELETE", "/v1/tokens/"+auth.OwnerTokenID, nil, nil)
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, proto.CodeForbidden, errorCode(t, body))
	status, _ = e.as(secret, "DELETE", "/v1/tokens/"+alice.ID, nil, nil)
	assert.Equal(t, http.StatusForbidden, status, "a member cannot revoke tokens, not even its own")

	e.must(http.StatusNoContent, "DELETE", "/v1/tokens/"+alice.ID, nil, nil)
	status, body = e.refusedAs(secret, "GET", "/v1/me")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, proto.CodeUnauthorized, errorCode(t, body))
	_, _ = e.do("GET", "/v1/tokens", nil, &list)
	assert.Len(t, list.Tokens, 1, "a revoked token is not listed")
	status, _ = e.do("DELETE", "/v1/tokens/"+alice.ID, nil, nil)
	assert.Equal(t, http.StatusNotFound, status)
	// The name is free again.
	e.person("alice", "viewer")

	// Tokens live in the store: they survive a restart, revocations too.
	bob, bobSecret := e.person("bob", "viewer")
	e.restart()
	status, _ = e.as(bobSecret, "GET", "/v1/me", nil, &me)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, bob.ID, me.TokenID)
	status, _ = e.refusedAs(secret, "GET", "/v1/me")
	assert.Equal(t, http.StatusUnauthorized, status)
}

// Revoking a token ends its open streams within 2 s and leaves the others';
// a token that expires does the same by itself.
func TestRevocationAndExpiryEndStreams(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	_, secret := e.person("carol", "viewer")
	carol := e.openStream(ws.ID, newClientID(), "", bearer(secret))
	carol.until(proto.EventStreamOpened)
	other := e.openStream(ws.ID, newClientID(), "")
	other.until(proto.EventStreamOpened)

	var list proto.TokenList
	e.must(http.StatusOK, "GET", "/v1/tokens", nil, &list)
	start := time.Now()
	e.must(http.StatusNoContent, "DELETE", "/v1/tokens/carol", nil, nil)
	carol.ended()
	assert.Less(t, time.Since(start), 2*time.Second)
	status, _ := e.refusedAs(secret, "GET", "/v1/workspaces")
	assert.Equal(t, http.StatusUnauthorized, status)
	status, _ = e.refusedAs(secret, "GET", "/v1/workspaces/"+ws.ID+"/events?client_id="+newClientID())
	assert.Equal(t, http.StatusUnauthorized, status)

	// The owner's stream is still there.
	e.log(ws.ID, e.createSession(ws.ID, nil).ID, "still here", true)
	other.until(proto.EventSessionLog)

	var created proto.TokenCreated
	e.must(http.StatusCreated, "POST", "/v1/tokens", proto.CreateTokenRequest{Name: "dave", Role: "viewer", ExpiresIn: "1500ms"}, &created)
	require.NotNil(t, created.Token.ExpiresAt)
	dave := e.openStream(ws.ID, newClientID(), "&access_token="+created.Secret, func(r *http.Request) { r.Header.Del("Authorization") })
	dave.until(proto.EventStreamOpened)
	dave.ended()
	assert.Less(t, time.Since(created.Token.ExpiresAt.Time), 2*time.Second, "the stream ended within 2 s of the expiry")
	status, body := e.refusedAs(created.Secret, "GET", "/v1/me")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Contains(t, string(body), "expired")
}

// matrixCall is one request of the roles matrix.
type matrixCall struct {
	key     string // routeKey
	min     auth.Role
	method  string
	path    string
	body    any
	streams bool
}

// The roles matrix, generated from the server's own route table: every
// route x every role. A role below the route's is refused 403 forbidden,
// naming the role, and nothing changes; a role at or above it is never
// refused for its role. A route without a role fails here.
func TestRolesMatrix(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	secrets := map[auth.Role]string{auth.Owner: testToken}
	_, secrets[auth.Viewer] = e.person("vera", "viewer")
	_, secrets[auth.Member] = e.person("max", "member")
	clientID := newClientID()

	var calls []matrixCall
	require.NoError(t, chi.Walk(e.srv.Handler().(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		act, ok, public := httpapi.RouteAction(method, pattern)
		if public {
			return nil
		}
		if !assert.True(t, ok, "route %s %s has no role (internal/httpapi/auth.go routeActions)", method, pattern) {
			return nil
		}
		min, _ := auth.MinRole(act)
		calls = append(calls, matrixCall{key: method + " " + pattern, min: min, method: method, path: pattern, streams: strings.HasSuffix(pattern, "/events") && strings.Count(pattern, "/") == 4})
		return nil
	}))
	require.GreaterOrEqual(t, len(calls), 30)

	fresh := func(c matrixCall) (string, any) {
		wid, sid := ws.ID, sess.ID
		switch {
		case c.method == "DELETE" && strings.Contains(c.path, "{sid}"):
			sid = e.createSession(ws.ID, nil).ID
		case c.method == "DELETE" && strings.Contains(c.path, "{wid}"), strings.HasSuffix(c.path, "/forget"):
			other := t.TempDir()
			var w proto.Workspace
			e.must(http.StatusCreated, "POST", "/v1/workspaces", proto.CreateWorkspaceRequest{Path: other}, &w)
			wid = w.ID
		}
		tid := uuid.NewString()
		if strings.Contains(c.path, "{tid}") {
			tok, _ := e.person("t"+strconv.Itoa(len(tid)+int(time.Now().UnixNano()%100000)), "viewer")
			tid = tok.ID
		}
		path := strings.NewReplacer("{wid}", wid, "{sid}", sid, "{rid}", uuid.NewString(), "{tid}", tid).Replace(strings.TrimSuffix(c.path, "/"))
		var body any
		switch c.key {
		case "POST /v1/workspaces/":
			body = proto.CreateWorkspaceRequest{Path: e.workDir}
		case "POST /v1/tokens":
			body = proto.CreateTokenRequest{Name: "n" + uuid.NewString()[:8], Role: "viewer"}
		case "POST /v1/workspaces/{wid}/permissions/{rid}":
			body = map[string]any{"client_id": clientID, "decision": "reject"}
		case "POST /v1/workspaces/{wid}/tool-calls/{rid}":
			body = map[string]any{"client_id": clientID, "result": "x"}
		case "PATCH /v1/workspaces/{wid}/sessions/{sid}/":
			body = map[string]any{"title": "renamed"}
		case "POST /v1/workspaces/{wid}/sessions/{sid}/log":
			body = map[string]any{"level": "info", "message": "m", "ephemeral": true}
		case "PUT /v1/workspaces/{wid}/sessions/{sid}/model":
			body = map[string]any{"model": "echo"}
		case "POST /v1/workspaces/{wid}/sessions/{sid}/resume":
			body = map[string]any{"client_id": clientID}
		case "POST /v1/workspaces/{wid}/agent/":
			body = map[string]any{"session_id": sess.ID, "prompt": "hi", "client_id": clientID}
		}
		if body == nil && c.method != "GET" {
			body = map[string]any{}
		}
		return path, body
	}
	state := func() string {
		var b strings.Builder
		var list proto.SessionList
		e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
		for _, s := range list.Sessions {
			fmt.Fprintf(&b, "%s %s %s %d;", s.ID, s.Title, s.Model, s.MessageCount)
		}
		var toks proto.TokenList
		e.must(http.StatusOK, "GET", "/v1/tokens", nil, &toks)
		for _, tk := range toks.Tokens {
			fmt.Fprintf(&b, "%s %s;", tk.ID, tk.Name)
		}
		var wl proto.WorkspaceList
		e.must(http.StatusOK, "GET", "/v1/workspaces", nil, &wl)
		for _, w := range wl.Workspaces {
			fmt.Fprintf(&b, "%s %v;", w.ID, w.Open)
		}
		return b.String()
	}

	for _, c := range calls {
		for _, role := range []auth.Role{auth.Viewer, auth.Member, auth.Owner} {
			path, body := fresh(c)
			if c.streams {
				s, status, errBody := e.tryStream(ws.ID, newClientID(), "", bearer(secrets[role]))
				if role >= c.min {
					assert.Equal(t, http.StatusOK, status, "%s as %s: %s", c.key, role, errBody)
					s.close()
				} else {
					assert.Equal(t, http.StatusForbidden, status, "%s as %s", c.key, role)
				}
				continue
			}
			before := ""
			if role < c.min {
				before = state()
			}
			status, raw := e.as(secrets[role], c.method, path, body, nil)
			if role >= c.min {
				assert.NotEqual(t, http.StatusForbidden, status, "%s as %s refused: %s", c.key, role, raw)
				assert.NotEqual(t, http.StatusUnauthorized, status, "%s as %s: %s", c.key, role, raw)
				continue
			}
			require.Equal(t, http.StatusForbidden, status, "%s as %s: %s", c.key, role, raw)
			assert.Equal(t, proto.CodeForbidden, errorCode(t, raw))
			assert.Contains(t, string(raw), "role "+role.String()+" may not")
			assert.Equal(t, before, state(), "%s as %s changed something", c.key, role)
		}
	}
}

// What widens what the agent may do without asking is the owner's: a
// member may create and update sessions, but not allow_all, MCP servers,
// or the tools of an allow_all session.
func TestOwnerOnlyWidening(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	_, member := e.person("mia", "member")
	base := "/v1/workspaces/" + ws.ID + "/sessions"
	mcp := map[string]any{"srv": map[string]any{"type": "stdio", "command": "true"}}
	tools := []map[string]any{{"name": "t1", "description": "d", "parameters": map[string]any{"type": "object"}}}

	refused := func(method, path string, body any) {
		t.Helper()
		status, raw := e.as(member, method, path, body, nil)
		require.Equal(t, http.StatusForbidden, status, "%s %s %v: %s", method, path, body, raw)
		assert.Contains(t, string(raw), "role member may not")
	}
	refused("POST", base, map[string]any{"permission_mode": "allow_all"})
	refused("POST", base, map[string]any{"mcp_servers": mcp})
	// A body the role check cannot read is one the handler refuses too: a
	// stray closing bracket after the object is no way around the check.
	for _, tail := range []string{"}", "]"} {
		status, raw := e.as(member, "POST", base, `{"permission_mode":"allow_all"}`+tail, nil)
		require.Equal(t, http.StatusBadRequest, status, "%s", raw)
		assert.Contains(t, string(raw), "invalid_json")
	}
	var s proto.Session
	status, raw := e.as(member, "POST", base, map[string]any{"title": "mine", "permission_mode": "ask"}, &s)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	refused("PATCH", base+"/"+s.ID, map[string]any{"permission_mode": "allow_all"})
	status, raw = e.as(member, "PATCH", base+"/"+s.ID, `{"permission_mode":"allow_all"}}`, nil)
	require.Equal(t, http.StatusBadRequest, status, "%s", raw)
	status, _ = e.as(member, "PATCH", base+"/"+s.ID, map[string]any{"permission_mode": "deny_all", "excluded_tools": []string{"bash"}}, nil)
	require.Equal(t, http.StatusOK, status)
	refused("POST", base+"/"+s.ID+"/resume", map[string]any{"client_id": newClientID(), "mcp_servers": mcp})

	// The owner makes it allow_all; from then on its tools are the owner's.
	e.must(http.StatusOK, "PATCH", base+"/"+s.ID, map[string]any{"permission_mode": "allow_all"}, nil)
	refused("PATCH", base+"/"+s.ID, map[string]any{"available_tools": []string{"bash"}})
	// Emptying a list lifts its restriction: a change of the tools too.
	refused("PATCH", base+"/"+s.ID, map[string]any{"excluded_tools": []string{}})
	refused("PATCH", base+"/"+s.ID, map[string]any{"available_tools": []string{}})
	refused("POST", base+"/"+s.ID+"/resume", map[string]any{"client_id": newClientID(), "tools": tools})
	status, _ = e.as(member, "PATCH", base+"/"+s.ID, map[string]any{"title": "renamed"}, nil)
	assert.Equal(t, http.StatusOK, status, "a title is no widening")
	var got proto.Session
	e.must(http.StatusOK, "GET", base+"/"+s.ID, nil, &got)
	assert.Equal(t, "renamed", got.Title)
}

// Rate limits: a flood from one token gets 429 rate_limited with
// Retry-After beyond its burst, while another token's requests keep their
// latency; the owner token is not limited by default.
func TestRateLimits(t *testing.T) {
	e := startEnv(t)
	_, flood := e.person("flood", "viewer")
	_, calm := e.person("calm", "viewer")

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		limited  int
		retry    []string
		stopping = make(chan struct{})
	)
	// The flood goes through a plain client: the spec's check of each
	// answer would cost the machine's CPU, not the server's.
	plain := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer plain.CloseIdleConnections()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopping:
					return
				default:
				}
				req, _ := http.NewRequest("GET", e.ts.URL+"/v1/workspaces", nil)
				req.Header.Set("Authorization", "Bearer "+flood)
				resp, err := plain.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					mu.Lock()
					limited++
					retry = append(retry, resp.Header.Get("Retry-After"))
					mu.Unlock()
				}
			}
		}()
	}
	// The calm token sends 80 requests, 30 a second: within its burst of
	// 100, so none may be refused, whatever the flood does.
	var lat []time.Duration
	pace := time.NewTicker(time.Second / 30)
	defer pace.Stop()
	for range 80 {
		<-pace.C
		start := time.Now()
		status, raw := e.as(calm, "GET", "/v1/workspaces", nil, nil)
		lat = append(lat, time.Since(start))
		require.Equal(t, http.StatusOK, status, "%s", raw)
	}
	close(stopping)
	wg.Wait()
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("calm token's latency under another's flood: p50 %v, p99 %v; flood refused %d times", p50, p99, limited)
	assert.Less(t, p99, 200*time.Millisecond)
	require.Positive(t, limited)
	for _, r := range retry[:min(len(retry), 10)] {
		n, err := strconv.Atoi(r)
		require.NoError(t, err, "Retry-After %q", r)
		assert.GreaterOrEqual(t, n, 1)
	}
	status, raw := e.as(flood, "GET", "/v1/workspaces", nil, nil)
	if status == http.StatusTooManyRequests {
		assert.Equal(t, proto.CodeRateLimited, errorCode(t, raw))
	}
	// The owner token is not limited by default.
	for range 150 {
		e.must(http.StatusOK, "GET", "/v1/me", nil, nil)
	}
}

// The audit log keeps every action of the contract's list, refusals
// included, oldest first, paged by id, across restarts; it is the owner's.
func TestAuditLog(t *testing.T) {
	e := startEnv(t)
	alice, aliceSecret := e.person("alice", "member")
	_, viewer := e.person("vic", "viewer")
	ws := e.createWorkspace()
	var s proto.Session
	status, raw := e.as(aliceSecret, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"title": "a"}, &s)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	clientID := newClientID()
	st := e.openStream(ws.ID, clientID, "", bearer(aliceSecret))
	var acc proto.PromptAccepted
	status, raw = e.as(aliceSecret, "POST", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"session_id": s.ID, "prompt": "hi", "client_id": clientID}, &acc)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	st.until(proto.EventRunCompleted)
	status, _ = e.as(viewer, "DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+s.ID, nil, nil)
	require.Equal(t, http.StatusForbidden, status)
	status, _ = e.refusedAs("tdm_"+strings.Repeat("A", 43), "GET", "/v1/workspaces")
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = e.as(aliceSecret, "GET", "/v1/audit", nil, nil)
	require.Equal(t, http.StatusForbidden, status, "the audit log is the owner's")

	e.restart()
	var log proto.AuditLog
	e.must(http.StatusOK, "GET", "/v1/audit", nil, &log)
	var actions []string
	for _, en := range log.Entries {
		actions = append(actions, en.Action+":"+en.Name)
	}
	assert.Equal(t, []string{"token.create:owner", "token.create:owner", "workspace.open:owner", "session.create:alice",
		"prompt:alice", "auth.denied:vic", "auth.denied:", "auth.denied:alice"}, actions)
	prompt := log.Entries[4]
	assert.Equal(t, alice.ID, prompt.TokenID)
	assert.Equal(t, clientID, prompt.ClientID)
	assert.Equal(t, ws.ID, prompt.WorkspaceID)
	assert.Equal(t, s.ID, prompt.SessionID)
	assert.Equal(t, acc.RunID, prompt.RunID)
	assert.True(t, sort.SliceIsSorted(log.Entries, func(i, j int) bool { return log.Entries[i].ID < log.Entries[j].ID }))

	var page proto.AuditLog
	e.must(http.StatusOK, "GET", "/v1/audit?limit=3", nil, &page)
	require.Len(t, page.Entries, 3)
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/audit?after=%d&limit=1000", page.Entries[2].ID), nil, &page)
	require.Len(t, page.Entries, len(log.Entries)-3, "the rest (reading the log is not an audited action)")
	assert.Equal(t, log.Entries[3:], page.Entries)
	// A page is 1 to 1000 entries; a bound outside is refused, naming it.
	for _, q := range []string{"limit=0", "limit=1001", "limit=-1", "after=-1", "limit=x", "limit=99999"} {
		status, raw := e.refusedAs(testToken, "GET", "/v1/audit?"+q)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", q, raw)
		assert.Equal(t, proto.CodeInvalidArgument, errorCode(t, raw), q)
		assert.Contains(t, string(raw), strings.TrimPrefix(strings.TrimPrefix(q, "limit="), "after="), "the refusal names what was sent")
	}
}

// A created secret is nowhere but in the answer that created it: not in the
// data dir (database included), not in the logs, not in any event.
func TestSecretIsNowhere(t *testing.T) {
	// The logs go to a file (its writes are safe from many goroutines),
	// outside the data dir, which is scanned on its own.
	logFile, err := os.Create(filepath.Join(t.TempDir(), "server.log"))
	require.NoError(t, err)
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := startEnv(t, func(c *serverConfig) { c.Logger = logger })
	ws := e.createWorkspace()
	_, secret := e.person("sam", "member")
	st := e.openStream(ws.ID, newClientID(), "&access_token="+secret, func(r *http.Request) { r.Header.Del("Authorization") })
	var s proto.Session
	status, _ := e.as(secret, "POST", "/v1/workspaces/"+ws.ID+"/sessions", nil, &s)
	require.Equal(t, http.StatusCreated, status)
	status, _ = e.as(secret, "POST", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"session_id": s.ID, "prompt": "hello"}, nil)
	require.Equal(t, http.StatusAccepted, status)
	_, frames := st.until(proto.EventRunCompleted)
	for _, f := range frames {
		assert.NotContains(t, f.Data, secret)
	}
	status, _ = e.as(secret, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	require.Equal(t, http.StatusForbidden, status)
	e.stop()

	raw, err := os.ReadFile(logFile.Name())
	require.NoError(t, err)
	logs := string(raw)
	assert.NotContains(t, logs, secret)
	assert.NotContains(t, logs, secret[len(auth.SecretPrefix):])
	found := 0
	require.NoError(t, filepath.WalkDir(e.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		found++
		assert.False(t, bytes.Contains(b, []byte(secret)), "secret in %s", path)
		assert.False(t, bytes.Contains(b, []byte(secret[len(auth.SecretPrefix):])), "secret in %s", path)
		return nil
	}))
	require.Positive(t, found)
	require.Contains(t, logs, "request", "the logs were captured")
}

// Who did what: every event of a run carries the prompter as its actor
// until an answer, whose events (permission.resolved and what follows in
// the run) carry the answerer; the user message has its author, and the
// stream's arrival and GET workspace name the person attached.
func TestAttribution(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	alice, aliceSecret := e.person("alice", "member")
	bob, bobSecret := e.person("bob", "member")
	watcher := e.openStream(ws.ID, newClientID(), "")
	aliceStream := e.openStream(ws.ID, newClientID(), "", bearer(aliceSecret))
	var presence proto.ClientPresence
	for presence.ClientID != aliceStream.ClientID {
		presence = dataOf[proto.ClientPresence](watcher, proto.EventClientAttached)
	}
	assert.Equal(t, proto.ClientPresence{ClientID: aliceStream.ClientID, Clients: 2, Name: "alice"}, presence)
	var got proto.Workspace
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID, nil, &got)
	var names []string
	for _, a := range got.Attached {
		names = append(names, a.Name)
	}
	assert.Equal(t, []string{"owner", "alice"}, names)

	var sess proto.Session
	status, raw := e.as(aliceSecret, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"client_id": aliceStream.ClientID}, &sess)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var acc proto.PromptAccepted
	status, raw = e.as(aliceSecret, "POST", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{
		"session_id": sess.ID, "client_id": aliceStream.ClientID, "prompt": `/tool write {"path": "by-alice.txt", "content": "x"}`}, &acc)
	require.Equal(t, http.StatusAccepted, status, "%s", raw)
	req := aliceStream.permissionRequested()
	bobClient := newClientID()
	status, raw = e.as(bobSecret, "POST", "/v1/workspaces/"+ws.ID+"/permissions/"+req.RequestID, map[string]any{"client_id": bobClient, "decision": "approve_once"}, nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	_, frames := watcher.until(proto.EventRunCompleted)

	aliceActor := &proto.Actor{TokenID: alice.ID, Name: "alice", ClientID: aliceStream.ClientID}
	bobActor := &proto.Actor{TokenID: bob.ID, Name: "bob", ClientID: bobClient}
	var sawResolved bool
	for _, fr := range frames {
		ev := fr.envelope(t)
		if ev.RunID != acc.RunID {
			continue
		}
		if ev.Type == proto.EventPermissionResolved {
			sawResolved = true
			var pr proto.PermissionResolved
			require.NoError(t, json.Unmarshal(ev.Data, &pr))
			assert.Equal(t, "bob", pr.ResolvedByName)
			assert.Equal(t, bobClient, pr.ResolvedBy)
		}
		want := aliceActor
		if sawResolved {
			want = bobActor
		}
		assert.Equal(t, want, ev.Actor, "%s of alice's run", ev.Type)
	}
	assert.True(t, sawResolved)

	// The history kept it: the user message's author and the events' actors.
	var msgs proto.MessageList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/messages", nil, &msgs)
	require.NotEmpty(t, msgs.Messages)
	assert.Equal(t, &proto.Author{Name: "alice", ClientID: aliceStream.ClientID}, msgs.Messages[0].Author)
	var evs proto.EventList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID+"/events", nil, &evs)
	accepted := 0
	for _, ev := range evs.Events {
		switch ev.Type {
		case proto.EventRunAccepted, proto.EventRunStarted, proto.EventPermissionRequested:
			accepted++
			assert.Equal(t, aliceActor, ev.Actor, ev.Type)
		case proto.EventPermissionResolved, proto.EventRunCompleted:
			assert.Equal(t, bobActor, ev.Actor, ev.Type)
		}
	}
	assert.Equal(t, 3, accepted)

	aliceStream.close()
	presence = dataOf[proto.ClientPresence](watcher, proto.EventClientDetached)
	assert.Equal(t, proto.ClientPresence{ClientID: aliceStream.ClientID, Clients: 1, Name: "alice"}, presence)
}

// Beyond its rate, a token's request is refused 429 and changes nothing,
// while GET /v1/health and the token's open event stream go on: reading a
// stream is not a request.
func TestRateLimitSparesHealthAndOpenStreams(t *testing.T) {
	// --rate 2: bursts of 10, for the owner token too.
	e := startEnv(t, func(c *serverConfig) { c.Rate, c.RateSet = 2, true })
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	_, secret := e.person("rita", "member")
	st := e.openStream(ws.ID, newClientID(), "", bearer(secret))
	st.until(proto.EventStreamOpened)

	base := "/v1/workspaces/" + ws.ID + "/sessions"
	created := 0
	for {
		status, raw := e.as(secret, "POST", base, map[string]any{"title": "t"}, nil)
		if status == http.StatusTooManyRequests {
			assert.Equal(t, proto.CodeRateLimited, errorCode(t, raw))
			break
		}
		require.Equal(t, http.StatusCreated, status, "%s", raw)
		created++
		require.Less(t, created, 40, "never limited")
	}
	var list proto.SessionList
	e.must(http.StatusOK, "GET", base, nil, &list)
	assert.Len(t, list.Sessions, 1+created, "the refused request changed nothing")

	for range 20 {
		resp, err := http.Get(e.ts.URL + "/v1/health")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	e.log(ws.ID, sess.ID, "still streaming", false)
	st.until(proto.EventSessionLog)
}
