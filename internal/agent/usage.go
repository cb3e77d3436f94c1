package agent

import (
	"context"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

// contextSize follows how large the conversation is for the model: the
// tokens of what the first covered stored messages of the session weigh in
// a request (system prompt and tool definitions included), as the last
// model request reported them (its input plus its output), or as
// estimated when nothing was reported. Messages recorded after those are
// estimated on top (see estimateStored). Estimates are approximate, about
// provider.BytesPerToken bytes a token: real tokenizers vary with the text.
type contextSize struct {
	known   bool
	tokens  int64
	covered int
}

// answered notes the size of the conversation once req (which covered the
// stored messages up to covered, its answer's message included) was
// answered with resp.
func (c *contextSize) answered(req provider.Request, covered int, resp provider.Response) {
	tokens := resp.Usage.ContextTokens()
	if resp.Usage.IsZero() {
		tokens = provider.EstimateTokens(req) + provider.EstimateMessage(provider.Message{
			Role: provider.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls,
		})
	}
	*c = contextSize{known: true, tokens: tokens, covered: covered}
}

// set notes that the stored messages up to covered weigh tokens in a
// request (a compaction's estimate of its new view).
func (c *contextSize) set(tokens int64, covered int) {
	*c = contextSize{known: true, tokens: tokens, covered: covered}
}

// of returns the size of the conversation msgs (the session's stored
// messages), 0 when nothing is known.
func (c *contextSize) of(msgs []proto.Message) int64 {
	if !c.known {
		return 0
	}
	n := c.tokens
	for _, m := range msgs[min(c.covered, len(msgs)):] {
		n += estimateStored(m)
	}
	return n
}

// contextTokens is the size of the session's conversation as the run
// leaves it, 0 when the run learned nothing of it.
func (x *execution) contextTokens() int64 {
	if !x.size.known {
		return 0
	}
	var n int64
	// Read as the run ends, canceled or not.
	ctx := context.WithoutCancel(x.ctx)
	if err := x.run.History.Read(ctx, x.r.Store, x.run.SessionID, func(msgs []proto.Message) {
		n = x.size.of(msgs)
	}); err != nil {
		x.log.Warn("read history for the context size", "err", err)
		return 0
	}
	return n
}

// earlierAttachmentTokens estimates the note an earlier turn's attachment
// leaves in a request (see userMessage).
const earlierAttachmentTokens = 16

// estimateStored estimates what a stored message adds to a model request,
// as the request shows it (see history): text, tool calls and results,
// a summary, a note per attachment of an earlier turn. Reasoning and an
// empty step are not sent.
func estimateStored(m proto.Message) int64 {
	var n int64
	for _, p := range m.Parts {
		switch p.Type {
		case proto.PartText, proto.PartSummary:
			n += provider.EstimateText(p.Text)
		case proto.PartToolCall:
			n += provider.EstimateText(p.ID) + provider.EstimateText(p.Name) + int64((len(p.Arguments)+provider.BytesPerToken-1)/provider.BytesPerToken)
		case proto.PartToolResult:
			n += provider.EstimateText(p.ToolCallID) + provider.EstimateText(p.Content)
		case proto.PartAttachment:
			n += earlierAttachmentTokens
		}
	}
	if n == 0 {
		return 0
	}
	return n + provider.EstimateMessage(provider.Message{})
}

// answered notes the size of the conversation once req was answered with
// resp, whose message is the last one recorded.
func (x *execution) answered(req provider.Request, resp provider.Response) {
	covered := 0
	_ = x.run.History.Read(context.WithoutCancel(x.ctx), x.r.Store, x.run.SessionID, func(msgs []proto.Message) {
		covered = len(msgs)
	})
	x.size.answered(req, covered, resp)
}
