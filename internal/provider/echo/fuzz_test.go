package echo_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/echo"
)

// Whatever the prompt, the echo model streams deltas that add up to its
// answer, respects MaxTokens, ends with a finish reason of the contract, asks
// for at most one tool call whose arguments are a JSON object, and fails only
// with a provider error of a contract code (or the caller's deadline).
func FuzzEchoCommands(f *testing.F) {
	for _, p := range []string{
		"hello", "", "/tool write {\"path\": \"a.txt\", \"content\": \"hi\"}", "/tool", "/tool x [1]", "/tool x {} extra",
		"/slow 3 0", "/slow -1 x", "/slow 99999999999999999999 0", "/think deep thoughts", "/fail model_rate_limited slow down",
		"/fail", "  /tool  bash  {\"command\": \"ls\"}  ", "/tool\nview\n{\"path\": \"x\"}", "echo\n\n\tspaces ", "/unknown thing",
	} {
		f.Add(p, uint8(0))
	}
	f.Add("one two three four", uint8(2))
	f.Add("/tool view {\"path\": \"x\"}", uint8(1))
	f.Fuzz(func(t *testing.T, prompt string, maxTokens uint8) {
		// A /slow with the default pause outlives this on purpose: that is
		// the cancel path, which must end the stream at once.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var text, reasoning strings.Builder
		deltas := 0
		req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: prompt}}, MaxTokens: int(maxTokens)}
		resp, err := echo.New(provider.Config{}).Stream(ctx, req, func(d provider.Delta) {
			deltas++
			switch d.Kind {
			case provider.DeltaText:
				text.WriteString(d.Text)
			case provider.DeltaReasoning:
				reasoning.WriteString(d.Text)
			default:
				t.Fatalf("%q: delta kind %q", prompt, d.Kind)
			}
		})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return
			}
			pe, ok := provider.AsError(err)
			if !ok {
				t.Fatalf("%q: %v is not a provider error", prompt, err)
			}
			switch pe.Code {
			case provider.CodeAuth, provider.CodeRateLimited, provider.CodeUnavailable, provider.CodeBadRequest, provider.CodeError:
			default:
				t.Fatalf("%q: code %q", prompt, pe.Code)
			}
			return
		}
		if text.String() != resp.Text || reasoning.String() != resp.Reasoning {
			t.Fatalf("%q: deltas %q/%q, answer %q/%q", prompt, text.String(), reasoning.String(), resp.Text, resp.Reasoning)
		}
		if maxTokens > 0 && deltas > int(maxTokens) {
			t.Fatalf("%q: %d deltas over MaxTokens %d", prompt, deltas, maxTokens)
		}
		switch resp.FinishReason {
		case provider.FinishToolUse:
			if len(resp.ToolCalls) != 1 {
				t.Fatalf("%q: tool_use with %d calls", prompt, len(resp.ToolCalls))
			}
			call := resp.ToolCalls[0]
			if call.Name == "" || strings.IndexFunc(call.Name, unicode.IsSpace) >= 0 || call.ID == "" {
				t.Fatalf("%q: call %+v", prompt, call)
			}
			var args map[string]json.RawMessage
			if err := json.Unmarshal(call.Arguments, &args); err != nil || args == nil {
				t.Fatalf("%q: arguments %q are not a JSON object", prompt, call.Arguments)
			}
		case provider.FinishEndTurn, provider.FinishMaxTokens:
			if len(resp.ToolCalls) != 0 {
				t.Fatalf("%q: %s with tool calls", prompt, resp.FinishReason)
			}
		default:
			t.Fatalf("%q: finish reason %q", prompt, resp.FinishReason)
		}
	})
}
