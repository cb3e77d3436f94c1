package openai

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

// stopStream answers every request with an empty finished answer.
func stopStream(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
}

// sdkBody is the body the SDK itself makes of req: what the server received
// before the provider encoded the history through its cache.
func sdkBody(t *testing.T, p *Provider, srv *providertest.Server, req provider.Request) string {
	t.Helper()
	params, err := buildParams(req)
	require.NoError(t, err)
	var opts []option.RequestOption
	if p.azure {
		opts = append(opts, option.WithBaseURL(azureDeploymentURL(p.baseURL, req.Model)))
	}
	stream := p.chat.NewStreaming(context.Background(), params, opts...)
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	return srv.Last(t).RawBody
}

// TestCachedBodyIsTheSDKs checks that the model receives, byte for byte,
// the request the SDK would have sent (its stream key first), at every step of a growing
// conversation, with the cache cold, warm, evicting all the time, or absent.
func TestCachedBodyIsTheSDKs(t *testing.T) {
	srv := providertest.New(t, stopStream)
	for _, tc := range []struct {
		name  string
		cache *provider.EncodeCache
	}{
		{"none", nil},
		{"large", provider.NewEncodeCache(provider.DefaultEncodeCacheBytes)},
		{"evicting", provider.NewEncodeCache(16 << 10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, typ := range []string{provider.TypeOpenAI, provider.TypeAzure} {
				p, err := New(provider.Config{Type: typ, BaseURL: srv.URL, APIKey: "k"}, WithEncodeCache(tc.cache))
				require.NoError(t, err)
				for n := 0; n <= 60; n++ {
					req := provider.Request{
						Model:           "gpt-4.1",
						ReasoningEffort: "high",
						System:          "You are Tandem. <rules> & \"quotes\"",
						Messages:        providertest.Conversation(n),
						Tools: []provider.Tool{
							{Name: "view", Description: "Read a file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
							{Name: "ls"},
						},
						MaxTokens: n % 2 * 1000,
					}
					if n%5 == 0 {
						req.System = ""
					}
					// Twice: the second request finds every message in the cache.
					for range 2 {
						_, err := p.Stream(context.Background(), req, nil)
						require.NoError(t, err)
						got := srv.Last(t).RawBody
						require.Equal(t, providertest.StreamFirst(t, sdkBody(t, p, srv, req)), got, "%s, %d messages", typ, n)
					}
				}
			}
		})
	}
}

// BenchmarkRequestBody: see providertest.BenchmarkRequestBody.
func BenchmarkRequestBody(b *testing.B) {
	providertest.BenchmarkRequestBody(b, "gpt-4.1", func(req provider.Request) error {
		params, err := buildParams(req)
		if err != nil {
			return err
		}
		_, err = params.MarshalJSON()
		return err
	}, func() (func(provider.Request) error, error) {
		p, err := New(provider.Config{Type: provider.TypeOpenAI, BaseURL: "http://127.0.0.1:1"}, WithEncodeCache(provider.NewEncodeCache(provider.DefaultEncodeCacheBytes)))
		if err != nil {
			return nil, err
		}
		return func(req provider.Request) error {
			_, err := p.body(req)
			return err
		}, nil
	})
}
