package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

func TestRateLimitCarriesRetryAfter(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, 529} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(status)
				fmt.Fprint(w, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
			})
			p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
			_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4-5", Messages: userHi()}, nil)
			pe, ok := provider.AsError(err)
			require.True(t, ok, "got %T %v", err, err)
			require.True(t, pe.Retryable)
			require.Equal(t, 3*time.Second, pe.RetryAfter)
			require.Equal(t, 1, srv.Count(), "the SDK must not retry on its own, whatever Retry-After says")
		})
	}
}

func TestPromptTooLong(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}`)
	})
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4-5", Messages: userHi()}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeContextExceeded, pe.Code)
	require.False(t, pe.Retryable)
	require.Equal(t, 1, srv.Count())
}
