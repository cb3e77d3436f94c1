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
// the request the SDK would have sent, at every step of a growing
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
						require.Equal(t, sdkBody(t, p, srv, req), got, "%s, %d messages", typ, n)
					}
				}
			}
		})
	}
}

// BenchmarkRequestBody is the cost of one model step's request body as the
// history grows: "sdk" encodes it all through the SDK, as every step did,
// "cached" takes the messages sent before from the cache and encodes the
// newest only (each iteration's last message is new).
func BenchmarkRequestBody(b *testing.B) {
	for _, n := range []int{10, 100, 500, 1000} {
		history := providertest.Conversation(n)
		base := provider.Request{Model: "gpt-4.1", System: "You are Tandem.", Tools: []provider.Tool{{Name: "view"}, {Name: "ls"}}}
		b.Run(fmt.Sprintf("sdk/messages=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				req := base
				req.Messages = append(history[:n-1:n-1], provider.Message{Role: provider.RoleUser, Text: fmt.Sprint("new ", i)})
				i++
				params, err := buildParams(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := params.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("cached/messages=%d", n), func(b *testing.B) {
			p, err := New(provider.Config{Type: provider.TypeOpenAI, BaseURL: "http://127.0.0.1:1"}, WithEncodeCache(provider.NewEncodeCache(provider.DefaultEncodeCacheBytes)))
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				req := base
				req.Messages = append(history[:n-1:n-1], provider.Message{Role: provider.RoleUser, Text: fmt.Sprint("new ", i)})
				i++
				if _, err := p.body(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
