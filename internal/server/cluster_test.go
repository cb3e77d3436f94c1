package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tandem-dev/tandem/internal/bus/natsbus"
	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/proto"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A cluster node serves, takes the workspace it is asked about, and stops
// leaving no goroutine behind: its lease loop, its forwarded requests, its
// feeds and its connections all end with Shutdown.
func TestClusterNodeStopsEverything(t *testing.T) {
	db := pgtest.Database(t)
	ns := natstest.Start(t)
	// The bus's stream and its goroutines are the NATS server's: make it
	// before counting goroutines.
	nb, err := natsbus.Dial(natsbus.Config{URL: ns.ClientURL(), Name: "setup"})
	require.NoError(t, err)
	nb.Close()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	srv, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", StoreURL: db, BusURL: ns.ClientURL(), NodeID: "n1"})
	require.NoError(t, err)
	h := srv.Handler()
	call := func(method, path, body string, out any) int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if out != nil {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out))
		}
		return rec.Code
	}
	var health proto.Health
	require.Equal(t, http.StatusOK, call("GET", "/v1/health", "", &health))
	assert.Equal(t, "n1", health.NodeID)
	var ws proto.Workspace
	require.Equal(t, http.StatusCreated, call("POST", "/v1/workspaces", `{"path": "`+t.TempDir()+`"}`, &ws))
	var sess proto.Session
	require.Equal(t, http.StatusCreated, call("POST", "/v1/workspaces/"+ws.ID+"/sessions", `{}`, &sess))
	var acc proto.PromptAccepted
	require.Equal(t, http.StatusAccepted, call("POST", "/v1/workspaces/"+ws.ID+"/agent", `{"session_id": "`+sess.ID+`", "prompt": "hi"}`, &acc))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
}

// A store without a bus (or the other way round) is refused: it would
// make a node nobody can reach.
func TestClusterNeedsStoreAndBus(t *testing.T) {
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret", StoreURL: "postgres://127.0.0.1:1/none"})
	require.ErrorContains(t, err, "bus")
}
