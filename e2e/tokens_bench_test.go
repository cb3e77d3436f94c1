package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkAcceptByToken measures the 202 of a prompt, p50 and p99, in one
// run for the data dir's owner token (authenticated in memory, no rate
// limit: the path of a server that only uses it, as before section 9) and
// for a member's token (looked up in the store, its role checked, its
// prompt audited). Both are rate limited (--rate set high enough never to
// refuse; the limiter's own cost is BenchmarkAdmit's in package httpapi).
func BenchmarkAcceptByToken(b *testing.B) {
	srv, err := server.New(context.Background(), serverConfig{DataDir: b.TempDir(), Token: testToken, Rate: 1e9, RateSet: true})
	require.NoError(b, err)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		require.NoError(b, srv.Shutdown(ctx))
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	post := func(secret, path string, body any, out any) int {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := client.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		if out != nil {
			require.NoError(b, json.NewDecoder(resp.Body).Decode(out))
		}
		return resp.StatusCode
	}
	var created proto.TokenCreated
	require.Equal(b, http.StatusCreated, post(testToken, "/v1/tokens", proto.CreateTokenRequest{Name: "bench", Role: "member"}, &created))
	var ws proto.Workspace
	require.Equal(b, http.StatusCreated, post(testToken, "/v1/workspaces", proto.CreateWorkspaceRequest{Path: b.TempDir()}, &ws))
	frames, stop := benchStream(b, ts.URL, ws.ID)
	defer stop()
	for _, tc := range []struct{ name, secret string }{{"owner", testToken}, {"member", created.Secret}} {
		b.Run(tc.name, func(b *testing.B) {
			var sess proto.Session
			require.Equal(b, http.StatusCreated, post(tc.secret, "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{}, &sess))
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				var acc proto.PromptAccepted
				start := time.Now()
				status := post(tc.secret, "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "hi"}, &acc)
				lat = append(lat, time.Since(start))
				require.Equal(b, http.StatusAccepted, status)
				// One run at a time: the next prompt meets an idle session.
				waitFrame(b, frames, func(f frame) bool {
					return f.Event == proto.EventRunCompleted && bytes.Contains([]byte(f.Data), []byte(acc.RunID))
				})
			}
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
		})
	}
}
