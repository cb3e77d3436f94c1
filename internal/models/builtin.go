package models

// builtin is the table of well-known models, keyed by the model name as
// the provider knows it (lowercase, without a date suffix). Prices are US
// dollars per million tokens at the standard tier (no batch or priority
// discounts, no long-context surcharge).
//
// Sources: the providers' own pages, as of 2026-11-24:
//   - OpenAI: https://platform.openai.com/docs/pricing and the model pages
//     under https://platform.openai.com/docs/models. Cached input is
//     OpenAI's "cached input" price; OpenAI charges nothing to write its
//     cache, so CacheWritePrice is 0.
//   - Anthropic: https://docs.anthropic.com/en/docs/about-claude/models/overview
//     and https://docs.anthropic.com/en/docs/about-claude/pricing. Cache
//     writes are the 5-minute cache's (1.25 x input), reads 0.1 x input.
//     Every Claude window is the standard 200,000 tokens: Sonnet 4.x and
//     Opus 4.6 can take 1M tokens, but past 200,000 input tokens the price
//     of a request doubles, so a session only goes there when its config
//     says so (models: {"anthropic/...": {"context_window": 1000000}}).
//   - echo: Tandem's offline model; free, and a window like a real model's.
//     Set a small one in the config to try compaction offline.
//
// The providers' pages could not be read directly when the table was
// written; its figures were cross-checked against independent copies of
// them (GitHub's Copilot model price table, LiteLLM's model table, the
// model lists of several SDKs and gateways). Checked in at least one such
// copy: the GPT-4.1 windows and prices (gpt-4.1-mini's cached price
// excepted), GPT-4o and 4o-mini, o1, o3 (after the June 2025 cut from
// $10/$40), o3-mini, o4-mini, the GPT-5 prices, every Claude price, the
// windows and output limits of Opus 4/4.1, Sonnet 3.7 and Haiku 3.5, and
// Sonnet 4.6's. Not checked (taken from the providers' pages as last
// known): gpt-4.1-mini's cached price, o1-mini, gpt-4o-2024-05-13's limits,
// GPT-5's window and output limit (400,000 and 128,000, the figures its
// successors are published with), the output limits of the Claude 4.5
// models and of Opus 4.6 (128,000; copies disagree), Sonnet 3.5's and the
// Claude 3 models'. Newer models (GPT-5.x, Claude 4.7 and later) are not
// in the table: give them in the config file.
var builtin = map[string]Spec{
	// OpenAI GPT-4.1: 1,047,576 tokens, 32,768 out.
	"gpt-4.1":      openai(1_047_576, 32_768, 2.00, 0.50, 8.00),
	"gpt-4.1-mini": openai(1_047_576, 32_768, 0.40, 0.10, 1.60),
	"gpt-4.1-nano": openai(1_047_576, 32_768, 0.10, 0.025, 0.40),
	// OpenAI GPT-4o: 128,000 tokens, 16,384 out. The first snapshot was
	// priced higher and had no cache discount.
	"gpt-4o":            openai(128_000, 16_384, 2.50, 1.25, 10.00),
	"gpt-4o-2024-05-13": {ContextWindow: 128_000, MaxOutputTokens: 4_096, InputPrice: usd(5.00), OutputPrice: usd(15.00)},
	"gpt-4o-mini":       openai(128_000, 16_384, 0.15, 0.075, 0.60),
	// OpenAI o-series reasoning models: reasoning tokens are billed as output.
	"o1":      openai(200_000, 100_000, 15.00, 7.50, 60.00),
	"o1-mini": openai(128_000, 65_536, 1.10, 0.55, 4.40),
	"o3":      openai(200_000, 100_000, 2.00, 0.50, 8.00), // after the June 2025 cut from $10/$40
	"o3-mini": openai(200_000, 100_000, 1.10, 0.55, 4.40),
	"o4-mini": openai(200_000, 100_000, 1.10, 0.275, 4.40),
	// OpenAI GPT-5: 400,000 tokens in all, 128,000 of them output.
	"gpt-5":      openai(400_000, 128_000, 1.25, 0.125, 10.00),
	"gpt-5-mini": openai(400_000, 128_000, 0.25, 0.025, 2.00),
	"gpt-5-nano": openai(400_000, 128_000, 0.05, 0.005, 0.40),

	// Anthropic Claude 4.x. Aliases name the same models as their ids.
	"claude-opus-4-6":   anthropic(128_000, 5.00, 25.00),
	"claude-sonnet-4-6": anthropic(64_000, 3.00, 15.00),
	"claude-opus-4-5":   anthropic(64_000, 5.00, 25.00),
	"claude-sonnet-4-5": anthropic(64_000, 3.00, 15.00),
	"claude-haiku-4-5":  anthropic(64_000, 1.00, 5.00),
	"claude-opus-4-1":   anthropic(32_000, 15.00, 75.00),
	"claude-opus-4":     anthropic(32_000, 15.00, 75.00),
	"claude-opus-4-0":   anthropic(32_000, 15.00, 75.00),
	"claude-sonnet-4":   anthropic(64_000, 3.00, 15.00),
	"claude-sonnet-4-0": anthropic(64_000, 3.00, 15.00),
	// Anthropic Claude 3.x.
	"claude-3-7-sonnet": anthropic(64_000, 3.00, 15.00),
	"claude-3-5-sonnet": anthropic(8_192, 3.00, 15.00),
	"claude-3-5-haiku":  anthropic(8_192, 0.80, 4.00),
	"claude-3-opus":     anthropic(4_096, 15.00, 75.00),
	// Haiku 3's cache prices are rounded: $0.30 to write, $0.03 to read.
	"claude-3-haiku": {ContextWindow: 200_000, MaxOutputTokens: 4_096,
		InputPrice: usd(0.25), OutputPrice: usd(1.25), CacheReadPrice: usd(0.03), CacheWritePrice: usd(0.30)},

	"echo": {ContextWindow: 128_000, MaxOutputTokens: 32_000, InputPrice: usd(0), OutputPrice: usd(0)},
}

func usd(v float64) *float64 { return &v }

// openai is an OpenAI model: cached input at its own price, cache writes free.
func openai(window, output int64, in, cached, out float64) Spec {
	return Spec{ContextWindow: window, MaxOutputTokens: output,
		InputPrice: usd(in), OutputPrice: usd(out), CacheReadPrice: usd(cached), CacheWritePrice: usd(0)}
}

// anthropic is a Claude model: a 200,000-token window, cache writes at 1.25
// times the input price, reads at a tenth of it.
func anthropic(output int64, in, out float64) Spec {
	return Spec{ContextWindow: 200_000, MaxOutputTokens: output,
		InputPrice: usd(in), OutputPrice: usd(out), CacheReadPrice: usd(in / 10), CacheWritePrice: usd(in * 1.25)}
}
