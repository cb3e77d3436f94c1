package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/anthropic"
	"github.com/tandem-dev/tandem/internal/provider/echo"
	"github.com/tandem-dev/tandem/internal/provider/openai"
	"github.com/tandem-dev/tandem/internal/provider/registry"
)

func TestProviderPicksImplementation(t *testing.T) {
	p, err := registry.New().Provider(provider.Config{Type: "openai", APIKey: "k"})
	require.NoError(t, err)
	require.IsType(t, &openai.Provider{}, p)

	p, err = registry.New().Provider(provider.Config{Type: "azure", BaseURL: "https://r.openai.azure.com", APIKey: "k"})
	require.NoError(t, err)
	require.IsType(t, &openai.Provider{}, p)

	p, err = registry.New().Provider(provider.Config{Type: "anthropic", APIKey: "k"})
	require.NoError(t, err)
	require.IsType(t, &anthropic.Provider{}, p)

	p, err = registry.New().Provider(provider.Config{Type: "echo"})
	require.NoError(t, err)
	require.IsType(t, &echo.Provider{}, p)
}

func TestProviderRejectsBadConfigs(t *testing.T) {
	for _, cfg := range []provider.Config{
		{Type: "mistral"},
		{Type: ""},
		{Type: "azure", APIKey: "sk-secret-azure"}, // no endpoint
		{Type: "openai", BaseURL: "ftp://x"},
		{Type: "anthropic", BaseURL: "not a url"},
	} {
		p, err := registry.New().Provider(cfg)
		require.Error(t, err, cfg.String())
		require.Nil(t, p, "a failed Provider must return a nil interface, not a nil pointer in one")
		require.NotContains(t, err.Error(), "sk-secret-azure")
	}
}

func TestWithHTTPClientIsUsed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()

	used := false
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	p, err := registry.New(registry.WithHTTPClient(client)).Provider(provider.Config{Type: "openai", BaseURL: srv.URL})
	require.NoError(t, err)
	resp, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Text)
	require.True(t, used)
}

func TestEchoThroughRegistry(t *testing.T) {
	typ, name, err := provider.Resolve("echo")
	require.NoError(t, err)
	p, err := registry.New().Provider(provider.FromEnv(typ, func(string) string { return "" }))
	require.NoError(t, err)
	resp, err := p.Stream(context.Background(), provider.Request{Model: name, Messages: []provider.Message{{Role: "user", Text: "ping pong"}}}, nil)
	require.NoError(t, err)
	require.Equal(t, "echo: ping pong", resp.Text)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A provider built without an API key whose server refuses the request says
// which variable to set; a provider with a key is left alone.
func TestMissingKeyNamesTheVariable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"missing credentials","type":"authentication_error"}}`)
	}))
	defer srv.Close()
	req := provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}}}
	for typ, variable := range map[string]string{"openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"} {
		p, err := registry.New().Provider(provider.Config{Type: typ, BaseURL: srv.URL})
		require.NoError(t, err, typ)
		_, err = p.Stream(context.Background(), req, nil)
		pe, ok := provider.AsError(err)
		require.True(t, ok, "%s: %v", typ, err)
		require.Equal(t, provider.CodeAuth, pe.Code, typ)
		require.Contains(t, pe.Message, "set "+variable, typ)

		p, err = registry.New().Provider(provider.Config{Type: typ, BaseURL: srv.URL, APIKey: "k"})
		require.NoError(t, err, typ)
		_, err = p.Stream(context.Background(), req, nil)
		pe, ok = provider.AsError(err)
		require.True(t, ok, "%s: %v", typ, err)
		require.NotContains(t, pe.Message, variable, "%s: a key was sent, it was wrong", typ)
	}

	_, err := registry.New().Provider(provider.Config{Type: "azure"})
	require.ErrorContains(t, err, "AZURE_OPENAI_ENDPOINT")
}
