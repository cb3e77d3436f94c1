package tui

import (
	"encoding/json"
	"testing"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// FuzzViewOfUntrustedText puts arbitrary text everywhere the server's data
// reaches the screen (message text and markdown, reasoning, tool names,
// arguments and output, titles, model names, client ids, permission
// summaries and diffs) and checks every frame: only colours reach the
// terminal, and the frame is the terminal's size.
func FuzzViewOfUntrustedText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;PWNED\x07", "\x1b[2J\x1b[H", "[x](http://a\x1b]8;;b\x07)", "```\n\x1b[31m\n```", "\u009b2J\u202e", "# \xff\xfe", "| a | b |\n|---|---|\n| \x1b | \a |"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		args, _ := json.Marshal(map[string]string{"path": s, "content": s})
		d := newDriver(t, 80, 24)
		d.api.msgs[sid] = []proto.Message{
			{ID: "u", Role: proto.RoleUser, ClientID: s, Parts: []proto.Part{{Type: proto.PartText, Text: s}, {Type: proto.PartAttachment, DisplayName: s}}},
			{ID: "a", Role: proto.RoleAssistant, Model: s, Parts: []proto.Part{
				{Type: proto.PartReasoning, Text: s}, {Type: proto.PartText, Text: s},
				{Type: proto.PartToolCall, ID: "c", Name: "write", Arguments: args},
				{Type: proto.PartFinish, Reason: proto.FinishError, Message: s}}},
			{ID: "t", Role: proto.RoleTool, Parts: []proto.Part{{Type: proto.PartToolResult, ToolCallID: "c", Content: s}}},
		}
		d.ready(proto.Session{ID: sid, Title: s, Model: s})
		d.screen()
		d.event(proto.EventMessageDelta, sid, "r", proto.MessageDelta{MessageID: "m", Kind: "text", Text: s})
		d.keys("ctrl+o")
		d.screen()
		d.event(proto.EventPermissionRequested, sid, "r", proto.PermissionRequest{RequestID: "p", SessionID: sid, ToolCallID: "c", ToolName: s, Kind: s, Summary: s,
			Details: map[string]any{"diff": s}})
		d.screen()
		// The answer's result becomes the tool block's state.
		d.event(proto.EventPermissionResolved, sid, "r", map[string]any{"request_id": "p", "result": s, "resolved_by": s, "resolved_by_name": s, "feedback": s})
		d.keys("ctrl+home")
		d.screen()

		// /rewind's picker: the prompt, the file names and changes, the
		// diff and a refusal's message are the server's.
		r := newDriver(t, 80, 24)
		r.api.msgs[sid] = d.api.msgs[sid]
		r.api.checkpoints = []proto.Checkpoint{{ID: "cp", MessageID: "u"}}
		r.api.diffs["cp"] = proto.CheckpointDiff{Files: []proto.FileChange{{Path: s, Change: s}}, Diff: s}
		r.api.rewindErr = []error{&client.APIError{Status: 409, Code: proto.CodeRewindConflict, Message: s}}
		r.ready(proto.Session{ID: sid, Title: s, Model: s})
		r.keys("/rewind", "enter")
		r.screen()
		r.keys("pgdown", "enter")
		r.screen()
	})
}
