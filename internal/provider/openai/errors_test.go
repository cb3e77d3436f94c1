package openai_test

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
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "gpt-4.1", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeRateLimited, pe.Code)
	require.True(t, pe.Retryable)
	require.Equal(t, 2*time.Second, pe.RetryAfter)
	require.Equal(t, 1, srv.Count(), "the SDK must not retry on its own, whatever Retry-After says")
}

func TestContextLengthExceeded(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 1047576 tokens. However, your messages resulted in 1100000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "gpt-4.1", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeContextExceeded, pe.Code)
	require.False(t, pe.Retryable)
	require.Equal(t, 400, pe.Status)
	require.Contains(t, pe.Message, "maximum context length")
	require.Equal(t, 1, srv.Count())
}

func TestContextLengthExceededByCodeAlone(t *testing.T) {
	// A server that words it its own way but sends OpenAI's code.
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"too big","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	})
	p := newProvider(t, provider.Config{Type: "azure", BaseURL: srv.URL, APIKey: testKey})
	_, err := p.Stream(context.Background(), provider.Request{Model: "dep", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeContextExceeded, pe.Code)
}

func TestContextLengthExceededInStream(t *testing.T) {
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"error\":{\"message\":\"too long\",\"code\":\"context_length_exceeded\"}}\n\n")
	})
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "got %T %v", err, err)
	require.Equal(t, provider.CodeContextExceeded, pe.Code)
}
