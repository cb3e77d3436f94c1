package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/proto"
)

// BenchmarkAdmit measures what admitting a request costs, per request and
// as p50/p99: "v1.1" is the check before section 9 (the digest of the one
// token, compared in constant time); "owner" is admit for the data dir's
// token (in memory: route lookup, role check); "member" adds the token's
// lookup in the store (SQLite) and the rate limiter; "member-audited"
// also appends the audit entry of a prompt, as an audited action does.
func BenchmarkAdmit(b *testing.B) {
	db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "tandem.db"))
	require.NoError(b, err)
	defer db.Close()
	svc := auth.New(auth.Config{Store: db, OwnerToken: "owner-secret", Rate: 1e9, Burst: 1 << 30})
	defer svc.Close()
	created, err := svc.Create(context.Background(), proto.CreateTokenRequest{Name: "m", Role: "member"})
	require.NoError(b, err)
	a := New(Config{Token: "owner-secret", Auth: svc})
	a.Handler()
	old := sha256.Sum256([]byte("owner-secret"))

	run := func(b *testing.B, method, path, secret string, admit func(w http.ResponseWriter, r *http.Request) bool) {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Authorization", "Bearer "+secret)
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			w := httptest.NewRecorder()
			start := time.Now()
			ok := admit(w, r)
			lat = append(lat, time.Since(start))
			if !ok {
				b.Fatalf("refused: %d %s", w.Code, w.Body)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
	viaAdmit := func(w http.ResponseWriter, r *http.Request) bool {
		r2, _, done := a.admit(w, r)
		if r2 == nil {
			return false
		}
		done()
		return true
	}
	b.Run("v1.1", func(b *testing.B) {
		run(b, "GET", "/v1/workspaces", "owner-secret", func(w http.ResponseWriter, r *http.Request) bool {
			given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(given))
			return ok && subtle.ConstantTimeCompare(sum[:], old[:]) == 1
		})
	})
	b.Run("owner", func(b *testing.B) { run(b, "GET", "/v1/workspaces", "owner-secret", viaAdmit) })
	b.Run("member", func(b *testing.B) { run(b, "GET", "/v1/workspaces", created.Secret, viaAdmit) })
	b.Run("member-audited", func(b *testing.B) {
		run(b, "POST", "/v1/workspaces/5f0c8a52-8f0e-4f55-9c1b-6f3e7a1d2b10/agent", created.Secret, viaAdmit)
	})
}
