package provider_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/compute"
	"github.com/tandem-dev/tandem/internal/provider"
)

// A run that waits for its model, for the response's headers or for the
// next piece of its stream, lets go of its compute slot: with one slot,
// another run gets it during each wait, and the model (which answers only
// once the other run has had it) is not kept waiting forever.
func TestWaitingForTheModelLetsAnotherRunCompute(t *testing.T) {
	slots := compute.New(1)
	otherComputed := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := func() bool {
			select {
			case <-otherComputed:
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !wait() { // before the headers
			return
		}
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		if !wait() { // between two reads of the body
			return
		}
		_, _ = io.WriteString(w, "second")
	}))
	defer srv.Close()
	go func() {
		for range 2 {
			h, _, err := slots.Hold(t.Context())
			if err != nil {
				return
			}
			h.Done()
			otherComputed <- struct{}{}
		}
	}()

	h, ctx, err := slots.Hold(t.Context())
	require.NoError(t, err)
	defer h.Done()
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := provider.DefaultHTTPClient().Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(b)
	}()
	select {
	case s := <-got:
		assert.Equal(t, "first second", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the run kept its slot while it waited for its model")
	}
}
