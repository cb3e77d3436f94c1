package provider

// Usage is what one model request consumed, in tokens, as its provider
// reported it. The fields mean the same whatever the provider, so that the
// agent can add them up and price them without knowing where they came from:
//
//   - InputTokens counts every token the model read for the request, cached
//     or not. CacheReadTokens and CacheWriteTokens are the part of them read
//     from, and written to, the provider's prompt cache. OpenAI reports it
//     that way (prompt_tokens includes prompt_tokens_details.cached_tokens);
//     Anthropic reports input_tokens without its cache_read_input_tokens and
//     cache_creation_input_tokens, so its provider adds them up.
//   - OutputTokens counts every token the model wrote; ReasoningTokens is the
//     part of them spent on reasoning (OpenAI's reasoning_tokens, Anthropic's
//     thinking_tokens), which both providers already count in the output.
//
// A zero Usage means the provider reported nothing: an OpenAI-compatible
// server that ignores stream_options, or a request that failed before the
// model said anything.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ReasoningTokens  int64
}

// IsZero reports whether nothing was reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns the sum of u and v: a run's usage is the sum of its requests'.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// ContextTokens is the size of the conversation once the request is
// answered: what it read plus what it wrote. The next request of the same
// conversation carries at least that much (reasoning included: some
// providers drop earlier reasoning, so this errs on the large side).
func (u Usage) ContextTokens() int64 { return u.InputTokens + u.OutputTokens }

// Token estimates, for when no provider has counted yet: the agent's
// context size before the first answer, and the echo model, which has no
// tokenizer. They are deliberately simple and approximate: real tokenizers
// average 3.5 to 4.5 bytes per token on English and code, less on other
// scripts.
const (
	// BytesPerToken is the estimate's ratio of text bytes to tokens.
	BytesPerToken = 4
	// ImageTokens is the estimate for one image input. Providers charge by
	// pixels (OpenAI about 765 tokens for a 1024x1024 image at high detail,
	// Anthropic up to about 1,600 for 1.15 megapixels), not by bytes; this
	// is the larger of the two.
	ImageTokens = 1600
	// messageOverheadTokens stands for the role markers and separators each
	// message adds around its content.
	messageOverheadTokens = 4
)

// EstimateText estimates the tokens of text: its bytes / BytesPerToken,
// rounded up.
func EstimateText(text string) int64 {
	return int64((len(text) + BytesPerToken - 1) / BytesPerToken)
}

// EstimateTokens estimates the input tokens of req: its system prompt, its
// messages (text, tool calls and their arguments, tool results, images)
// and its tool definitions. See EstimateText for how rough it is.
func EstimateTokens(req Request) int64 {
	n := EstimateText(req.System)
	for _, m := range req.Messages {
		n += EstimateMessage(m)
	}
	for _, t := range req.Tools {
		n += EstimateText(t.Name) + EstimateText(t.Description) + int64((len(t.Parameters)+BytesPerToken-1)/BytesPerToken)
	}
	return n
}

// EstimateMessage estimates the tokens one message adds to a request.
func EstimateMessage(m Message) int64 {
	n := messageOverheadTokens + EstimateText(m.Text) + int64(len(m.Images))*ImageTokens
	for _, c := range m.ToolCalls {
		n += EstimateText(c.ID) + EstimateText(c.Name) + int64((len(c.Arguments)+BytesPerToken-1)/BytesPerToken)
	}
	if m.ToolCallID != "" {
		n += EstimateText(m.ToolCallID)
	}
	return n
}
