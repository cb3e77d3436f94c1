package echo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/compute"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/echo"
)

func run(t *testing.T, req provider.Request) (provider.Response, []provider.Delta, error) {
	t.Helper()
	var deltas []provider.Delta
	resp, err := echo.New(provider.Config{}).Stream(context.Background(), req, func(d provider.Delta) {
		deltas = append(deltas, d)
	})
	return resp, deltas, err
}

func user(text string) []provider.Message {
	return []provider.Message{{Role: "user", Text: text}}
}

func joined(deltas []provider.Delta, kind string) string {
	var b strings.Builder
	for _, d := range deltas {
		if d.Kind == kind {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func TestEchoStreamsWordByWord(t *testing.T) {
	resp, deltas, err := run(t, provider.Request{Model: "anything", Messages: user("hello there  big\nworld")})
	require.NoError(t, err)
	require.Equal(t, "echo: hello there  big\nworld", resp.Text)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)
	require.Empty(t, resp.ToolCalls)
	require.Equal(t, []provider.Delta{
		{Kind: "text", Text: "echo:"},
		{Kind: "text", Text: " hello"},
		{Kind: "text", Text: " there"},
		{Kind: "text", Text: "  big"},
		{Kind: "text", Text: "\nworld"},
	}, deltas)
	require.Equal(t, resp.Text, joined(deltas, "text"))
}

func TestEchoIsDeterministic(t *testing.T) {
	req := provider.Request{Messages: user("same input")}
	a, da, err := run(t, req)
	require.NoError(t, err)
	b, db, err := run(t, req)
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Equal(t, da, db)
}

func TestEchoAnswersLastUserMessage(t *testing.T) {
	resp, _, err := run(t, provider.Request{Messages: []provider.Message{
		{Role: "user", Text: "first"},
		{Role: "assistant", Text: "echo: first"},
		{Role: "user", Text: "second"},
	}})
	require.NoError(t, err)
	require.Equal(t, "echo: second", resp.Text)
}

func TestEchoCountsImages(t *testing.T) {
	img := provider.Image{MimeType: "image/png", Data: []byte{1}}
	resp, _, err := run(t, provider.Request{Messages: []provider.Message{{Role: "user", Text: "look", Images: []provider.Image{img}}}})
	require.NoError(t, err)
	require.Equal(t, "echo: look (1 image)", resp.Text)

	resp, _, err = run(t, provider.Request{Messages: []provider.Message{{Role: "user", Images: []provider.Image{img, img}}}})
	require.NoError(t, err)
	require.Equal(t, "echo: (2 images)", resp.Text)
}

func TestEchoNothingToEcho(t *testing.T) {
	resp, _, err := run(t, provider.Request{})
	require.NoError(t, err)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)
	require.NotEmpty(t, resp.Text)
}

func TestEchoToolCall(t *testing.T) {
	resp, deltas, err := run(t, provider.Request{Messages: user(`/tool write {"path":"a.txt","content":"hi"}`)})
	require.NoError(t, err)
	require.Equal(t, provider.FinishToolUse, resp.FinishReason)
	require.Equal(t, "calling tool write", resp.Text)
	require.Equal(t, resp.Text, joined(deltas, "text"))
	require.Len(t, resp.ToolCalls, 1)
	require.Equal(t, "call_1", resp.ToolCalls[0].ID)
	require.Equal(t, "write", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"path":"a.txt","content":"hi"}`, string(resp.ToolCalls[0].Arguments))
}

func TestEchoToolCallWithoutArguments(t *testing.T) {
	resp, _, err := run(t, provider.Request{Messages: user("/tool ls")})
	require.NoError(t, err)
	require.Equal(t, provider.FinishToolUse, resp.FinishReason)
	require.Equal(t, "ls", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{}`, string(resp.ToolCalls[0].Arguments))

	// Newline between name and arguments works too.
	resp, _, err = run(t, provider.Request{Messages: user("/tool bash\n{\"command\":\"echo hi\"}")})
	require.NoError(t, err)
	require.Equal(t, "bash", resp.ToolCalls[0].Name)
	require.JSONEq(t, `{"command":"echo hi"}`, string(resp.ToolCalls[0].Arguments))
}

func TestEchoToolCallIDsAreUniqueInASession(t *testing.T) {
	resp, _, err := run(t, provider.Request{Messages: []provider.Message{
		{Role: "user", Text: "/tool ls"},
		{Role: "assistant", Text: "calling tool ls", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "ls", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "call_1", ToolName: "ls", Text: "a.txt"},
		{Role: "assistant", Text: "tool ls returned: a.txt"},
		{Role: "user", Text: "/tool view {\"path\":\"a.txt\"}"},
	}})
	require.NoError(t, err)
	require.Equal(t, "call_2", resp.ToolCalls[0].ID)
}

func TestEchoBadToolArguments(t *testing.T) {
	for _, text := range []string{"/tool write {not json", "/tool write [1]", "/tool"} {
		resp, _, err := run(t, provider.Request{Messages: user(text)})
		require.NoError(t, err, text)
		require.Equal(t, provider.FinishEndTurn, resp.FinishReason, text)
		require.Empty(t, resp.ToolCalls, text)
		require.True(t, strings.HasPrefix(resp.Text, "echo: "), text)
	}
}

func TestEchoAnswersToolResults(t *testing.T) {
	history := []provider.Message{
		{Role: "user", Text: "/tool view {\"path\":\"a.txt\"}"},
		{Role: "assistant", Text: "calling tool view", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "view", Arguments: json.RawMessage(`{"path":"a.txt"}`)}}},
		{Role: "tool", ToolCallID: "call_1", ToolName: "view", Text: "1\thello"},
	}
	resp, deltas, err := run(t, provider.Request{Messages: history})
	require.NoError(t, err)
	require.Equal(t, "tool view returned: 1\thello", resp.Text)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)
	require.Empty(t, resp.ToolCalls)
	require.GreaterOrEqual(t, len(deltas), 3)

	history[2].IsError = true
	history[2].Text = "denied by user"
	resp, _, err = run(t, provider.Request{Messages: history})
	require.NoError(t, err)
	require.Equal(t, "tool view failed: denied by user", resp.Text)
}

func TestEchoSlowHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deltas []provider.Delta
	start := time.Now()
	_, err := echo.New(provider.Config{}).Stream(ctx, provider.Request{Messages: user("/slow 1000 20")}, func(d provider.Delta) {
		deltas = append(deltas, d)
		if len(deltas) == 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	_, isModelErr := provider.AsError(err)
	require.False(t, isModelErr)
	require.Len(t, deltas, 3)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestEchoSlowCompletes(t *testing.T) {
	resp, deltas, err := run(t, provider.Request{Messages: user("/slow 3 1")})
	require.NoError(t, err)
	require.Equal(t, "tick 1 tick 2 tick 3 ", resp.Text)
	require.Len(t, deltas, 3)
	require.Equal(t, provider.FinishEndTurn, resp.FinishReason)
}

func TestEchoCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := echo.New(provider.Config{}).Stream(ctx, provider.Request{Messages: user("hello world")}, func(provider.Delta) { called = true })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, called)
}

func TestEchoFail(t *testing.T) {
	_, _, err := run(t, provider.Request{Messages: user("/fail")})
	pe, ok := provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeError, pe.Code)
	require.False(t, pe.Retryable)

	_, _, err = run(t, provider.Request{Messages: user("/fail model_rate_limited slow down")})
	pe, ok = provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeRateLimited, pe.Code)
	require.True(t, pe.Retryable)
	require.Contains(t, pe.Message, "slow down")

	_, _, err = run(t, provider.Request{Messages: user("/fail model_context_exceeded prompt is too long")})
	pe, ok = provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeContextExceeded, pe.Code)
	require.False(t, pe.Retryable)

	_, _, err = run(t, provider.Request{Messages: user("/fail the disk is on fire")})
	pe, ok = provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeError, pe.Code)
	require.Contains(t, pe.Message, "the disk is on fire")
}

func TestEchoThink(t *testing.T) {
	resp, deltas, err := run(t, provider.Request{Messages: user("/think deep thoughts")})
	require.NoError(t, err)
	require.Equal(t, "deep thoughts", resp.Reasoning)
	require.Equal(t, "echo: deep thoughts", resp.Text)
	require.Equal(t, "deep thoughts", joined(deltas, "reasoning"))
	require.Equal(t, "reasoning", deltas[0].Kind)
}

func TestEchoMaxTokens(t *testing.T) {
	resp, deltas, err := run(t, provider.Request{MaxTokens: 2, Messages: user("one two three four")})
	require.NoError(t, err)
	require.Equal(t, provider.FinishMaxTokens, resp.FinishReason)
	require.Equal(t, "echo: one", resp.Text)
	require.Len(t, deltas, 2)
}

func TestUnknownSlashCommandIsEchoed(t *testing.T) {
	resp, _, err := run(t, provider.Request{Messages: user("/usr/bin/env is a path")})
	require.NoError(t, err)
	require.Equal(t, "echo: /usr/bin/env is a path", resp.Text)
}

// /slow's pauses are a model thinking: with one compute slot, another run
// computes during them, and the slow run still ends.
func TestSlowPausesLetAnotherRunCompute(t *testing.T) {
	slots := compute.New(1)
	h, ctx, err := slots.Hold(t.Context())
	require.NoError(t, err)
	defer h.Done()
	ended := make(chan error, 1)
	go func() {
		_, err := echo.New(provider.Config{}).Stream(ctx, provider.Request{Messages: user("/slow 2 100")}, nil)
		ended <- err
	}()
	wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	other, _, err := slots.Hold(wait)
	require.NoError(t, err, "the slow run kept its slot while it paused")
	other.Done()
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow run did not end")
	}
}
