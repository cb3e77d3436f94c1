package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/guard"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/proto"
)

// applied is a domain that keeps what each call asked of it: what a
// request's handler applied after the role check let it through.
type applied struct {
	domain.Sessions
	domain.Runs
	mu      sync.Mutex
	creates []proto.CreateSessionRequest
	updates []proto.UpdateSessionRequest
	resumes []proto.ResumeRequest
	mode    string // the session's permission mode
}

func (d *applied) Create(_ context.Context, _ string, req proto.CreateSessionRequest) (proto.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates = append(d.creates, req)
	return proto.Session{ID: "s"}, nil
}

func (d *applied) Get(context.Context, string, string) (proto.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return proto.Session{ID: "s", PermissionMode: d.mode}, nil
}

func (d *applied) Update(_ context.Context, _, _ string, req proto.UpdateSessionRequest) (proto.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.updates = append(d.updates, req)
	return proto.Session{ID: "s"}, nil
}

func (d *applied) Resume(_ context.Context, _, _ string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resumes = append(d.resumes, req)
	return proto.ResumeResponse{}, nil
}

// memberAPI serves the API over d, held by the guard, with a member's token.
func memberAPI(t testing.TB, d *applied) (http.Handler, string) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tandem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	svc := auth.New(auth.Config{Store: db, OwnerToken: "owner-secret", Rate: 1e9, Burst: 1 << 30})
	t.Cleanup(svc.Close)
	created, err := svc.Create(context.Background(), proto.CreateTokenRequest{Name: "m", Role: "member"})
	require.NoError(t, err)
	services := guard.Wrap(domain.Services{Sessions: d, Runs: d}, guard.Config{})
	return New(Config{Token: "owner-secret", Auth: svc, Services: services}).Handler(), created.Secret
}

// widenRoutes are the routes whose bodies can widen what the agent may do.
var widenRoutes = []struct{ method, path string }{
	{"POST", "/v1/workspaces/w/sessions"},
	{"PATCH", "/v1/workspaces/w/sessions/s"},
	{"POST", "/v1/workspaces/w/sessions/s/resume"},
}

// Whatever body a member sends to a route that can widen the agent's
// powers, what the handler applies never widens them: the role check and
// the handler judge one decoded value. Before the guard, a body such as
// "\f{\"permission_mode\":\"allow_all\"}" was read one way by the check and
// another by the handler, and the member became an owner.
func FuzzRoleCheckAgreesWithHandler(f *testing.F) {
	for _, seed := range []string{
		`{"permission_mode":"allow_all"}`,
		"\f{\"permission_mode\":\"allow_all\"}",
		"\v{\"permission_mode\":\"allow_all\"}\v",
		"\u00a0{\"permission_mode\":\"allow_all\"}",
		"{\"permission_mode\":\"allow_all\"}\u2028",
		`{"mcp_servers":{"x":{"type":"stdio","command":"sh"}},"client_id":"5f0c8a52-8f0e-4f55-9c1b-6f3e7a1d2b10"}`,
		`{"available_tools":[]}`,
		`{"tools":[{"name":"t","parameters":{"type":"object"}}],"client_id":"5f0c8a52-8f0e-4f55-9c1b-6f3e7a1d2b10"}`,
		`{"permission_mode":"allow\u005fall"}`,
		`{"title":"x"}`,
	} {
		for i := range widenRoutes {
			f.Add(uint8(i), true, []byte(seed))
		}
	}
	d := &applied{}
	h, member := memberAPI(f, d)
	f.Fuzz(func(t *testing.T, route uint8, allowAll bool, body []byte) {
		d.mu.Lock()
		d.creates, d.updates, d.resumes = nil, nil, nil
		d.mode = map[bool]string{true: proto.PermissionModeAllowAll, false: proto.PermissionModeAsk}[allowAll]
		d.mu.Unlock()
		rt := widenRoutes[int(route)%len(widenRoutes)]
		r := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+member)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		d.mu.Lock()
		defer d.mu.Unlock()
		isAllowAll := func() bool { return allowAll }
		for _, req := range d.creates {
			if wide := guard.CreateWidening(req); len(wide) > 0 {
				t.Fatalf("body %q: a member's create applied %v (answered %d)", body, wide, w.Code)
			}
		}
		for _, req := range d.updates {
			if wide := guard.UpdateWidening(req, isAllowAll); len(wide) > 0 {
				t.Fatalf("body %q: a member's update applied %v (answered %d)", body, wide, w.Code)
			}
		}
		for _, req := range d.resumes {
			if wide := guard.ResumeWidening(req, isAllowAll); len(wide) > 0 {
				t.Fatalf("body %q: a member's resume applied %v (answered %d)", body, wide, w.Code)
			}
		}
		if len(d.creates)+len(d.updates)+len(d.resumes) > 0 && w.Code >= 400 {
			t.Fatalf("body %q: applied, then answered %d %s", body, w.Code, w.Body)
		}
	})
}

// Around a body's JSON value only JSON's white space (space, tab, CR, LF)
// is allowed: any other byte or character, before or after, is 400
// invalid_json on every route that takes a body, and nothing is applied.
func TestStrayBytesAroundBody(t *testing.T) {
	d := &applied{mode: proto.PermissionModeAllowAll}
	h, member := memberAPI(t, d)
	stray := []string{"\f", "\v", "\x00", "\u00a0", "\u0085", "\u2028", "\u2029", "\ufeff", "\u3000", "\x1c"}
	bodies := []string{`{"permission_mode":"allow_all"}`, `{"title":"t"}`, `{}`}
	for _, rt := range widenRoutes {
		for _, s := range stray {
			for _, b := range bodies {
				for _, body := range []string{s + b, b + s, " " + s + b + "\n"} {
					r := httptest.NewRequest(rt.method, rt.path, strings.NewReader(body))
					r.Header.Set("Authorization", "Bearer "+member)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					require.Equal(t, http.StatusBadRequest, w.Code, "%s %s %q: %s", rt.method, rt.path, body, w.Body)
					require.Contains(t, w.Body.String(), proto.CodeInvalidJSON, "%s %s %q", rt.method, rt.path, body)
				}
			}
		}
	}
	require.Empty(t, d.creates)
	require.Empty(t, d.updates)
	require.Empty(t, d.resumes)
	// JSON's own white space is fine.
	r := httptest.NewRequest("PATCH", "/v1/workspaces/w/sessions/s", strings.NewReader(" \t\r\n{\"title\":\"t\"}\r\n"))
	r.Header.Set("Authorization", "Bearer "+member)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
}
