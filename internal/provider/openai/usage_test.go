package openai_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

// usageChunk is the last chunk of a stream asked for usage: no choices, the
// whole request's usage.
const usageChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"o4-mini","choices":[],` +
	`"usage":{"prompt_tokens":1200,"completion_tokens":340,"total_tokens":1540,` +
	`"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`

// withNullUsage is a content chunk as OpenAI sends it once usage is asked
// for: "usage": null until the last chunk.
func withNullUsage(c string) string { return c[:len(c)-1] + `,"usage":null}` }

func TestUsageFromTheLastChunk(t *testing.T) {
	srv := providertest.New(t, sse(
		withNullUsage(chunk(`{"role":"assistant","content":"Hi"}`, "")),
		withNullUsage(chunk(`{}`, "stop")),
		usageChunk,
	))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL, APIKey: testKey})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "o4-mini", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "Hi", resp.Text)
	require.Equal(t, provider.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 1024, ReasoningTokens: 256}, resp.Usage)
	require.Equal(t, map[string]any{"include_usage": true}, srv.Last(t).Body["stream_options"], "usage must be asked for")
}

func TestUsageMissingIsZero(t *testing.T) {
	// A server that ignores stream_options sends no usage at all.
	srv := providertest.New(t, sse(chunk(`{"content":"Hi"}`, "stop")))
	p := newProvider(t, provider.Config{Type: "openai", BaseURL: srv.URL})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.True(t, resp.Usage.IsZero())
}

func TestAzureAsksForUsage(t *testing.T) {
	srv := providertest.New(t, sse(chunk(`{"content":"Hi"}`, "stop"), usageChunk))
	p := newProvider(t, provider.Config{Type: "azure", BaseURL: srv.URL, APIKey: testKey})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "my-deployment", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1200, resp.Usage.InputTokens)
	require.Equal(t, map[string]any{"include_usage": true}, srv.Last(t).Body["stream_options"])
}
