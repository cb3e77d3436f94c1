package proto

// Usage is what model requests consumed (contract section 4): an assistant
// message's `usage` is its model request's, run.completed's the sum over the
// run's requests, a session's the sum over its runs.
//
// The counts mean the same whatever the provider: InputTokens is every
// token the model read, cached or not, CacheReadTokens and
// CacheWriteTokens the part of them read from and written to the prompt
// cache; OutputTokens every token it wrote, ReasoningTokens the part of
// them spent reasoning. (OpenAI reports input that way; Anthropic reports
// cache reads and writes apart from input_tokens, and Tandem adds them in.)
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	// CostUSD is the cost in US dollars when the model's prices are known
	// (a built-in table, or the config file's models), absent otherwise.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Add returns the sum of u and v. The cost is the sum of the costs that
// are known: a total over requests of which some were priced and some not
// (a session that switched to an unknown model) counts what it can, and
// is absent only when none was priced.
func (u Usage) Add(v Usage) Usage {
	sum := Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
	switch {
	case u.CostUSD != nil && v.CostUSD != nil:
		c := *u.CostUSD + *v.CostUSD
		sum.CostUSD = &c
	case u.CostUSD != nil:
		c := *u.CostUSD
		sum.CostUSD = &c
	case v.CostUSD != nil:
		c := *v.CostUSD
		sum.CostUSD = &c
	}
	return sum
}
