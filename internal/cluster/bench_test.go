package cluster

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/httpapi"
)

// BenchmarkForwardedPrompt: a prompt sent over HTTP to a node that does
// not own its workspace, until its 202, with the owner's domain answering
// at once: what reaching the owner costs, without the store's writes
// (which dominate a real prompt's accept and vary with the machine's load).
//
//	go test -run '^$' -bench ForwardedPrompt -benchtime 5000x ./internal/cluster
func BenchmarkForwardedPrompt(b *testing.B) {
	sender, _, ws, _ := pair(b, &runs{})
	h := httpapi.New(httpapi.Config{Token: "secret", Services: sender.Domain()}).Handler()
	body := `{"session_id":"` + uuid.NewString() + `","prompt":"hi"}`
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest("POST", "/v1/workspaces/"+ws+"/agent", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer secret")
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		lat = append(lat, time.Since(start))
		if rec.Code != http.StatusAccepted {
			b.Fatalf("prompt: %d %s", rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50_us")
	b.ReportMetric(at(0.99), "p99_us")
}
