// Package models knows what Tandem knows about models: each one's context
// window, its output limit and its prices, from a built-in table of
// well-known models (builtin.go) that the configuration file's `models`
// entries override. The agent asks it how large a conversation may grow
// before compaction and what a request cost.
//
// It reads nothing itself: overrides come in as plain data when a Catalog
// is made, so the configuration's format stays the config package's.
package models

import (
	"regexp"
	"strings"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

// Spec is what is known about one model. A zero field is unknown.
type Spec struct {
	// ContextWindow is the most tokens one request may carry, input and
	// output together, as the provider documents it. A request's input
	// must leave room for its output: OpenAI keeps MaxOutputTokens free
	// (gpt-5: 400,000 - 128,000 = 272,000 tokens of input), Anthropic the
	// request's max_tokens.
	ContextWindow int64
	// MaxOutputTokens is the most tokens the model writes in one answer.
	MaxOutputTokens int64
	// Prices in US dollars per million tokens; nil is unknown. A cache
	// price left unknown where the input price is known is charged at
	// the input price (an upper bound: no provider charges more).
	InputPrice      *float64
	OutputPrice     *float64
	CacheReadPrice  *float64
	CacheWritePrice *float64
}

// Known reports whether anything is known about the model.
func (s Spec) Known() bool { return s != Spec{} }

// Cost prices u in US dollars: nil when the input or output price is
// unknown. Cached input is priced at the cache prices (see Spec), the rest
// of the input at InputPrice. It does not know long-context tiers
// (Anthropic's and OpenAI's higher prices past 200,000 or 272,000 input
// tokens), which the built-in windows stay below.
func (s Spec) Cost(u provider.Usage) *float64 {
	if s.InputPrice == nil || s.OutputPrice == nil {
		return nil
	}
	in, out := *s.InputPrice, *s.OutputPrice
	read, write := in, in
	if s.CacheReadPrice != nil {
		read = *s.CacheReadPrice
	}
	if s.CacheWritePrice != nil {
		write = *s.CacheWritePrice
	}
	uncached := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	usd := (float64(uncached)*in + float64(u.CacheReadTokens)*read +
		float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*out) / 1e6
	return &usd
}

// Usage is u on the wire, with its cost when s prices it.
func (s Spec) Usage(u provider.Usage) proto.Usage {
	return proto.Usage{
		InputTokens:      u.InputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens,
		CostUSD:          s.Cost(u),
	}
}

// merge returns s with the fields o knows replacing its own.
func (s Spec) merge(o Spec) Spec {
	if o.ContextWindow > 0 {
		s.ContextWindow = o.ContextWindow
	}
	if o.MaxOutputTokens > 0 {
		s.MaxOutputTokens = o.MaxOutputTokens
	}
	if o.InputPrice != nil {
		s.InputPrice = o.InputPrice
	}
	if o.OutputPrice != nil {
		s.OutputPrice = o.OutputPrice
	}
	if o.CacheReadPrice != nil {
		s.CacheReadPrice = o.CacheReadPrice
	}
	if o.CacheWritePrice != nil {
		s.CacheWritePrice = o.CacheWritePrice
	}
	return s
}

// Catalog answers what is known about a model string. It is immutable and
// safe for concurrent use.
type Catalog struct {
	parent    *Catalog // nil: the built-in table
	overrides map[string]Spec
}

// New returns the built-in table overridden by overrides, keyed by model
// string as a session names it ("openai/gpt-4.1", "work/my-model",
// "echo"): the configuration file's `models`. An override replaces only
// the fields it sets, so {"context_window": 50000} for a well-known model
// keeps its prices.
func New(overrides map[string]Spec) *Catalog {
	return &Catalog{overrides: clean(overrides)}
}

// With returns a catalog that layers overrides over c's, key by key and
// field by field: a workspace's configuration over the server's.
func (c *Catalog) With(overrides map[string]Spec) *Catalog {
	if len(overrides) == 0 {
		return c
	}
	return &Catalog{parent: c, overrides: clean(overrides)}
}

func clean(overrides map[string]Spec) map[string]Spec {
	out := make(map[string]Spec, len(overrides))
	for k, v := range overrides {
		out[strings.TrimSpace(k)] = v
	}
	return out
}

// Lookup returns what is known about model, a session's model string
// ("PROVIDER/MODEL", or "echo"), and whether anything is. The built-in
// table is searched by the model's name whatever its provider (so
// "azure/gpt-4.1", a deployment named after its model, or a configured
// provider "work/claude-sonnet-4-5" find their model), also without a date
// suffix ("gpt-4.1-2025-04-14", "claude-sonnet-4-5-20250929") or a
// "-latest"; overrides are matched on the whole model string, and for
// echo models on "echo" too.
func (c *Catalog) Lookup(model string) (Spec, bool) {
	model = strings.TrimSpace(model)
	s := builtinSpec(model)
	for _, layer := range c.layers() {
		if o, ok := layer[echoKey(model)]; ok && echoKey(model) != model {
			s = s.merge(o)
		}
		if o, ok := layer[model]; ok {
			s = s.merge(o)
		}
	}
	return s, s.Known()
}

// Cost prices u for model: nil when its prices are unknown.
func (c *Catalog) Cost(model string, u provider.Usage) *float64 {
	s, _ := c.Lookup(model)
	return s.Cost(u)
}

// Usage is u on the wire, with its cost when model's prices are known.
func (c *Catalog) Usage(model string, u provider.Usage) proto.Usage {
	s, _ := c.Lookup(model)
	return s.Usage(u)
}

// Window returns model's context window, and false when it is unknown.
func (c *Catalog) Window(model string) (int64, bool) {
	s, _ := c.Lookup(model)
	return s.ContextWindow, s.ContextWindow > 0
}

// layers returns the override maps from the bottom (the server's) up.
func (c *Catalog) layers() []map[string]Spec {
	var out []map[string]Spec
	for l := c; l != nil; l = l.parent {
		out = append(out, l.overrides)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// echoKey is "echo" for every echo model ("echo", "echo/small"), so one
// override sizes them all; other models are their own key.
func echoKey(model string) string {
	if typ, _, _ := strings.Cut(model, "/"); typ == provider.TypeEcho {
		return provider.TypeEcho
	}
	return model
}

// dated matches the date suffixes providers pin snapshots with:
// -2025-04-14 (OpenAI) and -20250929 (Anthropic).
var dated = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// builtinSpec finds model in the built-in table (see Lookup).
func builtinSpec(model string) Spec {
	typ, name, _ := strings.Cut(model, "/")
	if typ == provider.TypeEcho {
		return builtin[provider.TypeEcho]
	}
	candidates := []string{name}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		// A router's own prefix: openrouter/openai/gpt-4.1.
		candidates = append(candidates, name[i+1:])
	}
	for _, n := range candidates {
		n = strings.ToLower(n)
		for _, try := range []string{n, strings.TrimSuffix(n, "-latest"), dated.ReplaceAllString(n, "")} {
			if s, ok := builtin[try]; ok {
				return s
			}
		}
	}
	return Spec{}
}
