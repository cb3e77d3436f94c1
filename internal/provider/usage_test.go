package provider_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
)

func TestUsageAdd(t *testing.T) {
	a := provider.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 80, CacheWriteTokens: 5, ReasoningTokens: 3}
	b := provider.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ReasoningTokens: 5}
	require.Equal(t, provider.Usage{InputTokens: 101, OutputTokens: 12, CacheReadTokens: 83, CacheWriteTokens: 9, ReasoningTokens: 8}, a.Add(b))
	require.True(t, provider.Usage{}.IsZero())
	require.False(t, b.IsZero())
	require.EqualValues(t, 110, a.ContextTokens())
}

func TestEstimates(t *testing.T) {
	require.EqualValues(t, 0, provider.EstimateText(""))
	require.EqualValues(t, 1, provider.EstimateText("a"))
	require.EqualValues(t, 1, provider.EstimateText("abcd"))
	require.EqualValues(t, 2, provider.EstimateText("abcde"))

	user := provider.Message{Role: "user", Text: "abcdefgh", Images: []provider.Image{{MimeType: "image/png", Data: make([]byte, 1<<20)}}}
	require.EqualValues(t, 4+2+provider.ImageTokens, provider.EstimateMessage(user), "an image costs by pixels, not bytes")

	asst := provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "view", Arguments: json.RawMessage(`{"path":"a"}`)}}}
	require.EqualValues(t, 4+2+1+3, provider.EstimateMessage(asst))

	req := provider.Request{System: "12345678", Messages: []provider.Message{user, asst}, Tools: []provider.Tool{{Name: "view", Parameters: json.RawMessage(`{}`)}}}
	require.Equal(t, 2+provider.EstimateMessage(user)+provider.EstimateMessage(asst)+1+1, provider.EstimateTokens(req))
}
