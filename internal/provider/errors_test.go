package provider_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"http date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"capped", map[string]string{"Retry-After": "3600"}, provider.MaxRetryAfter},
		{"huge", map[string]string{"Retry-After": "1e300"}, provider.MaxRetryAfter},
		{"date capped", map[string]string{"Retry-After": now.Add(time.Hour).Format(http.TimeFormat)}, provider.MaxRetryAfter},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"ms wins", map[string]string{"Retry-After-Ms": "250", "Retry-After": "3"}, 250 * time.Millisecond},
		{"openai exhausted requests", map[string]string{
			"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "6m0s",
			"X-Ratelimit-Remaining-Tokens": "1000", "X-Ratelimit-Reset-Tokens": "20ms",
		}, provider.MaxRetryAfter},
		{"openai exhausted tokens", map[string]string{
			"X-Ratelimit-Remaining-Requests": "10", "X-Ratelimit-Reset-Requests": "6m0s",
			"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1.5s",
		}, 1500 * time.Millisecond},
		{"openai nothing exhausted", map[string]string{"X-Ratelimit-Remaining-Tokens": "5", "X-Ratelimit-Reset-Tokens": "9s"}, 0},
		{"anthropic exhausted", map[string]string{
			"Anthropic-Ratelimit-Input-Tokens-Remaining": "0",
			"Anthropic-Ratelimit-Input-Tokens-Reset":     now.Add(4 * time.Second).Format(time.RFC3339),
			"Anthropic-Ratelimit-Requests-Remaining":     "3",
			"Anthropic-Ratelimit-Requests-Reset":         now.Add(50 * time.Second).Format(time.RFC3339),
		}, 4 * time.Second},
		{"retry-after beats limits", map[string]string{"Retry-After": "2", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "30s"}, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			require.Equal(t, c.want, provider.RetryAfter(h, now))
		})
	}
	require.Zero(t, provider.RetryAfter(nil, now))
}

func TestAPIError(t *testing.T) {
	h := http.Header{"Retry-After": []string{"2"}}
	e := provider.APIError(429, h, "rate_limit_exceeded", "slow down")
	require.Equal(t, provider.CodeRateLimited, e.Code)
	require.True(t, e.Retryable)
	require.Equal(t, 2*time.Second, e.RetryAfter)

	e = provider.APIError(503, h, "", "overloaded")
	require.Equal(t, 2*time.Second, e.RetryAfter, "a 5xx may say when to come back too")

	e = provider.APIError(400, h, "", "bad parameter")
	require.Equal(t, provider.CodeBadRequest, e.Code)
	require.Zero(t, e.RetryAfter, "a request that will not succeed has nothing to wait for")
}

func TestContextExceeded(t *testing.T) {
	over := []struct {
		status  int
		code    string
		message string
	}{
		{400, "context_length_exceeded", "anything"},
		{400, "", "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."},
		{400, "", "prompt is too long: 210000 tokens > 200000 maximum"},
		{400, "", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"},
		{400, "", "the request exceeds the available context size, try increasing it"},
		{413, "", "This endpoint's maximum context length is 8192 tokens"},
		{422, "", "Prompt contains 40000 tokens, too large for model with 32768 maximum context length"},
	}
	for _, c := range over {
		e := provider.APIError(c.status, nil, c.code, c.message)
		require.Equal(t, provider.CodeContextExceeded, e.Code, c.message)
		require.False(t, e.Retryable, "retrying as is cannot work")
	}
	notOver := []struct {
		status  int
		message string
	}{
		{429, "Rate limit reached: too many tokens per minute; maximum context length unaffected"},
		{400, "Invalid value for 'temperature'"},
		{413, "Request exceeds the maximum allowed number of bytes"},
		{500, "maximum context length"},
	}
	for _, c := range notOver {
		require.NotEqual(t, provider.CodeContextExceeded, provider.APIError(c.status, nil, "", c.message).Code, c.message)
	}
	// StatusError knows it from the message alone (errors inside a stream).
	require.Equal(t, provider.CodeContextExceeded, provider.StatusError(400, "anthropic: prompt is too long: 5 > 4").Code)
}

// FuzzRetryAfter feeds a model server's headers, which Tandem does not
// control, to RetryAfter: whatever they say, the wait is between 0 and
// MaxRetryAfter, and nothing panics.
func FuzzRetryAfter(f *testing.F) {
	f.Add("Retry-After", "3")
	f.Add("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("Retry-After", "1e309")
	f.Add("Retry-After-Ms", "NaN")
	f.Add("Retry-After-Ms", "-0")
	f.Add("X-Ratelimit-Reset-Tokens", "9223372036854775807ns")
	f.Add("Anthropic-Ratelimit-Tokens-Reset", "9999-12-31T23:59:59Z")
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, name, value string) {
		h := http.Header{}
		h.Set(name, value)
		// Exhausted limits, so the reset headers are read too.
		h.Set("X-Ratelimit-Remaining-Tokens", "0")
		h.Set("Anthropic-Ratelimit-Tokens-Remaining", "0")
		d := provider.RetryAfter(h, now)
		if d < 0 || d > provider.MaxRetryAfter {
			t.Fatalf("%s: %q -> %v", name, value, d)
		}
	})
}
