package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/httpapi"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// Every route that takes a body, sent a body with a byte or character
// around its JSON value that is not JSON's white space, answers 400
// invalid_json to whoever may take the route (403 to whoever may not),
// and changes nothing. A member's "\f{\"permission_mode\":\"allow_all\"}"
// once made a session allow_all: the role check and the handler read the
// body differently.
func TestStrayBytesOnEveryRoute(t *testing.T) {
	e := startEnv(t, func(c *serverConfig) { c.Rate, c.RateSet = 0, true })
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	secrets := map[auth.Role]string{auth.Owner: testToken}
	_, secrets[auth.Viewer] = e.person("vera", "viewer")
	_, secrets[auth.Member] = e.person("max", "member")

	type route struct {
		method, path string
		min          auth.Role
	}
	var routes []route
	require.NoError(t, chi.Walk(e.srv.Handler().(chi.Routes), func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		act, ok, public := httpapi.RouteAction(method, pattern)
		if public || !ok || method == http.MethodGet {
			return nil
		}
		min, _ := auth.MinRole(act)
		path := strings.NewReplacer("{wid}", ws.ID, "{sid}", sess.ID, "{rid}", newClientID(), "{tid}", newClientID(), "{cid}", newClientID()).Replace(strings.TrimSuffix(pattern, "/"))
		routes = append(routes, route{method, path, min})
		return nil
	}))
	require.GreaterOrEqual(t, len(routes), 18)

	snapshot := func() string {
		var b strings.Builder
		var got proto.Session
		e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, nil, &got)
		b.WriteString(got.PermissionMode + " " + got.Title + " " + got.Model + ";")
		var list proto.SessionList
		e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
		for _, s := range list.Sessions {
			b.WriteString(s.ID + ";")
		}
		var toks proto.TokenList
		e.must(http.StatusOK, "GET", "/v1/tokens", nil, &toks)
		for _, tk := range toks.Tokens {
			b.WriteString(tk.ID + ";")
		}
		return b.String()
	}
	before := snapshot()
	body := `{"permission_mode":"allow_all","title":"widened"}`
	stray := []string{"\f", "\v", "\x00", "\u00a0", "\u0085", "\u2028", "\u2029", "\ufeff"}
	for _, rt := range routes {
		for _, role := range []auth.Role{auth.Viewer, auth.Member, auth.Owner} {
			for _, s := range stray {
				for _, sent := range []string{s + body, body + s} {
					status, raw := e.doRaw(rt.method, rt.path, []byte(sent), nil, map[string]string{"Authorization": "Bearer " + secrets[role]})
					if role < rt.min {
						require.Equal(t, http.StatusForbidden, status, "%s %s as %s, %q: %s", rt.method, rt.path, role, sent, raw)
						continue
					}
					require.Equal(t, http.StatusBadRequest, status, "%s %s as %s, %q: %s", rt.method, rt.path, role, sent, raw)
					require.Equal(t, proto.CodeInvalidJSON, errorCode(t, raw), "%s %s as %s, %q", rt.method, rt.path, role, sent)
				}
			}
		}
	}
	assert.Equal(t, before, snapshot(), "a refused body changed something")

	// The control: the same body without the stray byte is judged on what
	// it asks, a member's widening refused, an owner's applied.
	status, raw := e.as(secrets[auth.Member], "PATCH", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, body, nil)
	require.Equal(t, http.StatusForbidden, status, "%s", raw)
	e.must(http.StatusOK, "PATCH", "/v1/workspaces/"+ws.ID+"/sessions/"+sess.ID, body, nil)
}

// Workspace roots (section 9): a member opens workspaces only inside the
// configuration's workspace_roots (or one already open); an owner anywhere;
// nobody the data dir, a directory in it or one holding it.
func TestWorkspaceRoots(t *testing.T) {
	root := t.TempDir()
	inside := filepath.Join(root, "proj")
	require.NoError(t, os.Mkdir(inside, 0o755))
	// A symlink into the root is judged where it leads, and so is one out.
	link := filepath.Join(t.TempDir(), "to-proj")
	require.NoError(t, os.Symlink(inside, link))
	outside := t.TempDir()
	escape := filepath.Join(root, "escape")
	require.NoError(t, os.Symlink(outside, escape))

	f, err := config.Parse("server.json", []byte(`{"workspace_roots": ["`+root+`"]}`))
	require.NoError(t, err)
	e := startEnv(t, func(c *server.Config) { c.Config = f })
	_, member := e.person("mia", "member")
	open := func(secret, path string) (int, string) {
		t.Helper()
		var ws proto.Workspace
		status, raw := e.as(secret, "POST", "/v1/workspaces", proto.CreateWorkspaceRequest{Path: path}, &ws)
		if status >= 400 {
			return status, errorCode(t, raw) + " " + string(raw)
		}
		return status, ws.ID
	}

	var me proto.Me
	status, raw := e.as(member, "GET", "/v1/me", nil, &me)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	assert.Equal(t, []string{root}, me.WorkspaceRoots, "a member is told where it may open workspaces")

	status, _ = open(member, inside)
	assert.Equal(t, http.StatusCreated, status)
	status, _ = open(member, link)
	assert.Equal(t, http.StatusOK, status, "a symlink to an open workspace is that workspace")
	for _, p := range []string{outside, escape, "/etc"} {
		status, why := open(member, p)
		assert.Equal(t, http.StatusForbidden, status, "member opens %s: %s", p, why)
		assert.Contains(t, why, root, "the refusal names the roots")
	}
	// The owner opens it; from then on a member may open it too.
	status, _ = open(testToken, outside)
	assert.Equal(t, http.StatusCreated, status)
	status, _ = open(member, outside)
	assert.Equal(t, http.StatusOK, status)

	// The data dir, however spelled, is nobody's workspace.
	data := e.cfg.DataDir
	dataLink := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Symlink(data, dataLink))
	require.NoError(t, os.MkdirAll(filepath.Join(data, "sub"), 0o700))
	for _, p := range []string{data, data + "/./", filepath.Join(data, "sub"), dataLink, filepath.Dir(data), "/"} {
		for _, secret := range []string{testToken, member} {
			status, why := open(secret, p)
			assert.Equal(t, http.StatusBadRequest, status, "open %s: %s", p, why)
			assert.Contains(t, why, proto.CodeInvalidArgument)
			assert.Contains(t, why, "data dir")
		}
	}
}
