package agent

import (
	"encoding/json"
	"testing"

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
