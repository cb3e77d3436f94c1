package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tandem-dev/tandem/internal/provider"
)

// BenchmarkEstimateTokens estimates a long session's request (488 messages,
// about 830 KB, the size the throughput benchmark ends with): the cost
// the echo model, and an agent estimating its context, pay per step.
func BenchmarkEstimateTokens(b *testing.B) {
	req := provider.Request{System: strings.Repeat("s", 8000)}
	for i := range 488 {
		m := provider.Message{Role: provider.RoleUser, Text: strings.Repeat("x", 1700)}
		if i%2 == 1 {
			m = provider.Message{Role: provider.RoleAssistant, Text: "ok", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "view", Arguments: json.RawMessage(`{"path":"a.go"}`)}}}
		}
		req.Messages = append(req.Messages, m)
	}
	for range 7 {
		req.Tools = append(req.Tools, provider.Tool{Name: "view", Description: strings.Repeat("d", 300), Parameters: json.RawMessage(`{"type":"object"}`)})
	}
	var n int64
	for b.Loop() {
		n += provider.EstimateTokens(req)
	}
	_ = n
}
