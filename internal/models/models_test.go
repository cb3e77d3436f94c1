package models_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/models"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

func usd(v float64) *float64 { return &v }

func TestLookupByModelString(t *testing.T) {
	c := models.New(nil)
	cases := []struct {
		model  string
		window int64
		input  float64
	}{
		{"openai/gpt-4.1", 1_047_576, 2.00},
		{"openai/gpt-4.1-2025-04-14", 1_047_576, 2.00}, // a dated snapshot
		{"azure/gpt-4.1-mini", 1_047_576, 0.40},        // a deployment named after its model
		{"work/gpt-4o", 128_000, 2.50},                 // a configured provider
		{"openai/gpt-4o-2024-05-13", 128_000, 5.00},    // a snapshot priced apart
		{"openrouter/openai/o4-mini", 200_000, 1.10},   // a router's own prefix
		{"openai/GPT-5", 400_000, 1.25},
		{"anthropic/claude-sonnet-4-5-20250929", 200_000, 3.00},
		{"anthropic/claude-sonnet-4-0", 200_000, 3.00},
		{"anthropic/claude-3-7-sonnet-latest", 200_000, 3.00},
		{"anthropic/claude-haiku-4-5", 200_000, 1.00},
		{"anthropic/claude-opus-4-1-20250805", 200_000, 15.00},
		{"echo", 128_000, 0},
		{"echo/anything", 128_000, 0},
	}
	for _, tc := range cases {
		s, ok := c.Lookup(tc.model)
		require.True(t, ok, tc.model)
		assert.Equal(t, tc.window, s.ContextWindow, tc.model)
		require.NotNil(t, s.InputPrice, tc.model)
		assert.Equal(t, tc.input, *s.InputPrice, tc.model)
		w, ok := c.Window(tc.model)
		assert.True(t, ok, tc.model)
		assert.Equal(t, tc.window, w, tc.model)
	}
}

func TestUnknownModelHasNoWindowAndNoCost(t *testing.T) {
	c := models.New(nil)
	for _, m := range []string{"openai/llama3.1:8b", "anthropic/claude-next", "openai/gpt-4.10", "", "gpt-4.1-"} {
		s, ok := c.Lookup(m)
		assert.False(t, ok, m)
		assert.False(t, s.Known(), m)
		w, ok := c.Window(m)
		assert.False(t, ok, m)
		assert.Zero(t, w, m)
		assert.Nil(t, c.Cost(m, provider.Usage{InputTokens: 1000, OutputTokens: 10}), "%s: nil, not 0", m)
		assert.Nil(t, c.Usage(m, provider.Usage{InputTokens: 1000}).CostUSD, m)
	}
}

func TestCost(t *testing.T) {
	c := models.New(nil)
	// OpenAI: cached tokens are part of the input, at the cached price.
	cost := c.Cost("openai/gpt-4.1", provider.Usage{InputTokens: 1_000_000, CacheReadTokens: 400_000, OutputTokens: 100_000, ReasoningTokens: 50_000})
	require.NotNil(t, cost)
	assert.InDelta(t, 0.6*2.00+0.4*0.50+0.1*8.00, *cost, 1e-9)

	// Anthropic: cache reads at a tenth of the input price, writes at 1.25 times.
	cost = c.Cost("anthropic/claude-sonnet-4-5", provider.Usage{InputTokens: 100_000, CacheReadTokens: 50_000, CacheWriteTokens: 10_000, OutputTokens: 10_000})
	require.NotNil(t, cost)
	assert.InDelta(t, 0.04*3+0.05*0.30+0.01*3.75+0.01*15, *cost, 1e-9)

	// Haiku 3's rounded cache prices.
	cost = c.Cost("anthropic/claude-3-haiku-20240307", provider.Usage{InputTokens: 2_000_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 1_000_000})
	require.NotNil(t, cost)
	assert.InDelta(t, 0.03+0.30, *cost, 1e-9)

	// Echo is free, and says so.
	cost = c.Cost("echo", provider.Usage{InputTokens: 5000, OutputTokens: 50})
	require.NotNil(t, cost)
	assert.Zero(t, *cost)

	zero := c.Cost("openai/gpt-4.1", provider.Usage{})
	require.NotNil(t, zero)
	assert.Zero(t, *zero)
}

func TestOverrides(t *testing.T) {
	c := models.New(map[string]models.Spec{
		// A window alone keeps the built-in prices.
		"openai/gpt-4.1": {ContextWindow: 50_000},
		// A model the table does not know.
		"local/qwen3-coder": {ContextWindow: 32_768, InputPrice: usd(0.10), OutputPrice: usd(0.30)},
		// A small window for every echo model, to compact offline...
		"echo": {ContextWindow: 2_000},
		// ...and a priced one for one of them.
		"echo/priced": {InputPrice: usd(1), OutputPrice: usd(2)},
		// Only an input price: no cost.
		"local/half": {InputPrice: usd(1)},
	})

	s, ok := c.Lookup("openai/gpt-4.1")
	require.True(t, ok)
	assert.EqualValues(t, 50_000, s.ContextWindow)
	assert.EqualValues(t, 32_768, s.MaxOutputTokens)
	assert.Equal(t, 2.00, *s.InputPrice)
	s, _ = c.Lookup("openai/gpt-4.1-2025-04-14")
	assert.EqualValues(t, 1_047_576, s.ContextWindow, "an override names a model string exactly")

	cost := c.Cost("local/qwen3-coder", provider.Usage{InputTokens: 1_000_000, CacheReadTokens: 500_000, OutputTokens: 1_000_000})
	require.NotNil(t, cost)
	assert.InDelta(t, 0.10+0.30, *cost, 1e-9, "no cache price known: cached input at the input price")

	w, _ := c.Window("echo/small")
	assert.EqualValues(t, 2_000, w)
	s, _ = c.Lookup("echo/priced")
	assert.EqualValues(t, 2_000, s.ContextWindow, "echo's window still applies")
	cost = c.Cost("echo/priced", provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000})
	require.NotNil(t, cost)
	assert.InDelta(t, 3.0, *cost, 1e-9)
	cost = c.Cost("echo", provider.Usage{InputTokens: 1_000_000})
	require.NotNil(t, cost)
	assert.Zero(t, *cost, "the priced echo override is for echo/priced only")

	assert.Nil(t, c.Cost("local/half", provider.Usage{InputTokens: 10}))
	_, ok = c.Lookup("local/half")
	assert.True(t, ok, "something is known, though not enough to price it")
}

func TestWithLayersAWorkspaceOverTheServer(t *testing.T) {
	server := models.New(map[string]models.Spec{
		"openai/gpt-4.1": {ContextWindow: 50_000, InputPrice: usd(1)},
	})
	ws := server.With(map[string]models.Spec{
		"openai/gpt-4.1": {ContextWindow: 10_000},
	})
	s, _ := ws.Lookup("openai/gpt-4.1")
	assert.EqualValues(t, 10_000, s.ContextWindow, "the workspace wins key by key")
	assert.Equal(t, 1.0, *s.InputPrice, "and keeps what it does not set")
	assert.Equal(t, 8.00, *s.OutputPrice)
	s, _ = server.Lookup("openai/gpt-4.1")
	assert.EqualValues(t, 50_000, s.ContextWindow, "the server's catalog is unchanged")
	assert.Same(t, server, server.With(nil))
}

func TestUsageOnTheWire(t *testing.T) {
	c := models.New(nil)
	u := c.Usage("openai/gpt-4.1-mini", provider.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadTokens: 1, CacheWriteTokens: 0, ReasoningTokens: 7})
	assert.EqualValues(t, 1_000_000, u.InputTokens)
	assert.EqualValues(t, 7, u.ReasoningTokens)
	assert.EqualValues(t, 1, u.CacheReadTokens)
	require.NotNil(t, u.CostUSD)
	assert.InDelta(t, 0.40+1.60, *u.CostUSD, 1e-6)

	// Sums: costs known only in part add up what is known.
	unpriced := c.Usage("openai/unknown", provider.Usage{InputTokens: 10, OutputTokens: 1})
	total := proto.Usage{}.Add(u).Add(unpriced)
	assert.EqualValues(t, 1_000_010, total.InputTokens)
	assert.EqualValues(t, 1_000_001, total.OutputTokens)
	require.NotNil(t, total.CostUSD)
	assert.InDelta(t, *u.CostUSD, *total.CostUSD, 1e-9)
	assert.NotSame(t, u.CostUSD, total.CostUSD, "a sum shares no pointer with its terms")
	assert.Nil(t, proto.Usage{}.Add(unpriced).CostUSD, "nothing priced: no cost")
}

// Every built-in entry is usable as it is: a window, an output limit that
// fits in it, and both prices.
func TestBuiltinTableIsComplete(t *testing.T) {
	c := models.New(nil)
	for _, m := range []string{
		"gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o1", "o1-mini", "o3", "o3-mini", "o4-mini",
		"gpt-5", "gpt-5-mini", "gpt-5-nano",
		"claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5",
		"claude-opus-4-1", "claude-opus-4", "claude-sonnet-4", "claude-3-7-sonnet", "claude-3-5-sonnet",
		"claude-3-5-haiku", "claude-3-opus", "claude-3-haiku",
	} {
		typ := "openai/"
		if strings.HasPrefix(m, "claude") {
			typ = "anthropic/"
		}
		s, ok := c.Lookup(typ + m)
		require.True(t, ok, m)
		assert.Positive(t, s.ContextWindow, m)
		assert.Positive(t, s.MaxOutputTokens, m)
		assert.Less(t, s.MaxOutputTokens, s.ContextWindow, m)
		for _, p := range []*float64{s.InputPrice, s.OutputPrice, s.CacheReadPrice, s.CacheWritePrice} {
			require.NotNil(t, p, m)
		}
		assert.Greater(t, *s.OutputPrice, *s.InputPrice, m)
		assert.Less(t, *s.CacheReadPrice, *s.InputPrice, m)
	}
}
