package echo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/echo"
)

func TestEchoReportsEstimatedUsage(t *testing.T) {
	req := provider.Request{
		System:   strings.Repeat("s", 400),      // 100 tokens
		Messages: user(strings.Repeat("u", 40)), // 4 + 10 tokens
		Tools:    []provider.Tool{{Name: "view", Description: strings.Repeat("d", 80), Parameters: json.RawMessage(`{}`)}},
	}
	resp, _, err := run(t, req)
	require.NoError(t, err)
	require.Equal(t, provider.EstimateTokens(req), resp.Usage.InputTokens)
	require.EqualValues(t, 100+14+1+20+1, resp.Usage.InputTokens)
	require.Equal(t, provider.EstimateText(resp.Text), resp.Usage.OutputTokens) // "echo: " + 40 bytes
	require.EqualValues(t, 12, resp.Usage.OutputTokens)
	require.Zero(t, resp.Usage.ReasoningTokens)
}

func TestEchoUsageGrowsWithTheConversation(t *testing.T) {
	short, _, err := run(t, provider.Request{Messages: user("hi")})
	require.NoError(t, err)
	long, _, err := run(t, provider.Request{Messages: append(user(strings.Repeat("earlier ", 500)), provider.Message{Role: "assistant", Text: "ok"}, provider.Message{Role: "user", Text: "hi"})})
	require.NoError(t, err)
	require.Greater(t, long.Usage.InputTokens, short.Usage.InputTokens+900)
	require.Equal(t, short.Usage.OutputTokens, long.Usage.OutputTokens, "same answer, same output")
}

func TestEchoUsageCountsReasoningAndToolCalls(t *testing.T) {
	resp, _, err := run(t, provider.Request{Messages: user("/think 12345678")})
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.Usage.ReasoningTokens)
	require.EqualValues(t, 2+provider.EstimateText("echo: 12345678"), resp.Usage.OutputTokens)

	resp, _, err = run(t, provider.Request{Messages: user(`/tool write {"path":"a.txt"}`)})
	require.NoError(t, err)
	require.EqualValues(t, provider.EstimateText("calling tool write")+provider.EstimateText("write")+provider.EstimateText(`{"path":"a.txt"}`), resp.Usage.OutputTokens)
}

func TestEchoCanceledStepReportsWhatItCounted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	req := provider.Request{Messages: user("/slow 100 1")}
	resp, err := echo.New(provider.Config{}).Stream(ctx, req, func(provider.Delta) {
		if n++; n == 2 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, provider.EstimateTokens(req), resp.Usage.InputTokens)
	require.Equal(t, provider.EstimateText("tick 1 tick 2 "), resp.Usage.OutputTokens)
	require.Empty(t, resp.Text)

	resp, _, err = run(t, provider.Request{Messages: user("/fail model_rate_limited slow down")})
	require.Error(t, err)
	require.True(t, resp.Usage.IsZero(), "a refused request consumed nothing")
}
