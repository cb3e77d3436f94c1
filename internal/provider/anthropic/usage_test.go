package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

// cachedStart is a message_start whose prompt was partly served from the
// cache and partly written to it.
func cachedStart() ev {
	return ev{"message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,` +
		`"usage":{"input_tokens":50,"cache_creation_input_tokens":300,"cache_read_input_tokens":2000,"output_tokens":1}}}`}
}

func TestUsageFromStartAndDelta(t *testing.T) {
	srv := providertest.New(t, sse(
		cachedStart(),
		blockStart(0, `{"type":"text","text":""}`),
		textDelta(0, "Hi"),
		blockStop(0),
		ev{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},` +
			`"usage":{"output_tokens":420,"output_tokens_details":{"thinking_tokens":100}}}`},
		messageStop(),
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4-5", Messages: userHi()}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Usage{
		InputTokens:      2350, // 50 uncached + 2000 read + 300 written
		OutputTokens:     420,  // message_delta's cumulative count wins over message_start's
		CacheReadTokens:  2000,
		CacheWriteTokens: 300,
		ReasoningTokens:  100,
	}, resp.Usage)
}

func TestUsageDeltaUpdatesInput(t *testing.T) {
	// message_delta may restate the input counts; its totals win.
	srv := providertest.New(t, sse(
		cachedStart(),
		blockStart(0, `{"type":"text","text":""}`),
		textDelta(0, "Hi"),
		blockStop(0),
		ev{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},` +
			`"usage":{"input_tokens":60,"cache_creation_input_tokens":300,"cache_read_input_tokens":2000,"output_tokens":7}}`},
		messageStop(),
	))
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4-5", Messages: userHi()}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2360, resp.Usage.InputTokens)
	require.EqualValues(t, 7, resp.Usage.OutputTokens)
}

func TestUsageOfACutStream(t *testing.T) {
	// The input counted at message_start is billed though the answer broke.
	srv := providertest.New(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeEvents(w, []ev{cachedStart(), blockStart(0, `{"type":"text","text":""}`), textDelta(0, "Hel")})
	})
	p := newProvider(t, provider.Config{BaseURL: srv.URL, APIKey: testKey})
	resp, err := p.Stream(context.Background(), provider.Request{Model: "claude-sonnet-4-5", Messages: userHi()}, nil)
	require.Error(t, err)
	require.EqualValues(t, 2350, resp.Usage.InputTokens)
	require.Empty(t, resp.Text, "a failed step returns nothing but its usage")
}
