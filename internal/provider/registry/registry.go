// Package registry builds a provider.Provider from a provider.Config. It is
// the one place that knows every implementation; it lives apart from package
// provider because the implementations import provider, and provider must not
// import them back.
package registry

import (
	"fmt"
	"net/http"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/anthropic"
	"github.com/tandem-dev/tandem/internal/provider/echo"
	"github.com/tandem-dev/tandem/internal/provider/openai"
)

// Option tunes the providers New builds.
type Option func(*options)

type options struct {
	httpClient *http.Client
}

// WithHTTPClient makes network providers use c (for proxies, custom TLS or
// tests); the echo provider has no use for it.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// New builds the provider cfg.Type names: openai (any OpenAI-compatible
// server), azure (Azure OpenAI), anthropic or echo. A config that cannot work
// (unknown type, azure without an endpoint, a base URL that is not http(s))
// is an error here rather than on the first model call.
func New(cfg provider.Config, opts ...Option) (provider.Provider, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	switch cfg.Type {
	// Each branch checks err itself: returning a nil *T as a provider.Provider
	// would make a non-nil interface.
	case provider.TypeOpenAI, provider.TypeAzure:
		p, err := openai.New(cfg, openai.WithHTTPClient(o.httpClient))
		if err != nil {
			return nil, err
		}
		return p, nil
	case provider.TypeAnthropic:
		p, err := anthropic.New(cfg, anthropic.WithHTTPClient(o.httpClient))
		if err != nil {
			return nil, err
		}
		return p, nil
	case provider.TypeEcho:
		return echo.New(cfg), nil
	default:
		return nil, fmt.Errorf("unknown provider type %q (want openai, azure, anthropic or echo)", cfg.Type)
	}
}
