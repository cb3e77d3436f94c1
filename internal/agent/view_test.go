package agent

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

func userMsg(id, text string) proto.Message {
	return proto.Message{ID: id, Role: proto.RoleUser, Parts: []proto.Part{{Type: proto.PartText, Text: text}}}
}

func callsMsg(id string, calls ...string) proto.Message {
	m := proto.Message{ID: id, Role: proto.RoleAssistant}
	for _, c := range calls {
		m.Parts = append(m.Parts, proto.Part{Type: proto.PartToolCall, ID: c, Name: "ls", Arguments: json.RawMessage(`{}`)})
	}
	m.Parts = append(m.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishToolUse})
	return m
}

func resultMsg(id, call string) proto.Message {
	return proto.Message{ID: id, Role: proto.RoleTool, Parts: []proto.Part{{Type: proto.PartToolResult, ToolCallID: call, Name: "ls", Content: "result of " + call}}}
}

func textMsg(id, text string) proto.Message {
	return proto.Message{ID: id, Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartText, Text: text}, {Type: proto.PartFinish, Reason: proto.FinishEndTurn}}}
}

// A step's tool calls reach the model as they were made, whatever order
// their results came in: the results answered first must not change the
// calls of the assistant message sent before them.
func TestHistoryKeepsEveryToolCallWhateverTheOrderOfResults(t *testing.T) {
	x := &execution{run: &Run{}}
	got := x.history([]proto.Message{
		userMsg("u", "go"),
		callsMsg("a", "c1", "c2", "c3"),
		resultMsg("r1", "c1"),
		resultMsg("r3", "c3"),
		resultMsg("r2", "c2"),
	})
	require.Len(t, got, 5)
	var ids []string
	for _, c := range got[1].ToolCalls {
		ids = append(ids, c.ID)
	}
	require.Equal(t, []string{"c1", "c2", "c3"}, ids)
	require.Equal(t, []string{"c1", "c3", "c2"}, []string{got[2].ToolCallID, got[3].ToolCallID, got[4].ToolCallID})
	for _, m := range got[2:] {
		require.Equal(t, provider.RoleTool, m.Role)
	}
}

// A user message recorded while a step's tool calls waited on their
// results (a prompt steered into a run parked on a permission) reaches the
// model after those results: a call is never cut from its result.
func TestHistoryPutsAPromptAfterThePendingResults(t *testing.T) {
	x := &execution{run: &Run{}}
	got := x.history([]proto.Message{
		userMsg("u", "go"),
		callsMsg("a", "c1", "c2"),
		resultMsg("r1", "c1"),
		userMsg("s", "steered"),
		resultMsg("r2", "c2"),
		textMsg("b", "done"),
	})
	var roles []string
	for _, m := range got {
		roles = append(roles, m.Role+":"+m.Text+m.ToolCallID)
	}
	require.Equal(t, []string{"user:go", "assistant:", "tool:result of c1c1", "tool:result of c2c2", "user:steered", "assistant:done"}, roles)

	// A call left without a result is answered "canceled", before the prompt.
	got = x.history([]proto.Message{userMsg("u", "go"), callsMsg("a", "c1"), userMsg("s", "steered")})
	roles = roles[:0]
	for _, m := range got {
		roles = append(roles, m.Role+":"+m.Text)
	}
	require.Equal(t, []string{"user:go", "assistant:", "tool:canceled", "user:steered"}, roles)
}

// The model reads the latest summary in place of the messages up to its
// through_message_id, then what follows, older summaries aside.
func TestHistoryReadsTheLatestSummary(t *testing.T) {
	x := &execution{run: &Run{}}
	sum := func(id, text, through string) proto.Message {
		return proto.Message{ID: id, Role: proto.RoleAssistant, Parts: []proto.Part{{Type: proto.PartSummary, Text: text, ThroughMessageID: through}}}
	}
	got := x.history([]proto.Message{
		userMsg("u1", "one"), textMsg("a1", "first"),
		userMsg("u2", "two"), textMsg("a2", "second"),
		sum("s1", "S1", "a1"),
		userMsg("u3", "three"), textMsg("a3", "third"),
		sum("s2", "S2", "u2"),
		userMsg("u4", "four"),
	})
	var texts []string
	for _, m := range got {
		texts = append(texts, m.Role+":"+m.Text)
	}
	require.Equal(t, []string{"user:" + summaryIntro + "S2", "assistant:second", "user:three", "assistant:third", "user:four"}, texts)
}

// Every step reads the whole history: a text-only message reaches the
// model as the stored string itself, not a copy made at each step (which
// also lets the encode cache recognize it without reading it through). A
// prompt with attachments is still built: the run's own with their text,
// an earlier one with a note for each.
func TestHistorySendsStoredTextAsIs(t *testing.T) {
	x := &execution{run: &Run{Attachments: []Attachment{{Text: "FILE"}}}, userID: "now"}
	stored := []proto.Message{userMsg("u", "an earlier prompt"), textMsg("a", "an answer"), userMsg("now", "this prompt")}
	earlier := proto.Message{ID: "e", Role: proto.RoleUser, Parts: []proto.Part{{Type: proto.PartText, Text: "see"}, {Type: proto.PartAttachment, DisplayName: "f.txt"}}}
	got := x.history(append(stored, earlier))
	require.Len(t, got, 4)
	require.Same(t, unsafe.StringData(stored[0].Parts[0].Text), unsafe.StringData(got[0].Text))
	require.Same(t, unsafe.StringData(stored[1].Parts[0].Text), unsafe.StringData(got[1].Text))
	require.Equal(t, "this prompt\n\nFILE", got[2].Text)
	require.Equal(t, "see\n\n[attachment \"f.txt\" was shown in an earlier turn]", got[3].Text)
}
