package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

// stopStream answers every request with an empty finished answer.
func stopStream(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":1}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
	}
}

// sdkBody is the body the SDK itself makes of req: what the server received
// before the provider encoded the history through its cache.
func sdkBody(t *testing.T, p *Provider, srv *providertest.Server, req provider.Request) string {
	t.Helper()
	params, err := buildParams(req)
	require.NoError(t, err)
	stream := p.messages.NewStreaming(context.Background(), params)
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	return srv.Last(t).RawBody
}

// TestCachedBodyIsTheSDKs checks that the model receives, byte for byte,
// the request the SDK would have sent, at every step of a growing
// conversation (adjacent turns of one role merged, empty ones dropped),
// with the cache cold, warm, evicting all the time, or absent.
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
			p, err := New(provider.Config{Type: provider.TypeAnthropic, BaseURL: srv.URL, APIKey: "k"}, WithEncodeCache(tc.cache))
			require.NoError(t, err)
			for n := 0; n <= 60; n++ {
				req := provider.Request{
					Model:    "claude-sonnet-4-5",
					System:   "You are Tandem. <rules> & \"quotes\"",
					Messages: providertest.Conversation(n),
					Tools: []provider.Tool{
						{Name: "view", Description: "Read a file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
						{Name: "ls"},
					},
					MaxTokens: n % 2 * 1000,
				}
				if n%5 == 0 {
					req.System = ""
				}
				if n == 7 {
					// Nothing but empty messages: no turn at all.
					req.Messages = []provider.Message{{Role: provider.RoleUser}, {Role: provider.RoleAssistant}}
				}
				// Twice: the second request finds every message in the cache.
				for range 2 {
					_, err := p.Stream(context.Background(), req, nil)
					require.NoError(t, err)
					got := srv.Last(t).RawBody
					require.Equal(t, providertest.StreamFirst(t, sdkBody(t, p, srv, req)), got, "%d messages", n)
				}
			}
		})
	}
}

// BenchmarkRequestBody: see providertest.BenchmarkRequestBody.
func BenchmarkRequestBody(b *testing.B) {
	providertest.BenchmarkRequestBody(b, "claude-sonnet-4-5", func(req provider.Request) error {
		params, err := buildParams(req)
		if err != nil {
			return err
		}
		_, err = params.MarshalJSON()
		return err
	}, func() (func(provider.Request) error, error) {
		p, err := New(provider.Config{Type: provider.TypeAnthropic, BaseURL: "http://127.0.0.1:1"}, WithEncodeCache(provider.NewEncodeCache(provider.DefaultEncodeCacheBytes)))
		if err != nil {
			return nil, err
		}
		return func(req provider.Request) error {
			_, err := p.body(req)
			return err
		}, nil
	})
}
