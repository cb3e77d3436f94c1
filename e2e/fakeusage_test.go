package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/registry"
)

// TestFakeModelsReportUsage checks the fakes against the real providers:
// the usage a step scripts (in provider.Usage's convention) is what the
// provider reads from the wire, for both flavors, so a test can script
// usage and expect exactly those numbers on messages and runs.
func TestFakeModelsReportUsage(t *testing.T) {
	want := fakeUsage{Input: 1234, Output: 56, CacheRead: 1000, CacheWrite: 200, Reasoning: 7}
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) {
			fake := newFakeModel(t, flavor, func(int, map[string]any) step {
				u := want
				return step{text: []string{"ok"}, usage: &u}
			})
			cfg := provider.Config{Type: flavor, BaseURL: fake.URL(), APIKey: "k"}
			if flavor == "openai" {
				cfg.BaseURL += "/v1"
			}
			reg := registry.New()
			defer reg.Close()
			p, err := reg.Provider(cfg)
			require.NoError(t, err)
			resp, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
			require.NoError(t, err)
			expected := provider.Usage{InputTokens: want.Input, OutputTokens: want.Output, CacheReadTokens: want.CacheRead, CacheWriteTokens: want.CacheWrite, ReasoningTokens: want.Reasoning}
			if flavor == "openai" {
				expected.CacheWriteTokens = 0 // not an OpenAI notion
			}
			require.Equal(t, expected, resp.Usage)
		})
	}
}
