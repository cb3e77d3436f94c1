package acp

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tandem-dev/tandem/proto"
)

// translator turns a session's events into ACP's session/update kinds. It
// is used by one goroutine at a time: the handler that attaches the
// session while it replays, then the session's live loop.
type translator struct {
	a    *attached
	mode string
	// tools are the session's tool calls, by Tandem's tool call id.
	tools map[string]*toolState
	// requests maps a permission request to its tool call.
	requests map[string]string
	// pending are the permission requests the history leaves unresolved.
	pending []proto.PermissionRequest
	// finish is the last finish reason of each run not yet completed.
	finish map[string]string
	// unfinished are the assistant messages a replay found still being
	// written, with the text it showed of each part: their deltas sent
	// before the live stream began are not kept, so their live deltas are
	// held back and the rest of their text is shown whole when they end.
	unfinished map[string]map[int]string
}

// toolState is what a tool call's updates need to repeat.
type toolState struct {
	status string
	name   string
	args   json.RawMessage
	diff   *toolCallContent
}

func newTranslator(a *attached, mode string) *translator {
	if mode == "" {
		mode = proto.PermissionModeAsk
	}
	return &translator{a: a, mode: mode, tools: map[string]*toolState{}, requests: map[string]string{}, finish: map[string]string{},
		unfinished: map[string]map[int]string{}}
}

// lastVersions maps each message of a history to the index of its last
// version (message.created or message.updated): a replay shows a message
// once, whole.
func lastVersions(hist []proto.Event) map[string]int {
	last := map[string]int{}
	for i, ev := range hist {
		if ev.Type != proto.EventMessageCreated && ev.Type != proto.EventMessageUpdated {
			continue
		}
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(ev.Data, &m) == nil {
			last[m.ID] = i
		}
	}
	return last
}

// replay translates the i-th event of a session's history: messages whole
// (history keeps no deltas), tool calls with the status they reached.
func (t *translator) replay(ev proto.Event, i int, lastVersion map[string]int) []any {
	switch ev.Type {
	case proto.EventMessageCreated, proto.EventMessageUpdated:
		var m proto.Message
		if json.Unmarshal(ev.Data, &m) != nil || lastVersion[m.ID] != i {
			return nil
		}
		switch m.Role {
		case proto.RoleUser:
			return t.userChunks(m)
		case proto.RoleAssistant:
			shown := map[int]string{}
			if !finished(m) {
				t.unfinished[m.ID] = shown
			}
			return assistantChunks(m, shown)
		}
	case proto.EventPermissionRequested:
		var req proto.PermissionRequest
		if json.Unmarshal(ev.Data, &req) != nil {
			return nil
		}
		t.pending = append(t.pending, req)
		return t.permissionRequested(req)
	case proto.EventPermissionResolved:
		var r proto.PermissionResolved
		if json.Unmarshal(ev.Data, &r) != nil {
			return nil
		}
		for i, req := range t.pending {
			if req.RequestID == r.RequestID {
				t.pending = append(t.pending[:i], t.pending[i+1:]...)
				break
			}
		}
		return t.permissionResolved(r)
	case proto.EventToolStarted, proto.EventToolFinished:
		return t.live(ev)
	}
	return nil
}

// pendingAsks are the permission requests a replay left unresolved.
func (t *translator) pendingAsks() []proto.PermissionRequest {
	p := t.pending
	t.pending = nil
	return p
}

// live translates an event as it happens, and acts on it: a prompt of this
// connection learns its run's end, the editor is asked for a permission.
func (t *translator) live(ev proto.Event) []any {
	switch ev.Type {
	case proto.EventRunAccepted:
		var r proto.RunAccepted
		if json.Unmarshal(ev.Data, &r) == nil && r.ClientID == t.a.c.clientID {
			t.a.accepted(r.RunID)
		}
	case proto.EventRunCompleted:
		var r proto.RunCompleted
		if json.Unmarshal(ev.Data, &r) == nil {
			t.a.completed(runResult{RunCompleted: r, finish: t.finish[r.RunID]})
			delete(t.finish, r.RunID)
		}
	case proto.EventMessageCreated:
		var m proto.Message
		if json.Unmarshal(ev.Data, &m) != nil || m.Role != proto.RoleUser {
			return nil
		}
		// The editor shows its own prompts; another client's is news.
		if m.ClientID == t.a.c.clientID || (m.Author != nil && m.Author.ClientID == t.a.c.clientID) {
			return nil
		}
		return t.userChunks(m)
	case proto.EventMessageUpdated:
		var m proto.Message
		if json.Unmarshal(ev.Data, &m) != nil || m.Role != proto.RoleAssistant {
			return nil
		}
		for _, p := range m.Parts {
			if p.Type == proto.PartFinish && m.RunID != "" {
				t.finish[m.RunID] = p.Reason
			}
		}
		if shown, ok := t.unfinished[m.ID]; ok && finished(m) {
			delete(t.unfinished, m.ID)
			return assistantChunks(m, shown)
		}
	case proto.EventMessageDelta:
		var d proto.MessageDelta
		if json.Unmarshal(ev.Data, &d) != nil || d.Text == "" {
			return nil
		}
		if _, held := t.unfinished[d.MessageID]; held {
			return nil
		}
		kind := "agent_message_chunk"
		if d.Kind == proto.PartReasoning {
			kind = "agent_thought_chunk"
		}
		return []any{chunk(kind, d.MessageID, d.Text)}
	case proto.EventToolStarted:
		var s proto.ToolStarted
		if json.Unmarshal(ev.Data, &s) != nil {
			return nil
		}
		tc := t.describe(s.ToolCallID, s.Name, s.Arguments)
		st := &toolState{status: "pending", name: s.Name, args: s.Arguments}
		if s.Name == "edit" {
			st.diff = editDiff(t.a.root, s.Arguments)
		}
		t.tools[s.ToolCallID] = st
		tc.SessionUpdate, tc.Status = "tool_call", st.status
		tc.Content = st.content(nil)
		return []any{tc}
	case proto.EventPermissionRequested:
		var req proto.PermissionRequest
		if json.Unmarshal(ev.Data, &req) != nil {
			return nil
		}
		out := t.permissionRequested(req)
		t.a.ask(req, t.permissionCall(req))
		return out
	case proto.EventPermissionResolved:
		var r proto.PermissionResolved
		if json.Unmarshal(ev.Data, &r) != nil {
			return nil
		}
		t.a.resolved(r.RequestID)
		return t.permissionResolved(r)
	case proto.EventToolFinished:
		var f proto.ToolFinished
		if json.Unmarshal(ev.Data, &f) != nil {
			return nil
		}
		st := t.tools[f.ToolCallID]
		if st == nil {
			st = &toolState{}
		}
		delete(t.tools, f.ToolCallID)
		var out []any
		if st.status == "pending" {
			out = append(out, toolCall{SessionUpdate: "tool_call_update", ToolCallID: f.ToolCallID, Status: "in_progress"})
		}
		status := "completed"
		if f.IsError || f.Permission == proto.ResultDeniedByRule {
			status = "failed"
		}
		text := &contentBlock{Type: "text", Text: f.Content}
		out = append(out, toolCall{SessionUpdate: "tool_call_update", ToolCallID: f.ToolCallID, Status: status,
			Content: st.content(&toolCallContent{Type: "content", Content: text})})
		return out
	case proto.EventSessionUpdated:
		var s proto.Session
		if json.Unmarshal(ev.Data, &s) != nil || s.ID != t.a.id {
			return nil
		}
		mode := s.PermissionMode
		if mode == "" {
			mode = proto.PermissionModeAsk
		}
		if mode != t.mode {
			t.mode = mode
			return []any{modeUpdate{SessionUpdate: "current_mode_update", CurrentModeID: mode}}
		}
	}
	return nil
}

// content is a tool call's content: its diff, if it has one, and more.
func (s *toolState) content(more *toolCallContent) []toolCallContent {
	var out []toolCallContent
	if s.diff != nil {
		out = append(out, *s.diff)
	}
	if more != nil {
		out = append(out, *more)
	}
	return out
}

// permissionRequested notes which tool call a request is about; a write
// learns its diff from the request's details.
func (t *translator) permissionRequested(req proto.PermissionRequest) []any {
	t.requests[req.RequestID] = req.ToolCallID
	st := t.tools[req.ToolCallID]
	if st == nil || st.diff != nil || req.ToolName != "write" {
		return nil
	}
	st.diff = writeDiff(t.a.root, st.args, req.Details)
	if st.diff == nil {
		return nil
	}
	return []any{toolCall{SessionUpdate: "tool_call_update", ToolCallID: req.ToolCallID, Content: st.content(nil)}}
}

// permissionResolved moves the tool call on: an approved call runs, a
// refused one has failed.
func (t *translator) permissionResolved(r proto.PermissionResolved) []any {
	id, ok := t.requests[r.RequestID]
	delete(t.requests, r.RequestID)
	st := t.tools[id]
	if !ok || st == nil {
		return nil
	}
	switch r.Result {
	case proto.ResultApproved, proto.ResultApprovedForSession:
		st.status = "in_progress"
	default:
		st.status = "failed"
	}
	return []any{toolCall{SessionUpdate: "tool_call_update", ToolCallID: id, Status: st.status}}
}

// permissionCall is the toolCall of a session/request_permission.
func (t *translator) permissionCall(req proto.PermissionRequest) toolCall {
	tc := toolCall{ToolCallID: req.ToolCallID, Status: "pending", Title: req.Summary}
	if st := t.tools[req.ToolCallID]; st != nil {
		tc.Content = st.content(nil)
	}
	d := t.describe(req.ToolCallID, req.ToolName, nil)
	tc.Kind = d.Kind
	if tc.Title == "" {
		tc.Title = d.Title
	}
	return tc
}

// userChunks shows a user message: its text, and its file attachments as
// links.
func (t *translator) userChunks(m proto.Message) []any {
	var out []any
	for _, p := range m.Parts {
		switch {
		case p.Type == proto.PartText:
			out = append(out, chunk("user_message_chunk", m.ID, p.Text))
		case p.Type == proto.PartAttachment && p.Kind == proto.AttachmentFile:
			out = append(out, contentChunk{SessionUpdate: "user_message_chunk", MessageID: m.ID,
				Content: contentBlock{Type: "resource_link", URI: fileURI(t.abs(p.Path)), Name: p.DisplayName}})
		}
	}
	return out
}

// finished reports whether an assistant message is whole: its last part
// is a finish part.
func finished(m proto.Message) bool {
	return len(m.Parts) > 0 && m.Parts[len(m.Parts)-1].Type == proto.PartFinish
}

// assistantChunks shows an assistant message's reasoning and text whole,
// less what shown says was shown of each part already (and notes it).
func assistantChunks(m proto.Message, shown map[int]string) []any {
	var out []any
	for i, p := range m.Parts {
		if p.Type != proto.PartReasoning && p.Type != proto.PartText {
			continue
		}
		text := p.Text
		if before, ok := shown[i]; ok {
			rest, cut := strings.CutPrefix(text, before)
			if !cut {
				continue // changed under us: what was shown stands
			}
			text = rest
		}
		shown[i] = p.Text
		if text == "" {
			continue
		}
		kind := "agent_message_chunk"
		if p.Type == proto.PartReasoning {
			kind = "agent_thought_chunk"
		}
		out = append(out, chunk(kind, m.ID, text))
	}
	return out
}

func chunk(kind, messageID, text string) contentChunk {
	return contentChunk{SessionUpdate: kind, MessageID: messageID, Content: contentBlock{Type: "text", Text: text}}
}

// toolArgs are the arguments of the built-in tools that name what they
// act on.
type toolArgs struct {
	Path    string `json:"path"`
	Pattern string `json:"pattern"`
	Command string `json:"command"`
}

// describe gives a tool call its ACP kind, title, locations and input.
func (t *translator) describe(id, name string, args json.RawMessage) toolCall {
	var a toolArgs
	if len(args) > 0 {
		_ = json.Unmarshal(args, &a)
	}
	tc := toolCall{ToolCallID: id, Kind: "other", Title: name}
	if len(args) > 0 && json.Valid(args) {
		tc.RawInput = args
	}
	where := func() {
		tc.Locations = []location{{Path: t.abs(a.Path)}}
	}
	switch name {
	case "view":
		tc.Kind, tc.Title = "read", "Read "+a.Path
		where()
	case "ls":
		tc.Kind, tc.Title = "search", "List "+orDot(a.Path)
		where()
	case "glob", "grep":
		tc.Kind, tc.Title = "search", "Search "+orDot(a.Path)+" for "+strconv.Quote(a.Pattern)
		where()
	case "edit":
		tc.Kind, tc.Title = "edit", "Edit "+a.Path
		where()
	case "write":
		tc.Kind, tc.Title = "edit", "Write "+a.Path
		where()
	case "bash":
		tc.Kind, tc.Title = "execute", "Run "+shorten(a.Command, 120)
	}
	return tc
}

// abs is a workspace path made absolute, as ACP wants it.
func (t *translator) abs(p string) string {
	if p == "" {
		return t.a.root
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(t.a.root, p)
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// fileURI is the file:// URI of an absolute path (file:///C:/x on Windows).
func fileURI(abs string) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// editDiff is an edit's diff: the string it replaces and its replacement.
func editDiff(root string, args json.RawMessage) *toolCallContent {
	var a struct {
		Path      string `json:"path"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return nil
	}
	return &toolCallContent{Type: "diff", Path: absIn(root, a.Path), OldText: &a.OldString, NewText: &a.NewString}
}

// writeDiff is a write's diff: the file's new content (its arguments),
// and its old one (none for a new file) rebuilt from the unified diff of
// its permission request's details, which holds every changed line. Nil
// when the details cannot say.
func writeDiff(root string, args json.RawMessage, details map[string]any) *toolCallContent {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if json.Unmarshal(args, &a) != nil || a.Path == "" {
		return nil
	}
	d := &toolCallContent{Type: "diff", Path: absIn(root, a.Path), NewText: &a.Content}
	if isNew, _ := details["new_file"].(bool); isNew {
		return d
	}
	diff, _ := details["diff"].(string)
	old, ok := reversePatch(a.Content, diff)
	if !ok {
		return nil
	}
	d.OldText = &old
	return d
}

// reversePatch rebuilds the text a unified diff was made from, out of the
// text it made; ok is false when the diff does not fit it.
func reversePatch(after, diff string) (before string, ok bool) {
	if diff == "(no changes)" {
		return after, true
	}
	lines := strings.SplitAfter(after, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	hunks := strings.Split(diff, "\n")
	i := 0
	for i < len(hunks) && !strings.HasPrefix(hunks[i], "@@ ") {
		i++
	}
	if i == len(hunks) {
		return "", false
	}
	var out strings.Builder
	pos := 0
	same := func(l string) bool {
		return pos < len(lines) && strings.TrimSuffix(lines[pos], "\n") == l
	}
	for ; i < len(hunks); i++ {
		h := hunks[i]
		switch {
		case strings.HasPrefix(h, "@@ "):
			// @@ -a,b +c,d @@: the hunk's lines of the new text start at
			// line c (after line c when d is 0).
			f := strings.Fields(h)
			if len(f) < 3 || !strings.HasPrefix(f[2], "+") {
				return "", false
			}
			startS, countS, _ := strings.Cut(f[2][1:], ",")
			start, err := strconv.Atoi(startS)
			if err != nil {
				return "", false
			}
			if countS != "0" {
				start--
			}
			if start < pos || start > len(lines) {
				return "", false
			}
			for ; pos < start; pos++ {
				out.WriteString(lines[pos])
			}
		case strings.HasPrefix(h, " "):
			if !same(h[1:]) {
				return "", false
			}
			out.WriteString(lines[pos])
			pos++
		case strings.HasPrefix(h, "+"):
			if !same(h[1:]) {
				return "", false
			}
			pos++
		case strings.HasPrefix(h, "-"):
			out.WriteString(h[1:])
			if i+1 >= len(hunks) || !strings.HasPrefix(hunks[i+1], "\\") {
				out.WriteString("\n")
			}
		case strings.HasPrefix(h, "\\"), h == "":
		default:
			return "", false
		}
	}
	for ; pos < len(lines); pos++ {
		out.WriteString(lines[pos])
	}
	return out.String(), true
}

func absIn(root, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(root, p)
}
