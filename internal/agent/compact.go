package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

// Compaction (contract section 4). When a request would carry more than
// the session's threshold of the model's window, or the provider answers
// that a request is over it, the run asks the model for a summary of the
// conversation so far and records it as an assistant message whose only
// part is {type: summary, text, through_message_id}. Requests then carry
// the system prompt, the summary, and every message recorded after
// through_message_id (history, compactedView); the session's history
// keeps every message.
//
// Sizes are estimates (about provider.BytesPerToken bytes a token, see
// contextSize), so the threshold is approximate; a provider that still
// finds a request too long makes the run compact and retry once.

// Keep policies of compact: how much of the newest conversation stays
// verbatim after the summary.
const (
	// keepNone summarizes everything (POST .../compact).
	keepNone = 0
	// keepAuto keeps the newest messages up to a fifth of the request
	// that passed the threshold, starting at a user or assistant message
	// so no tool result is cut from its call.
	keepAuto = 5
	// keepAfterRefusal keeps a tenth of the request the provider found
	// too long: its window unknown (or smaller than configured), the
	// request sent again must be well below the one refused.
	keepAfterRefusal = 10
)

// Bounds of a compaction.
const (
	// summaryMaxTokens bounds the summary the model writes (less when
	// the model's output limit is lower).
	summaryMaxTokens = 4096
	// maxSummaryPasses bounds the summary requests of one compaction: a
	// conversation too long for one is summarized in parts, each pass
	// folding the next part into the summary so far. Past this many
	// parts, the oldest are left out (the summary says so).
	maxSummaryPasses = 8
	// maxSummaryRetries bounds how often a compaction halves its parts
	// when the model finds a summary request itself too long (from the
	// size of the whole transcript, 8 halvings reach a 256th of it).
	maxSummaryRetries = 8
	// minSummaryBudget is the smallest part a summary request carries.
	minSummaryBudget = 256
)

// summaryIntro introduces the summary to the model in later requests.
const summaryIntro = "[The earlier part of this conversation was compacted to save room in the context window. Summary of it:]\n\n"

const summarySystem = `You summarize a conversation between users and Tandem, an AI coding agent working in a project's workspace, so that the agent can carry on the work from your summary alone, without the conversation.`

const summaryInstructions = `Summarize the conversation above for the agent that will continue it. Keep:
- what the users asked for, their latest request word for word, and any constraints or preferences they gave;
- what was done: files read, created or changed (with paths) and how, commands run and what they showed, errors met and how they were solved;
- decisions taken and why, and facts learned about the project;
- the current state and what remains to be done, with the next step.
Be concise and specific; leave out pleasantries and anything no longer relevant. Write the summary only.`

// isSummary reports whether m is a compaction's summary message.
func isSummary(m *proto.Message) bool {
	return m.Role == proto.RoleAssistant && len(m.Parts) > 0 && m.Parts[0].Type == proto.PartSummary
}

// compactedView finds the session's latest summary: the model reads it in
// place of the messages up to its through_message_id, then the messages
// from start on (summaries among them are skipped). With no summary, start
// is 0. A summary whose message it covers is not in msgs (which cannot
// happen: messages are never deleted) is ignored.
func compactedView(msgs []proto.Message) (start int, summary *proto.Part) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if !isSummary(&msgs[i]) {
			continue
		}
		p := &msgs[i].Parts[0]
		for j := i - 1; j >= 0; j-- {
			if msgs[j].ID == p.ThroughMessageID {
				return j + 1, p
			}
		}
		return 0, nil
	}
	return 0, nil
}

// summaryMessage is the summary as the model reads it: a user message, so
// that a conversation starts with one whatever the provider.
func summaryMessage(text string) provider.Message {
	return provider.Message{Role: provider.RoleUser, Text: summaryIntro + text}
}

// limit is the most tokens a request may carry before the run compacts:
// the session's threshold of the model's window, and never more than the
// window less the model's output limit (a window counts input and output
// alike; the output limit is capped at half the window, for a window the
// configuration made smaller than the built-in output limit). 0 when the
// window is unknown: then only the provider's answer triggers compaction.
func (x *execution) limit() int64 {
	spec, _ := x.run.Catalog.Lookup(x.run.Model)
	w := spec.ContextWindow
	if w <= 0 {
		return 0
	}
	usable := w - min(spec.MaxOutputTokens, w/2)
	return min(int64(float64(w)*x.run.Compaction.Threshold), usable)
}

// overLimit reports whether a request of tokens must wait for a compaction.
func (x *execution) overLimit(tokens int64) bool {
	if !x.run.Compaction.Auto {
		return false
	}
	l := x.limit()
	return l > 0 && tokens > l
}

// errNothingToCompact is a compaction with no message to summarize.
var errNothingToCompact = errors.New("nothing to compact: no message since the last summary")

// compactionError is run.completed's error for a failed compaction.
func compactionError(err error) *proto.ErrorDetail {
	msg := err.Error()
	if pe, ok := provider.AsError(err); ok {
		msg = pe.Code + ": " + pe.Message
	}
	return &proto.ErrorDetail{Code: proto.CodeCompactionFailed, Message: cut("compaction failed: "+msg, maxErrorMessage)}
}

// compact summarizes the conversation, keeping the newest of it verbatim
// as keep says (keepNone, keepAuto); tokensBefore is the size of the
// request that needed it. exclude is the id of a message of the run in
// progress (an empty step, the request that was too long), which stays
// after the summary. With nothing to summarize it returns
// errNothingToCompact having emitted nothing. On success it has recorded
// the summary message, emitted session.compaction_started and
// session.compaction_completed, and the run's requests read the summary
// from then on. On failure it has recorded nothing but
// compaction_started: the history the model reads is unchanged.
func (x *execution) compact(tokensBefore int64, keep int, exclude string) error {
	// What the model reads now: the last summary, if any, then rest.
	var prev string
	var rest []proto.Message
	if err := x.run.History.Read(x.ctx, x.r.Store, x.run.SessionID, func(msgs []proto.Message) {
		start, summary := compactedView(msgs)
		if summary != nil {
			prev = summary.Text
		}
		for _, m := range msgs[start:] {
			if !isSummary(&m) && m.ID != exclude {
				rest = append(rest, m)
			}
		}
	}); err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	cutAt := keepFrom(rest, tokensBefore, keep)
	prefix := rest[:cutAt]
	if !hasContent(prefix) {
		return errNothingToCompact
	}

	x.emit(proto.EventSessionCompactionStarted, proto.CompactionStarted{TokensBefore: tokensBefore}, false)
	x.flush()
	if err := x.storeFailed(); err != nil {
		return err
	}
	text, used, err := x.summarize(prev, prefix, tokensBefore)
	u := x.run.Catalog.Usage(x.run.Model, used)
	x.usage = x.usage.Add(u)
	if err != nil {
		return err
	}
	sum := x.newMessage(proto.RoleAssistant)
	sum.Model = x.run.Model
	sum.Parts = []proto.Part{{Type: proto.PartSummary, Text: text, ThroughMessageID: prefix[len(prefix)-1].ID}}
	sum.Usage = &u
	x.save(&sum, proto.EventMessageCreated)

	// The next request's size, estimated: its system prompt and tools as
	// now, the summary and what follows it.
	req, _, err := x.request()
	var after int64
	if err == nil {
		after = provider.EstimateTokens(req)
	}
	covered := 0
	_ = x.run.History.Read(x.ctx, x.r.Store, x.run.SessionID, func(msgs []proto.Message) { covered = len(msgs) })
	x.size.set(after, covered)
	x.emit(proto.EventSessionCompactionCompleted, proto.CompactionCompleted{
		TokensBefore: tokensBefore, TokensAfter: after, SummaryMessageID: sum.ID,
	}, false)
	x.flush()
	x.log.Info("conversation compacted", "tokens_before", tokensBefore, "tokens_after", after, "summarized", len(prefix), "kept", len(rest)-len(prefix))
	return nil
}

// keepFrom returns where the verbatim tail of rest starts: the oldest
// message at which a tail of at most a keep-th of tokensBefore can start
// (a user message, or an assistant message that says something), so that
// no tool result is cut from its call; len(rest) keeps nothing. The tail
// never holds everything: something must be summarized.
func keepFrom(rest []proto.Message, tokensBefore int64, keep int) int {
	from := len(rest)
	if keep == keepNone {
		return from
	}
	budget := tokensBefore / int64(keep)
	var size int64
	for i := len(rest) - 1; i >= 1; i-- {
		size += estimateStored(rest[i])
		if size > budget {
			break
		}
		if boundary(rest[i]) {
			from = i
		}
	}
	return from
}

// boundary reports whether the model's view may start at m: a user
// message, or an assistant message with something in it (its tool
// results, if any, follow it).
func boundary(m proto.Message) bool {
	switch m.Role {
	case proto.RoleUser:
		return true
	case proto.RoleAssistant:
		return estimateStored(m) > 0
	}
	return false
}

// hasContent reports whether any of msgs says something to the model.
func hasContent(msgs []proto.Message) bool {
	for _, m := range msgs {
		if estimateStored(m) > 0 {
			return true
		}
	}
	return false
}

// summarize asks the model for a summary of prev (an earlier summary, if
// any) and msgs. The messages go as a transcript, in parts that fit a
// summary request; each pass folds the next part into the summary so far.
// A model that finds a request too long gets parts half the size, up to
// maxSummaryRetries times. used sums what every request consumed.
func (x *execution) summarize(prev string, msgs []proto.Message, tokensBefore int64) (text string, used provider.Usage, err error) {
	budget, maxOut := x.summaryBudget(tokensBefore)
	// Halvings start from what there is to summarize, not from a window
	// that proved larger than the model's.
	var total int64
	for _, m := range msgs {
		total += estimateStored(m)
	}
	budget = max(min(budget, total+maxOut+provider.EstimateText(prev)), minSummaryBudget)
	for try := 0; ; try++ {
		text, err = x.fold(prev, msgs, budget, maxOut, &used)
		pe, ok := provider.AsError(err)
		if err == nil || !ok || pe.Code != provider.CodeContextExceeded || try == maxSummaryRetries || budget <= minSummaryBudget {
			return text, used, err
		}
		budget = max(budget/2, minSummaryBudget)
		x.log.Info("summary request too long for the model; summarizing in smaller parts", "budget", budget)
	}
}

// summaryBudget is how many tokens of transcript one summary request may
// carry, and the summary's length: the window's usable part less the
// summary and the instructions, or, with the window unknown, half the
// request that did not fit (a guess the retries correct).
func (x *execution) summaryBudget(tokensBefore int64) (budget, maxOut int64) {
	spec, _ := x.run.Catalog.Lookup(x.run.Model)
	maxOut = summaryMaxTokens
	if spec.MaxOutputTokens > 0 {
		maxOut = min(maxOut, spec.MaxOutputTokens)
	}
	overhead := provider.EstimateText(summarySystem) + provider.EstimateText(summaryInstructions) + 64
	if w := spec.ContextWindow; w > 0 {
		maxOut = min(maxOut, w/4)
		usable := w - min(spec.MaxOutputTokens, w/2)
		budget = usable - maxOut - overhead
	} else {
		budget = tokensBefore / 2
	}
	return max(budget, minSummaryBudget), maxOut
}

// fold summarizes prev and msgs in parts of at most budget tokens.
func (x *execution) fold(prev string, msgs []proto.Message, budget, maxOut int64, used *provider.Usage) (string, error) {
	// Each part leaves room for the summary it is folded into.
	partBudget := budget
	if budget > 2*maxOut {
		partBudget = budget - maxOut
	}
	parts := transcriptParts(msgs, partBudget)
	note := ""
	if n := len(parts) - maxSummaryPasses; n > 0 {
		left := 0
		for _, p := range parts[:n] {
			left += p.messages
		}
		parts = parts[n:]
		note = fmt.Sprintf("[%d earlier messages were too long to summarize and are left out.]\n\n", left)
	}
	summary := prev
	for i, p := range parts {
		var b strings.Builder
		if summary != "" {
			b.WriteString("Summary of the conversation before this part:\n\n")
			b.WriteString(summary)
			b.WriteString("\n\n")
		}
		if i == 0 {
			b.WriteString(note)
		}
		b.WriteString("Conversation:\n\n")
		b.WriteString(p.text)
		req := provider.Request{
			Model:           x.run.ModelName,
			ReasoningEffort: x.run.ReasoningEffort,
			System:          summarySystem,
			// The instructions come last, in a message of their own.
			Messages: []provider.Message{
				{Role: provider.RoleUser, Text: b.String()},
				{Role: provider.RoleUser, Text: summaryInstructions},
			},
			MaxTokens: int(maxOut),
		}
		resp, _, u, _, err := x.send(func(int) (provider.Request, error) { return req, nil }, nil)
		*used = used.Add(u)
		if err != nil {
			return "", err
		}
		text := strings.TrimSpace(resp.Text)
		if text == "" {
			return "", errors.New("the model wrote an empty summary")
		}
		summary = text
	}
	return summary, nil
}

// part is a piece of transcript that fits one summary request.
type part struct {
	text     string
	messages int
}

// transcriptParts renders msgs as a plain transcript, in parts of at most
// budget tokens (estimated). A message longer than half a part is cut in
// its middle, saying how much was cut.
func transcriptParts(msgs []proto.Message, budget int64) []part {
	maxBytes := int(budget) * provider.BytesPerToken
	perMessage := max(maxBytes/2, 256)
	var out []part
	var b strings.Builder
	n := 0
	for _, m := range msgs {
		line := transcriptLine(m)
		if line == "" {
			continue
		}
		line = cutMiddle(line, perMessage)
		if b.Len() > 0 && b.Len()+len(line) > maxBytes {
			out = append(out, part{b.String(), n})
			b.Reset()
			n = 0
		}
		b.WriteString(line)
		n++
	}
	if b.Len() > 0 {
		out = append(out, part{b.String(), n})
	}
	return out
}

// transcriptLine renders one message for a summary request; "" for one
// that says nothing to the model.
func transcriptLine(m proto.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		switch p.Type {
		case proto.PartText:
			if strings.TrimSpace(p.Text) != "" {
				fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, p.Text)
			}
		case proto.PartToolCall:
			fmt.Fprintf(&b, "[assistant called %s]\n%s\n\n", p.Name, p.Arguments)
		case proto.PartToolResult:
			what := "result"
			if p.IsError {
				what = "error"
			}
			fmt.Fprintf(&b, "[%s %s]\n%s\n\n", p.Name, what, p.Content)
		case proto.PartAttachment:
			fmt.Fprintf(&b, "[%s attached %s]\n\n", m.Role, p.DisplayName)
		}
	}
	return b.String()
}

// cutMiddle shortens s to about max bytes, keeping its head and its tail.
func cutMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	half := max / 2
	head := runeStart(s, half)
	tail := len(s) - half
	for tail < len(s) && !isRuneStart(s, tail) {
		tail++
	}
	return s[:head] + fmt.Sprintf("\n[... %d bytes cut ...]\n", tail-head) + s[tail:]
}

func isRuneStart(s string, i int) bool { return runeStart(s, i) == i }
