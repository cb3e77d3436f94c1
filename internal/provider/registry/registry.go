// Package registry builds a provider.Provider from a provider.Config. It is
// the one place that knows every implementation; it lives apart from package
// provider because the implementations import provider, and provider must not
// import them back.
//
// A Registry also owns the HTTP clients the providers use. A provider is
// built for every run, and a client (with its transport and its pool of
// connections) built with it would be one TCP and TLS handshake per run, and
// idle connections nobody closes: at a few hundred runs a second that is
// thousands of descriptors. So the Registry keeps one client per provider
// settings and lends it to every provider it builds for them.
package registry

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/anthropic"
	"github.com/tandem-dev/tandem/internal/provider/echo"
	"github.com/tandem-dev/tandem/internal/provider/openai"
)

// maxClients bounds the clients a Registry keeps. Sessions may bring their
// own provider settings, so the number of distinct base URLs is the
// clients' to choose; past the bound the least recently used client is
// dropped and its idle connections closed.
const maxClients = 32

// Option tunes a Registry.
type Option func(*Registry)

// WithHTTPClient makes every network provider use c (for proxies, custom
// TLS or tests) instead of the clients the Registry keeps; the echo
// provider has no use for it.
func WithHTTPClient(c *http.Client) Option {
	return func(r *Registry) {
		// Its waits, too, must let go of a run's compute slot.
		paused := *c
		paused.Transport = provider.PauseTransport(c.Transport)
		r.fixed = &paused
	}
}

// Registry builds providers. It is safe for concurrent use.
type Registry struct {
	fixed *http.Client // WithHTTPClient's, if any
	// encodings are the messages the providers sent, encoded, so that a
	// session's next step does not encode its whole history again; one
	// cache, bounded, for every provider the Registry builds.
	encodings *provider.EncodeCache

	mu sync.Mutex
	// clients maps settings to their element of lru, whose value is an
	// *entry; the front of lru is the most recently used.
	clients map[clientKey]*list.Element
	lru     list.List
}

// clientKey is what a client is shared by. The API key is not in it: it
// travels in each request's headers, and a connection to a host serves
// any key, so runs with different keys for one server share connections,
// and no key is kept here.
type clientKey struct {
	typ, baseURL, apiVersion string
}

type entry struct {
	key    clientKey
	client *http.Client
}

// New returns a Registry.
func New(opts ...Option) *Registry {
	r := &Registry{clients: make(map[clientKey]*list.Element), encodings: provider.NewEncodeCache(provider.DefaultEncodeCacheBytes)}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Provider builds the provider cfg.Type names: openai (any OpenAI-compatible
// server), azure (Azure OpenAI), anthropic or echo. A config that cannot work
// (unknown type, azure without an endpoint, a base URL that is not http(s))
// is an error here rather than on the first model call. Building one is
// cheap: the connections come from the Registry.
func (r *Registry) Provider(cfg provider.Config) (provider.Provider, error) {
	var p provider.Provider
	switch cfg.Type {
	// Each branch checks err itself: returning a nil *T as a provider.Provider
	// would make a non-nil interface.
	case provider.TypeOpenAI, provider.TypeAzure:
		if cfg.Type == provider.TypeAzure && strings.TrimSpace(cfg.BaseURL) == "" {
			return nil, errors.New("azure provider: no endpoint: set AZURE_OPENAI_ENDPOINT (or the provider's base_url) to the resource endpoint, e.g. https://NAME.openai.azure.com")
		}
		op, err := openai.New(cfg, openai.WithHTTPClient(r.client(cfg)), openai.WithEncodeCache(r.encodings))
		if err != nil {
			return nil, err
		}
		p = op
	case provider.TypeAnthropic:
		ap, err := anthropic.New(cfg, anthropic.WithHTTPClient(r.client(cfg)), anthropic.WithEncodeCache(r.encodings))
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

// client returns the client for cfg's settings, making it on first use.
func (r *Registry) client(cfg provider.Config) *http.Client {
	if r.fixed != nil {
		return r.fixed
	}
	key := clientKey{
		typ:        cfg.Type,
		baseURL:    strings.TrimRight(strings.TrimSpace(cfg.BaseURL), "/"),
		apiVersion: strings.TrimSpace(cfg.AzureAPIVersion),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.clients[key]; ok {
		r.lru.MoveToFront(el)
		return el.Value.(*entry).client
	}
	c := provider.DefaultHTTPClient()
	r.clients[key] = r.lru.PushFront(&entry{key: key, client: c})
	if r.lru.Len() > maxClients {
		old := r.lru.Remove(r.lru.Back()).(*entry)
		delete(r.clients, old.key)
		// Requests in flight on it finish; their connections then idle
		// until the transport's IdleConnTimeout closes them.
		old.client.CloseIdleConnections()
	}
	return c
}

// SweepIdle drops the encodings no request used since the previous sweep
// (see provider.EncodeCache.Sweep); a server calls it every few minutes.
func (r *Registry) SweepIdle() { r.encodings.Sweep() }

// Close closes the idle connections of every client the Registry keeps.
// Providers built before still work (they open new connections); a server
// calls it when it shuts down, so no connection outlives it idle.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for el := r.lru.Front(); el != nil; el = el.Next() {
		el.Value.(*entry).client.CloseIdleConnections()
	}
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
