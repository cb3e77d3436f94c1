// Package echo is Tandem's built-in offline model. It needs no network and no
// key, and answers deterministically, so the whole pipeline (streaming,
// tools, permissions, cancel, errors) can be tried with curl on a fresh
// machine and driven by tests. Select it with the model string "echo" (or
// "echo/anything": the name after the slash is ignored).
//
// It looks at the last user message and answers:
//
//   - plain text: "echo: <text>", streamed word by word (one delta per word,
//     spaces kept), then finish end_turn. Attached images are counted:
//     "echo: look (1 image)".
//   - "/tool NAME [JSON-OBJECT]": a short text ("calling tool NAME") and one
//     tool call to NAME with that object as arguments ({} when omitted), then
//     finish tool_use. Example:
//     /tool write {"path":"a.txt","content":"hi"}
//     The call id is "call_N", N counting the tool calls already in the
//     conversation, so it is deterministic and unique within a session.
//     NAME need not be among the offered tools: that is how a test reaches the
//     agent's unknown-tool path.
//   - "/slow N [MS]": N text deltas ("tick 1 ", "tick 2 ", ...) with a pause of
//     MS milliseconds (default 100) before each, then end_turn. Cancel the run
//     meanwhile to see the cancel path; the stream stops at once.
//   - "/think TEXT": streams TEXT as reasoning deltas, then "echo: TEXT" as text.
//   - "/fail [CODE] [MESSAGE]": fails the step with a *provider.Error of CODE
//     (default model_error; any contract code, e.g. model_rate_limited, which
//     is Retryable like a real 429) and MESSAGE.
//
// When the conversation ends with tool results (the agent ran the call), it
// answers "tool NAME returned: <content>" or, for an error result,
// "tool NAME failed: <content>", one line per result, and ends the turn.
//
// Request.MaxTokens, when set, caps the number of deltas; a longer answer is
// cut there with finish max_tokens. Everything honours ctx: a canceled ctx
// returns ctx.Err() (wrapped) before the next delta.
//
// Usage: echo has no tokenizer, so it reports the estimates of package
// provider (bytes / 4, rounded up): InputTokens is EstimateTokens of the
// whole request (system prompt, messages, tool definitions), OutputTokens
// EstimateText of what it answered (text, reasoning, tool call names and
// arguments), ReasoningTokens that of the reasoning alone. They grow with
// the conversation as a real model's would, so usage accounting and
// compaction can be tried offline. A canceled step reports what it counted
// up to the cancel; /fail reports nothing, like a refused HTTP request.
package echo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/tandem-dev/tandem/internal/compute"
	"github.com/tandem-dev/tandem/internal/provider"
)

const (
	name = provider.TypeEcho
	// defaultSlowPause is /slow's pause per delta: slow enough for a cancel
	// test to land in the middle, fast enough to keep tests short.
	defaultSlowPause = 100 * time.Millisecond
	// maxSlowDeltas bounds /slow so a typo cannot park a run for hours.
	maxSlowDeltas = 100000
)

// Provider is the echo model. Its zero value is ready to use; it has no state
// and is safe for concurrent use.
type Provider struct{}

var _ provider.Provider = (*Provider)(nil)

// New returns the echo provider; cfg is accepted for symmetry with the other
// providers and ignored.
func New(provider.Config) *Provider { return &Provider{} }

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
	if onDelta == nil {
		onDelta = func(provider.Delta) {}
	}
	if ctx.Err() != nil {
		return provider.Response{}, provider.CanceledError(ctx, name)
	}
	s := &streamer{ctx: ctx, onDelta: onDelta, max: req.MaxTokens, input: provider.EstimateTokens(req)}

	if results := trailingToolResults(req.Messages); len(results) > 0 {
		var b strings.Builder
		for i, r := range results {
			if i > 0 {
				b.WriteString("\n")
			}
			verb := "returned"
			if r.IsError {
				verb = "failed"
			}
			fmt.Fprintf(&b, "tool %s %s: %s", r.ToolName, verb, r.Text)
		}
		return s.finish(s.emit(provider.DeltaText, b.String(), 0))
	}

	user, ok := lastUser(req.Messages)
	if !ok {
		return s.finish(s.emit(provider.DeltaText, "echo: (nothing to echo)", 0))
	}
	text := strings.TrimSpace(user.Text)
	cmd, rest := command(text)
	switch cmd {
	case "/tool":
		return s.toolCall(rest, countToolCalls(req.Messages)+1)
	case "/slow":
		return s.slow(rest)
	case "/think":
		if err := s.emit(provider.DeltaReasoning, rest, 0); err != nil {
			return s.finish(err)
		}
		return s.finish(s.emit(provider.DeltaText, "echo: "+rest, 0))
	case "/fail":
		return provider.Response{}, failure(rest)
	}
	answer := "echo: " + user.Text
	if n := len(user.Images); n > 0 {
		noun := "images"
		if n == 1 {
			noun = "image"
		}
		answer = strings.TrimRight(answer, " ") + fmt.Sprintf(" (%d %s)", n, noun)
	}
	return s.finish(s.emit(provider.DeltaText, answer, 0))
}

// streamer emits deltas and keeps what it emitted for the final Response.
type streamer struct {
	ctx       context.Context
	onDelta   func(provider.Delta)
	max       int // MaxTokens: 0 is no cap
	input     int64
	count     int // deltas emitted so far
	truncated bool
	text      strings.Builder
	reasoning strings.Builder
}

// emit streams s in word-sized pieces, pausing before each when pause > 0.
func (s *streamer) emit(kind, text string, pause time.Duration) error {
	for _, piece := range words(text) {
		if err := s.delta(kind, piece, pause); err != nil {
			return err
		}
		if s.truncated {
			return nil
		}
	}
	return nil
}

func (s *streamer) delta(kind, piece string, pause time.Duration) error {
	if s.max > 0 && s.count >= s.max {
		s.truncated = true
		return nil
	}
	if pause > 0 {
		// A model thinking: the run's compute slot may go to another.
		h := compute.From(s.ctx)
		h.BeginWait()
		t := time.NewTimer(pause)
		select {
		case <-s.ctx.Done():
			t.Stop()
			h.EndWait()
			return provider.CanceledError(s.ctx, name)
		case <-t.C:
		}
		h.EndWait()
	} else if s.ctx.Err() != nil {
		return provider.CanceledError(s.ctx, name)
	}
	s.count++
	if kind == provider.DeltaReasoning {
		s.reasoning.WriteString(piece)
	} else {
		s.text.WriteString(piece)
	}
	s.onDelta(provider.Delta{Kind: kind, Text: piece})
	return nil
}

// usage estimates what the step consumed so far (see the package comment).
func (s *streamer) usage() provider.Usage {
	reasoning := provider.EstimateText(s.reasoning.String())
	return provider.Usage{
		InputTokens:     s.input,
		OutputTokens:    provider.EstimateText(s.text.String()) + reasoning,
		ReasoningTokens: reasoning,
	}
}

// finish turns what was streamed into the Response of a text-only step.
// On an error it holds only the usage.
func (s *streamer) finish(err error) (provider.Response, error) {
	if err != nil {
		return provider.Response{Usage: s.usage()}, err
	}
	resp := provider.Response{Text: s.text.String(), Reasoning: s.reasoning.String(), FinishReason: provider.FinishEndTurn, Usage: s.usage()}
	if s.truncated {
		resp.FinishReason = provider.FinishMaxTokens
	}
	return resp, nil
}

func (s *streamer) toolCall(rest string, n int) (provider.Response, error) {
	toolName, argText := splitWord(rest)
	if toolName == "" {
		return s.finish(s.emit(provider.DeltaText, `echo: usage: /tool NAME {"arg":"value"}`, 0))
	}
	args := json.RawMessage("{}")
	if argText != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(argText), &obj); err != nil || obj == nil {
			return s.finish(s.emit(provider.DeltaText, "echo: the arguments of /tool must be one JSON object: "+argText, 0))
		}
		args = json.RawMessage(argText)
	}
	if err := s.emit(provider.DeltaText, "calling tool "+toolName, 0); err != nil {
		return s.finish(err)
	}
	resp, err := s.finish(nil)
	if err != nil || s.truncated {
		return resp, err
	}
	call := provider.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: toolName, Arguments: args}
	resp.ToolCalls = []provider.ToolCall{call}
	resp.FinishReason = provider.FinishToolUse
	resp.Usage.OutputTokens += provider.EstimateText(call.Name) + provider.EstimateText(string(call.Arguments))
	return resp, nil
}

func (s *streamer) slow(rest string) (provider.Response, error) {
	fields := strings.Fields(rest)
	n, pause := 10, defaultSlowPause
	if len(fields) > 0 {
		if v, err := strconv.Atoi(fields[0]); err == nil && v > 0 {
			n = min(v, maxSlowDeltas)
		}
	}
	if len(fields) > 1 {
		if v, err := strconv.Atoi(fields[1]); err == nil && v >= 0 {
			pause = time.Duration(v) * time.Millisecond
		}
	}
	for i := 1; i <= n && !s.truncated; i++ {
		if err := s.delta(provider.DeltaText, fmt.Sprintf("tick %d ", i), pause); err != nil {
			return s.finish(err)
		}
	}
	return s.finish(nil)
}

// failure builds the error /fail asks for.
func failure(rest string) *provider.Error {
	code, msg := provider.CodeError, strings.TrimSpace(rest)
	if first, after := splitWord(msg); isCode(first) {
		code, msg = first, after
	}
	if msg == "" {
		msg = "asked to fail"
	}
	retryable := code == provider.CodeRateLimited || code == provider.CodeUnavailable
	return &provider.Error{Code: code, Message: name + ": " + msg, Retryable: retryable}
}

func isCode(s string) bool {
	switch s {
	case provider.CodeAuth, provider.CodeRateLimited, provider.CodeUnavailable, provider.CodeBadRequest, provider.CodeError,
		provider.CodeContextExceeded:
		return true
	}
	return false
}

// command splits "/cmd rest" into its parts; text without a known command
// yields "".
func command(text string) (cmd, rest string) {
	if !strings.HasPrefix(text, "/") {
		return "", ""
	}
	cmd, rest = splitWord(text)
	switch cmd {
	case "/tool", "/slow", "/think", "/fail":
		return cmd, rest
	}
	return "", ""
}

// splitWord splits text at its first whitespace (space or newline alike) and
// trims the remainder.
func splitWord(text string) (word, rest string) {
	i := strings.IndexFunc(text, unicode.IsSpace)
	if i < 0 {
		return text, ""
	}
	return text[:i], strings.TrimSpace(text[i:])
}

// words splits text into pieces that concatenate back to text exactly, each
// a run of whitespace followed by a word, so a client joining the deltas sees
// the original spacing and newlines.
func words(text string) []string {
	var out []string
	start := 0
	inWord := false
	for i, r := range text {
		if unicode.IsSpace(r) {
			if inWord && i > start {
				out = append(out, text[start:i])
				start = i
			}
			inWord = false
		} else {
			inWord = true
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// trailingToolResults returns the tool messages at the end of the conversation.
func trailingToolResults(msgs []provider.Message) []provider.Message {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role == provider.RoleTool {
		i--
	}
	return msgs[i:]
}

func lastUser(msgs []provider.Message) (provider.Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser {
			return msgs[i], true
		}
	}
	return provider.Message{}, false
}

func countToolCalls(msgs []provider.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	return n
}
