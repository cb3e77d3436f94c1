package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// turn is one message of a recorded model request, whatever the flavor:
// its role and its text (tool calls and results named in it).
type turn struct{ Role, Text string }

// turns returns the system prompt and the messages of a recorded request,
// OpenAI's or Anthropic's.
func turns(t *testing.T, flavor string, req recorded) (system string, out []turn) {
	t.Helper()
	text := func(c any) string {
		switch c := c.(type) {
		case string:
			return c
		case []any:
			var b strings.Builder
			for _, p := range c {
				pm, _ := p.(map[string]any)
				switch pm["type"] {
				case "text":
					b.WriteString(fmt.Sprint(pm["text"]))
				case "tool_use":
					fmt.Fprintf(&b, "<call %v>", pm["id"])
				case "tool_result":
					fmt.Fprintf(&b, "<result %v>", pm["tool_use_id"])
				}
			}
			return b.String()
		}
		return ""
	}
	msgs, _ := req.Body["messages"].([]any)
	for _, m := range msgs {
		mm := m.(map[string]any)
		role := fmt.Sprint(mm["role"])
		tx := text(mm["content"])
		if calls, ok := mm["tool_calls"].([]any); ok {
			for _, c := range calls {
				tx += fmt.Sprintf("<call %v>", c.(map[string]any)["id"])
			}
		}
		if id, ok := mm["tool_call_id"]; ok {
			tx = fmt.Sprintf("<result %v>", id) + tx
		}
		if role == "system" {
			system = tx
			continue
		}
		out = append(out, turn{role, tx})
	}
	if flavor == "anthropic" {
		system = text(req.Body["system"])
	}
	return system, out
}

// summaryRequest reports whether a recorded request asks for a summary.
func summaryRequest(t *testing.T, flavor string, req recorded) bool {
	system, _ := turns(t, flavor, req)
	return strings.HasPrefix(system, "You summarize a conversation")
}

// sizedUsage reports a request's size as a real model would, about 4 bytes
// a token, so that the server's accounting follows what it sent.
func sizedUsage(req map[string]any, answer string) *fakeUsage {
	raw, _ := json.Marshal(req)
	return &fakeUsage{Input: int64(len(raw) / 4), Output: int64(len(answer)/4 + 1)}
}

// compactionModels is a configuration giving the fakes' models a small
// window: 12,000 tokens, 1,000 of them for output, so a request over 9,600
// tokens (0.8 of it) makes the run compact.
const compactionModels = `{"models": {
	"openai/gpt-test": {"context_window": 12000, "max_output_tokens": 1000},
	"anthropic/claude-test": {"context_window": 12000, "max_output_tokens": 1000}
}}`

// filler is n bytes of prose, different for each i.
func filler(i, n int) string {
	s := strings.Repeat(fmt.Sprintf("part %d says something worth keeping. ", i), n/30+1)
	return s[:n]
}

// A long session with a model of a small window compacts on its own before
// the request that would pass the threshold: the run's events come in
// order, the next request is the system prompt, the summary, then every
// message after through_message_id, the history keeps every message, and
// the run ends end_turn.
func TestLongSessionCompactsAutomatically(t *testing.T) {
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) {
			var summaries atomic.Int32
			fake := newFakeModel(t, flavor, func(n int, req map[string]any) step {
				raw, _ := json.Marshal(req)
				if strings.Contains(string(raw), "You summarize a conversation") {
					text := fmt.Sprintf("SUMMARY %d: the users asked about parts; all answered.", summaries.Add(1))
					return step{text: []string{text}, usage: sizedUsage(req, text)}
				}
				answer := "noted: " + filler(n, 1500)
				return step{text: []string{answer}, usage: sizedUsage(req, answer)}
			})
			e := startEnv(t, withConfigFile(t, compactionModels))
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.fakeSession(ws.ID, fake)
			var compacted string
			var frames []frame
			for i := 0; i < 20 && compacted == ""; i++ {
				acc := e.prompt(ws.ID, sess.ID, fmt.Sprintf("prompt %d: %s", i, filler(i, 1500)))
				rc, fs := s.completion(acc.RunID)
				require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
				for _, f := range fs {
					if f.Event == proto.EventSessionCompactionStarted {
						compacted, frames = acc.RunID, fs
					}
				}
			}
			require.NotEmpty(t, compacted, "the session compacted within 20 turns")
			require.EqualValues(t, 1, summaries.Load(), "one summary request")

			// The run's events, in order (deltas aside).
			var kinds []string
			var started proto.CompactionStarted
			var done proto.CompactionCompleted
			for _, f := range frames {
				if f.Event == proto.EventMessageDelta {
					continue
				}
				ev := f.envelope(t)
				kind := f.Event
				if f.Event == proto.EventMessageCreated {
					var m proto.Message
					require.NoError(t, json.Unmarshal(ev.Data, &m))
					kind += "/" + m.Role
					if len(m.Parts) > 0 && m.Parts[0].Type == proto.PartSummary {
						kind += "/summary"
					}
				}
				switch f.Event {
				case proto.EventSessionCompactionStarted:
					require.NoError(t, json.Unmarshal(ev.Data, &started))
				case proto.EventSessionCompactionCompleted:
					require.NoError(t, json.Unmarshal(ev.Data, &done))
				}
				kinds = append(kinds, kind)
			}
			assert.Equal(t, []string{
				proto.EventRunAccepted, proto.EventRunStarted, "message.created/user",
				proto.EventSessionCompactionStarted, "message.created/assistant/summary", proto.EventSessionCompactionCompleted,
				"message.created/assistant", proto.EventMessageUpdated, proto.EventRunCompleted,
			}, kinds)
			assert.Greater(t, started.TokensBefore, int64(9600), "over 0.8 of the window")
			assert.Equal(t, started.TokensBefore, done.TokensBefore)
			assert.Less(t, done.TokensAfter, done.TokensBefore)
			t.Logf("%s: compaction took the request from %d to %d tokens (%d saved)", flavor, done.TokensBefore, done.TokensAfter, done.TokensBefore-done.TokensAfter)

			// The history keeps every message; the summary covers a prefix.
			msgs := e.messages(ws.ID, sess.ID)
			var sum *proto.Message
			users := 0
			for i := range msgs {
				if msgs[i].ID == done.SummaryMessageID {
					sum = &msgs[i]
				}
				if msgs[i].Role == proto.RoleUser {
					users++
				}
			}
			require.NotNil(t, sum)
			require.Len(t, sum.Parts, 1, "the summary is the only part")
			assert.Equal(t, "SUMMARY 1: the users asked about parts; all answered.", sum.Parts[0].Text)
			assert.Equal(t, compacted, sum.RunID)
			require.NotNil(t, sum.Usage, "the summary request's usage")
			runs := 0
			for _, m := range msgs {
				if m.Role == proto.RoleAssistant && m.ID != sum.ID {
					runs++
				}
			}
			assert.Equal(t, users, runs, "every prompt and every answer is still there")
			through := slices.IndexFunc(msgs, func(m proto.Message) bool { return m.ID == sum.Parts[0].ThroughMessageID })
			require.GreaterOrEqual(t, through, 0)

			// The request after the summary: system, summary, then exactly
			// the messages after through_message_id (the summary aside).
			reqs := fake.Requests()
			k := slices.IndexFunc(reqs, func(r recorded) bool { return summaryRequest(t, flavor, r) })
			require.Greater(t, k, 0)
			require.Len(t, reqs, k+2, "the summary, then the step's request")
			_, sent := turns(t, flavor, reqs[k+1])
			require.NotEmpty(t, sent)
			assert.Equal(t, "user", sent[0].Role)
			assert.Contains(t, sent[0].Text, "SUMMARY 1:")
			cutAt := strings.Index(sent[0].Text, "SUMMARY 1:")
			require.GreaterOrEqual(t, cutAt, 0, "the request starts with the summary: %q", sent[0].Text)
			want := []turn{{"user", sent[0].Text[:cutAt] + sum.Parts[0].Text}}
			for _, m := range msgs[through+1:] {
				if m.ID == sum.ID || m.RunID == compacted && m.Role == proto.RoleAssistant {
					continue // the summary is in front; the step's own answer came later
				}
				for _, p := range m.Parts {
					if p.Type == proto.PartText {
						want = append(want, turn{m.Role, p.Text})
					}
				}
			}
			if flavor == "anthropic" {
				want = mergeTurns(want) // Anthropic's turns alternate
			}
			got := sent
			assert.Equal(t, want, got, "the messages after through_message_id, in order")
			for _, tr := range sent {
				assert.NotContains(t, tr.Text, "prompt 0:", "the first prompt is in the summary, not the request")
			}

			// The session's context shrank with the compaction.
			assert.Less(t, e.scSession(ws.ID, sess.ID).Context.Tokens, started.TokensBefore)
		})
	}
}

// mergeTurns joins adjacent turns of one role, as the Anthropic provider
// sends them.
func mergeTurns(in []turn) []turn {
	var out []turn
	for _, t := range in {
		if n := len(out); n > 0 && out[n-1].Role == t.Role {
			out[n-1].Text += t.Text
			continue
		}
		out = append(out, t)
	}
	return out
}

// tooLong is a provider's answer to a request over the model's window.
func tooLong(flavor string) step {
	if flavor == "anthropic" {
		return step{status: http.StatusBadRequest, errBody: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}`}
	}
	return step{status: http.StatusBadRequest, errBody: `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`}
}

// A model whose window is unknown and that answers "too long" makes the
// run compact, then send the request once more: the run goes on from the
// summary. When the retry is too long again, the run ends with the
// provider's error: one retry, not a loop.
func TestContextExceededCompactsAndRetriesOnce(t *testing.T) {
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) {
			var tooLongAt atomic.Int32
			tooLongAt.Store(2)
			var again atomic.Bool
			fake := newFakeModel(t, flavor, func(n int, req map[string]any) step {
				raw, _ := json.Marshal(req)
				if strings.Contains(string(raw), "You summarize a conversation") {
					return step{text: []string{"SUMMARY: earlier talk"}}
				}
				if n == int(tooLongAt.Load()) || (again.Load() && n > int(tooLongAt.Load())) {
					return tooLong(flavor)
				}
				return step{text: []string{fmt.Sprintf("answer %d", n)}}
			})
			e := startEnv(t)
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			sess := e.fakeSession(ws.ID, fake)
			for i := range 2 {
				rc, _ := s.completion(e.prompt(ws.ID, sess.ID, fmt.Sprint("hello ", i)).RunID)
				require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
			}
			acc := e.prompt(ws.ID, sess.ID, "the long one")
			rc, frames := s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
			assert.Subset(t, types(frames), []string{proto.EventSessionCompactionStarted, proto.EventSessionCompactionCompleted})
			reqs := fake.Requests()
			require.Len(t, reqs, 5, "two turns, the refused request, the summary, the retry")
			require.True(t, summaryRequest(t, flavor, reqs[3]))
			_, sent := turns(t, flavor, reqs[4])
			assert.Contains(t, sent[0].Text, "SUMMARY: earlier talk")
			assert.Contains(t, sent[len(sent)-1].Text, "the long one", "the prompt of the run is kept")
			for _, tr := range sent {
				assert.NotContains(t, tr.Text, "hello 0", "the first turns are in the summary")
			}
			// The step's message carries both of its requests' usage.
			msgs := runMessages(e.messages(ws.ID, sess.ID), acc.RunID)
			last := msgs[len(msgs)-1]
			require.NotNil(t, last.Usage)
			assert.Equal(t, defaultUsage.Input, last.Usage.InputTokens, "the refused request reported nothing; the retry did")

			// Too long even after the compaction: the provider's error.
			again.Store(true)
			tooLongAt.Store(int32(len(fake.Requests())))
			acc = e.prompt(ws.ID, sess.ID, "still too long")
			rc, _ = s.completion(acc.RunID)
			require.Equal(t, proto.OutcomeError, rc.Outcome)
			assert.Equal(t, "model_context_exceeded", rc.Error.Code)
			reqs = fake.Requests()
			require.Len(t, reqs, 8, "the refused request, one summary, one retry")
			assert.True(t, summaryRequest(t, flavor, reqs[6]))
		})
	}
}

// A compaction whose summary fails ends the run with compaction_failed and
// leaves the history the model reads as it was: no summary, and the next
// request carries every message. Both ways: on demand and automatic.
func TestFailedCompactionChangesNoHistory(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		raw, _ := json.Marshal(req)
		if strings.Contains(string(raw), "You summarize a conversation") {
			return step{status: http.StatusServiceUnavailable}
		}
		answer := "noted: " + filler(n, 1500)
		return step{text: []string{answer}, usage: sizedUsage(req, answer)}
	})
	e := startEnv(t, withFastRetries(), withConfigFile(t, compactionModels))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{"compaction": map[string]any{"auto": false}})
	for i := range 3 {
		rc, _ := s.completion(e.prompt(ws.ID, sess.ID, fmt.Sprintf("prompt %d: %s", i, filler(i, 1500))).RunID)
		require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	}
	before := e.messages(ws.ID, sess.ID)

	var acc proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sess.ID), nil, &acc)
	rc, frames := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeError, rc.Outcome)
	assert.Equal(t, proto.CodeCompactionFailed, rc.Error.Code)
	assert.Contains(t, rc.Error.Message, "model_unavailable")
	assert.Contains(t, types(frames), proto.EventSessionCompactionStarted)
	assert.NotContains(t, types(frames), proto.EventSessionCompactionCompleted)
	after := e.messages(ws.ID, sess.ID)
	require.Len(t, after, len(before)+1, "only the run's own finish")
	assert.Equal(t, before, after[:len(before)])
	end := after[len(before)]
	assert.Equal(t, acc.RunID, end.RunID)
	assert.Equal(t, []proto.Part{{Type: proto.PartFinish, Reason: proto.FinishError, Message: rc.Error.Message}}, end.Parts)

	// Automatic, over the threshold: the same end, and still no summary.
	e.must(http.StatusOK, "PATCH", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID), map[string]any{"compaction": map[string]any{"auto": true}}, nil)
	var failed proto.RunCompleted
	for i := 3; i < 20 && failed.RunID == ""; i++ {
		rc, _ := s.completion(e.prompt(ws.ID, sess.ID, fmt.Sprintf("prompt %d: %s", i, filler(i, 1500))).RunID)
		if rc.Outcome == proto.OutcomeError {
			failed = rc
		}
	}
	require.NotEmpty(t, failed.RunID, "a run reached the threshold")
	assert.Equal(t, proto.CodeCompactionFailed, failed.Error.Code)
	for _, m := range e.messages(ws.ID, sess.ID) {
		for _, p := range m.Parts {
			assert.NotEqual(t, proto.PartSummary, p.Type)
		}
	}
	// The next request carries every turn: the compaction changed nothing.
	e.must(http.StatusOK, "PATCH", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID), map[string]any{"compaction": map[string]any{"auto": false}}, nil)
	n := len(fake.Requests())
	rc, _ = s.completion(e.prompt(ws.ID, sess.ID, "and now?").RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	_, sent := turns(t, "openai", fake.Requests()[n])
	assert.Contains(t, sent[0].Text, "prompt 0:")
}

// POST .../compact runs a compaction of its own, queued like a prompt: no
// user message, the whole conversation summarized, outcome end_turn; the
// next request is the system prompt, the summary and the new prompt. With
// nothing to summarize it fails with compaction_failed.
func TestCompactOnDemand(t *testing.T) {
	hold := make(chan struct{})
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		raw, _ := json.Marshal(req)
		if strings.Contains(string(raw), "You summarize a conversation") {
			return step{text: []string{"SUMMARY OF ALL"}}
		}
		if lastUserText(req) == "hold on" {
			return step{text: []string{"held"}, hold: hold}
		}
		return step{text: []string{fmt.Sprint("answer ", n)}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	compact := func() proto.PromptAccepted {
		var acc proto.PromptAccepted
		e.must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sess.ID), map[string]any{}, &acc)
		return acc
	}

	empty := compact()
	rc, _ := s.completion(empty.RunID)
	require.Equal(t, proto.OutcomeError, rc.Outcome)
	assert.Equal(t, proto.CodeCompactionFailed, rc.Error.Code)
	assert.Contains(t, rc.Error.Message, "nothing to compact")

	rc, _ = s.completion(e.prompt(ws.ID, sess.ID, "first").RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	held := e.prompt(ws.ID, sess.ID, "hold on")
	acc := compact()
	assert.Equal(t, proto.RunQueued, acc.State, "queued behind the running prompt")
	assert.Equal(t, 1, acc.Position)
	close(hold)
	s.completion(held.RunID)
	rc, _ = s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	require.NotNil(t, rc.Usage)
	assert.Equal(t, defaultUsage.Input, rc.Usage.InputTokens, "the summary request's usage")
	var accepted proto.RunAccepted
	for _, ev := range e.scHistory(ws.ID, sess.ID) {
		if ev.Type == proto.EventRunAccepted && ev.RunID == acc.RunID {
			require.NoError(t, json.Unmarshal(ev.Data, &accepted))
		}
	}
	assert.True(t, accepted.Compaction)
	assert.Empty(t, accepted.Prompt)

	msgs := e.messages(ws.ID, sess.ID)
	run := runMessages(msgs, acc.RunID)
	require.Len(t, run, 2, "the summary and the run's finish; no user message")
	assert.Equal(t, proto.PartSummary, run[0].Parts[0].Type)
	assert.Equal(t, "SUMMARY OF ALL", run[0].Parts[0].Text)
	heldMsgs := runMessages(msgs, held.RunID)
	assert.Equal(t, heldMsgs[len(heldMsgs)-1].ID, run[0].Parts[0].ThroughMessageID, "everything before is summarized")
	assert.Equal(t, []proto.Part{{Type: proto.PartFinish, Reason: proto.FinishEndTurn}}, run[1].Parts)

	n := len(fake.Requests())
	rc, _ = s.completion(e.prompt(ws.ID, sess.ID, "after").RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	_, sent := turns(t, "openai", fake.Requests()[n])
	require.Len(t, sent, 2, "the summary and the new prompt")
	assert.Contains(t, sent[0].Text, "SUMMARY OF ALL")
	assert.Equal(t, turn{"user", "after"}, sent[1])

	// Refused like a prompt: unknown session, closed workspace.
	e.scRefused("POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, newClientID()), nil, http.StatusNotFound, proto.CodeSessionNotFound)
	e.scRefused("POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sess.ID), map[string]any{"x": 1}, http.StatusBadRequest, proto.CodeInvalidArgument)
}

// When the provider finds even the summary request too long (its window
// unknown, and the conversation far over it), the compaction summarizes in
// smaller parts, each folded into the summary so far, until they fit; the
// run then goes on.
func TestSummaryOverTheWindowIsMadeInParts(t *testing.T) {
	// The configuration says the window is far larger than it is: only
	// the provider's answers tell.
	const maxBody = 24 << 10
	var refusing atomic.Bool
	var summaryCalls, refusedSummaries, folded atomic.Int32
	fake := newFakeModel(t, "openai", func(n int, req map[string]any) step {
		raw, _ := json.Marshal(req)
		summary := strings.Contains(string(raw), "You summarize a conversation")
		if refusing.Load() && len(raw) > maxBody {
			if summary {
				refusedSummaries.Add(1)
			}
			return tooLong("openai")
		}
		if summary {
			if strings.Contains(string(raw), "Summary of the conversation before this part") {
				folded.Add(1)
			}
			return step{text: []string{fmt.Sprintf("SUMMARY PASS %d", summaryCalls.Add(1))}}
		}
		return step{text: []string{"noted: " + filler(n, 1500)}}
	})
	e := startEnv(t, withConfigFile(t, `{"models": {"openai/gpt-test": {"context_window": 100000, "max_output_tokens": 8000}}}`))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, nil)
	for i := range 20 {
		rc, _ := s.completion(e.prompt(ws.ID, sess.ID, fmt.Sprintf("prompt %d: %s", i, filler(i, 1500))).RunID)
		require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	}
	refusing.Store(true)
	acc := e.prompt(ws.ID, sess.ID, "go on")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
	assert.Positive(t, refusedSummaries.Load(), "a summary request was too long too")
	assert.Greater(t, summaryCalls.Load(), int32(1), "so the summary was made in parts")
	assert.Equal(t, summaryCalls.Load()-1, folded.Load(), "each later part folded into the summary so far")
	var sum *proto.Part
	for _, m := range runMessages(e.messages(ws.ID, sess.ID), acc.RunID) {
		if m.Parts[0].Type == proto.PartSummary {
			sum = &m.Parts[0]
		}
	}
	require.NotNil(t, sum)
	assert.Equal(t, fmt.Sprintf("SUMMARY PASS %d", summaryCalls.Load()), sum.Text, "the last pass's summary")
}
