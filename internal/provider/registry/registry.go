// Package registry builds a provider.Provider from a provider.Config. It is
// the one place that knows every implementation; it lives apart from package
// provider because the implementations import provider, and provider must not
// import them back.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

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
	var p provider.Provider
	switch cfg.Type {
	// Each branch checks err itself: returning a nil *T as a provider.Provider
	// would make a non-nil interface.
	case provider.TypeOpenAI, provider.TypeAzure:
		if cfg.Type == provider.TypeAzure && strings.TrimSpace(cfg.BaseURL) == "" {
			return nil, errors.New("azure provider: no endpoint: set AZURE_OPENAI_ENDPOINT (or the provider's base_url) to the resource endpoint, e.g. https://NAME.openai.azure.com")
		}
		op, err := openai.New(cfg, openai.WithHTTPClient(o.httpClient))
		if err != nil {
			return nil, err
		}
		p = op
	case provider.TypeAnthropic:
		ap, err := anthropic.New(cfg, anthropic.WithHTTPClient(o.httpClient))
		if err != nil {
			return nil, err
		}
		p = ap
	case provider.TypeEcho:
		return echo.New(cfg), nil
	default:
		return nil, fmt.Errorf("unknown provider type %q (want openai, azure, anthropic or echo)", cfg.Type)
	}
	if strings.TrimSpace(cfg.APIKey) == "" {
		// No key is fine for a local server (Ollama, llama.cpp); for one that
		// wants a key, the refusal says which variable would have given it.
		p = keyHint{Provider: p, variable: provider.KeyVariable(cfg.Type)}
	}
	return p, nil
}

// keyHint adds to a provider's authentication failures what to set, for a
// provider built without an API key.
type keyHint struct {
	provider.Provider
	variable string
}

func (k keyHint) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
	resp, err := k.Provider.Stream(ctx, req, onDelta)
	if pe, ok := provider.AsError(err); ok && pe.Code == provider.CodeAuth {
		hinted := *pe
		hinted.Message = fmt.Sprintf("%s (no API key was sent: set %s)", pe.Message, k.variable)
		return resp, &hinted
	}
	return resp, err
}
