package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"charm.land/glamour/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/proto"
)

// maxResultLines is how much of a tool's result a block shows: the first
// lines say what happened; the rest is for the model.
const maxResultLines = 4

// maxDiffLines bounds the diff shown in a tool block; the permission dialog
// shows all of it.
const maxDiffLines = 12

// entryKind tells transcript entries apart.
type entryKind int

const (
	entryMessage entryKind = iota
	entryNotice
	entryError
	entrySteer
)

// entry is one block of the transcript: a message, or a notice the TUI
// writes itself (a canceled run, a compaction, an error). It caches its
// rendered lines for the width, background and folding it was drawn with,
// so that a frame renders only what changed.
type entry struct {
	kind   entryKind
	msg    proto.Message
	author string // display name of a user message's author, "" when unknown
	text   string // notices
	// streaming holds the text of parts announced by message.delta that
	// the message does not hold yet, by part index.
	streaming map[int]*streamPart

	version int
	cache   renderCache
}

type streamPart struct {
	kind string
	text strings.Builder
}

type renderCache struct {
	valid   bool
	version int
	width   int
	dark    bool
	unfold  bool
	lines   []string
}

// toolState is what the TUI knows of a tool call beyond the message.
type toolState struct {
	state  string // running, done, failed, waiting for permission
	result *proto.Part
	diff   string
}

// transcript is the session's messages and notices, drawn from the bottom
// up: only the entries that reach the screen are ever rendered.
type transcript struct {
	entries []*entry
	byID    map[string]*entry
	tools   map[string]*toolState
	// toolOwner maps a tool call id to the entry of the assistant message
	// that made it, so a result redraws that block.
	toolOwner map[string]*entry
	// offset is how many lines the view is scrolled up from the end; 0
	// follows the end.
	offset int
	unfold bool
	// lastWidth and lastDark are what the last frame was drawn with.
	lastWidth int
	lastDark  bool
	md        *markdown
	me        string // this TUI's client id
	names     map[string]string
}

func newTranscript(me string) transcript {
	return transcript{byID: map[string]*entry{}, tools: map[string]*toolState{}, toolOwner: map[string]*entry{},
		md: &markdown{}, me: me, names: map[string]string{}}
}

// reset replaces the transcript with a session's history.
func (t *transcript) reset(msgs []proto.Message) {
	md, me, names, unfold, w, dark := t.md, t.me, t.names, t.unfold, t.lastWidth, t.lastDark
	*t = newTranscript(me)
	t.md, t.names, t.unfold, t.lastWidth, t.lastDark = md, names, unfold, w, dark
	for _, m := range msgs {
		t.upsert(m, "")
	}
}

func (t *transcript) add(e *entry) {
	t.entries = append(t.entries, e)
	t.grew(e, 0)
}

func (t *transcript) notice(kind entryKind, text string) {
	t.add(&entry{kind: kind, text: text})
}

// shows reports whether a message of the run already ends with a finish
// part of that reason, so the run's end need not be said twice.
func (t *transcript) shows(runID, reason string) bool {
	for i := len(t.entries) - 1; i >= 0; i-- {
		e := t.entries[i]
		if e.kind != entryMessage || e.msg.RunID != runID || runID == "" {
			continue
		}
		for _, p := range e.msg.Parts {
			if p.Type == proto.PartFinish && p.Reason == reason {
				return true
			}
		}
	}
	return false
}

// upsert adds or replaces a message.
func (t *transcript) upsert(m proto.Message, author string) {
	e, ok := t.byID[m.ID]
	if !ok {
		e = &entry{kind: entryMessage}
		t.byID[m.ID] = e
		t.entries = append(t.entries, e)
	}
	before := e.height()
	e.msg = m
	if author == "" && m.Author != nil {
		// A message loaded over REST names its author itself (section 9).
		author = m.Author.Name
	}
	if author != "" && m.ClientID != "" {
		t.names[m.ClientID] = author
	}
	if author != "" {
		e.author = author
	}
	for i := range m.Parts {
		delete(e.streaming, i)
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case proto.PartToolCall:
			t.toolOwner[p.ID] = e
		case proto.PartToolResult:
			ts := t.tool(p.ToolCallID)
			ts.result = p
			if p.IsError {
				ts.state = "failed"
			} else {
				ts.state = "done"
			}
			t.touch(t.toolOwner[p.ToolCallID])
		}
	}
	e.version++
	t.grew(e, before)
}

// delta appends streamed text to a message's part.
func (t *transcript) delta(d proto.MessageDelta) {
	e, ok := t.byID[d.MessageID]
	if !ok {
		e = &entry{kind: entryMessage, msg: proto.Message{ID: d.MessageID, Role: proto.RoleAssistant}}
		t.byID[d.MessageID] = e
		t.entries = append(t.entries, e)
	}
	if d.PartIndex < len(e.msg.Parts) {
		return // already complete: a replayed delta
	}
	if e.streaming == nil {
		e.streaming = map[int]*streamPart{}
	}
	sp := e.streaming[d.PartIndex]
	if sp == nil {
		sp = &streamPart{kind: d.Kind}
		e.streaming[d.PartIndex] = sp
	}
	before := e.height()
	sp.text.WriteString(d.Text)
	e.version++
	t.grew(e, before)
}

func (t *transcript) tool(id string) *toolState {
	ts := t.tools[id]
	if ts == nil {
		ts = &toolState{}
		t.tools[id] = ts
	}
	return ts
}

// setTool changes a tool call's state and redraws its block.
func (t *transcript) setTool(id string, f func(*toolState)) {
	f(t.tool(id))
	t.touch(t.toolOwner[id])
}

func (t *transcript) touch(e *entry) {
	if e == nil {
		return
	}
	before := e.height()
	e.version++
	t.grew(e, before)
}

// grew keeps a scrolled-up view where it is when an entry changes height:
// the lines added below push the offset, not the text being read.
func (t *transcript) grew(e *entry, before int) {
	if t.offset == 0 || t.lastWidth == 0 {
		return
	}
	after := len(t.render(e, t.lastWidth, t.lastDark))
	if before == 0 && after > 0 {
		after++ // and the blank line before it
	}
	t.offset = max(0, t.offset+after-before)
}

// height is how many lines the entry took when last drawn.
func (e *entry) height() int {
	if !e.cache.valid {
		return 0
	}
	return len(e.cache.lines)
}

// lines returns the last n lines of the transcript that end offset lines
// above its end, rendering entries from the last one up until it has
// them; the second result is false when the transcript is shorter.
func (t *transcript) window(width, height int, dark bool) (out []string, full bool) {
	t.lastWidth, t.lastDark = width, dark
	need := t.offset + height
	var rev [][]string
	got := 0
	for i := len(t.entries) - 1; i >= 0 && got < need; i-- {
		l := t.render(t.entries[i], width, dark)
		if len(l) == 0 {
			continue
		}
		rev = append(rev, l)
		got += len(l) + 1 // a blank line between entries
	}
	all := make([]string, 0, got)
	for i := len(rev) - 1; i >= 0; i-- {
		all = append(all, rev[i]...)
		if i > 0 {
			all = append(all, "")
		}
	}
	end := len(all) - t.offset
	if end < 0 {
		end = 0
	}
	start := end - height
	if start < 0 {
		start = 0
	}
	return all[start:end], got >= need
}

// scroll moves the view by n lines (positive: up), clamped to the top.
func (t *transcript) scroll(n, width, height int, dark bool) {
	t.offset += n
	if t.offset <= 0 {
		t.offset = 0
		return
	}
	// Render as far up as the new offset needs, to know where the top is.
	if _, full := t.window(width, height, dark); !full {
		total := 0
		for _, e := range t.entries {
			if l := t.render(e, width, dark); len(l) > 0 {
				total += len(l) + 1
			}
		}
		t.offset = max(0, total-1-height)
	}
}

// render returns the entry's lines at width, from its cache when nothing
// changed.
func (t *transcript) render(e *entry, width int, dark bool) []string {
	c := &e.cache
	if c.valid && c.version == e.version && c.width == width && c.dark == dark && c.unfold == t.unfold {
		return c.lines
	}
	st := newStyles(dark)
	var s string
	switch e.kind {
	case entryNotice:
		s = st.notice.Render(wrap("· "+Sanitize(e.text), width))
	case entryError:
		s = st.errorText.Render(wrap("✗ "+Sanitize(e.text), width))
	case entrySteer:
		s = st.steer.Render(wrap("↪ "+Sanitize(e.text), width))
	default:
		s = t.renderMessage(e, width, st)
	}
	var lines []string
	if s != "" {
		lines = strings.Split(s, "\n")
		for i, l := range lines {
			// No line may be wider than the screen, whatever a renderer did.
			if ansi.StringWidth(l) > width {
				lines[i] = ansi.Truncate(l, width, "")
			}
		}
	}
	*c = renderCache{valid: true, version: e.version, width: width, dark: dark, unfold: t.unfold, lines: lines}
	return lines
}

// who names the author of a user message: "you" for this TUI's client, the
// person's name when the server gave one, else the short client id.
func (t *transcript) who(clientID, author string) string {
	switch {
	case clientID != "" && clientID == t.me:
		return "you"
	case author != "":
		return SanitizeLine(author)
	case t.names[clientID] != "":
		return SanitizeLine(t.names[clientID])
	case clientID != "":
		return SanitizeLine(shortID(clientID))
	}
	return "someone"
}

func (t *transcript) renderMessage(e *entry, width int, st styles) string {
	m := e.msg
	var b []string
	switch m.Role {
	case proto.RoleUser:
		name := t.who(m.ClientID, e.author)
		style := st.author
		if name == "you" {
			style = st.you
		}
		b = append(b, style.Render("▍"+name))
	case proto.RoleAssistant:
		head := "◆ assistant"
		if m.Model != "" {
			head += " · " + SanitizeLine(m.Model)
		}
		b = append(b, st.assistant.Render(ansi.Truncate(head, width, "…")))
	case proto.RoleTool:
		// Results are drawn in the block of the call they answer.
		return ""
	}
	for i, p := range m.Parts {
		if s := t.renderPart(p, width, st, m.Role); s != "" {
			b = append(b, s)
		}
		_ = i
	}
	for i := len(m.Parts); i < len(m.Parts)+len(e.streaming); i++ {
		sp := e.streaming[i]
		if sp == nil {
			continue
		}
		p := proto.Part{Type: proto.PartText, Text: sp.text.String()}
		if sp.kind == "reasoning" {
			p.Type = proto.PartReasoning
		}
		if s := t.renderPart(p, width, st, m.Role); s != "" {
			b = append(b, s)
		}
	}
	if len(b) == 1 && m.Role == proto.RoleAssistant {
		b = append(b, st.dim.Render("…"))
	}
	return strings.Join(b, "\n")
}

func (t *transcript) renderPart(p proto.Part, width int, st styles, role string) string {
	switch p.Type {
	case proto.PartText:
		if role == proto.RoleUser {
			return wrap(Sanitize(p.Text), width)
		}
		return t.md.render(p.Text, width, st.dark)
	case proto.PartReasoning:
		if t.unfold {
			return st.dim.Render(wrap("∴ "+Sanitize(p.Text), width))
		}
		first := strings.TrimSpace(SanitizeLine(strings.Join(strings.Fields(p.Text), " ")))
		return st.dim.Render(ansi.Truncate("∴ thinking: "+first, width-11, "…") + " (ctrl+o)")
	case proto.PartToolCall:
		return t.renderTool(p, width, st)
	case proto.PartAttachment:
		name := p.DisplayName
		if name == "" {
			name = p.Path
		}
		return st.dim.Render(ansi.Truncate("📎 "+SanitizeLine(name), width, "…"))
	case proto.PartSummary:
		return st.notice.Render(ansi.Truncate("· the conversation before this point was summarized", width, "…"))
	case proto.PartFinish:
		switch p.Reason {
		case proto.FinishError:
			return st.errorText.Render(wrap("✗ error: "+Sanitize(p.Message), width))
		case proto.FinishCanceled:
			return st.notice.Render("· canceled")
		case proto.FinishInterrupted:
			return st.notice.Render("· interrupted")
		case proto.FinishMaxTokens:
			return st.notice.Render("· cut at the output limit")
		}
	}
	return ""
}

func (t *transcript) renderTool(p proto.Part, width int, st styles) string {
	ts := t.tools[p.ID]
	state := "requested"
	if ts != nil && ts.state != "" {
		// permission.resolved's result becomes the state: the server's
		// text, not ours.
		state = SanitizeLine(ts.state)
	}
	head := fmt.Sprintf("⚙ %s %s", SanitizeLine(p.Name), SanitizeLine(shortArgs(p.Arguments)))
	head = ansi.Truncate(head, max(10, width-ansi.StringWidth(state)-4), "…") + " [" + state + "]"
	lines := []string{st.toolHead.Render(head)}
	diff := argsDiff(p)
	if ts != nil && ts.diff != "" {
		diff = ts.diff // the server's, with context, from the permission request
	}
	if diff != "" {
		lines = append(lines, diffLines(diff, width-2, maxDiffLines, st)...)
	}
	if ts != nil && ts.result != nil {
		res := strings.Split(strings.TrimRight(Sanitize(ts.result.Content), "\n"), "\n")
		more := len(res) - maxResultLines
		if more > 0 {
			res = res[:maxResultLines]
		}
		style := st.toolBody
		if ts.result.IsError {
			style = st.errorText
		}
		for _, l := range res {
			lines = append(lines, style.Render("  "+ansi.Truncate(l, width-2, "…")))
		}
		if more > 0 {
			lines = append(lines, st.dim.Render(fmt.Sprintf("  … %d more lines", more)))
		}
	}
	return strings.Join(lines, "\n")
}

// argsDiff is the change a file tool's arguments describe, as diff lines,
// for a call no permission request came with (a rule or the session's mode
// allowed it): edit's old and new strings, write's content.
func argsDiff(p proto.Part) string {
	var a struct {
		Path      string `json:"path"`
		OldString string `json:"old_string"`
		NewString string `json:"new_string"`
		Content   string `json:"content"`
	}
	if json.Unmarshal(p.Arguments, &a) != nil {
		return ""
	}
	prefix := func(s, mark string) string {
		if s == "" {
			return ""
		}
		return mark + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+mark) + "\n"
	}
	switch p.Name {
	case "edit":
		return prefix(a.OldString, "-") + prefix(a.NewString, "+")
	case "write":
		return prefix(a.Content, "+")
	}
	return ""
}

// diffLines colours a unified diff's lines, at most n of them (0: all).
func diffLines(diff string, width, n int, st styles) []string {
	raw := strings.Split(strings.TrimRight(Sanitize(diff), "\n"), "\n")
	var out []string
	for i, l := range raw {
		if n > 0 && i == n {
			out = append(out, st.dim.Render(fmt.Sprintf("  … %d more lines", len(raw)-n)))
			break
		}
		l = "  " + ansi.Truncate(l, width, "…")
		switch {
		case strings.HasPrefix(l, "  +"):
			l = st.diffAdd.Render(l)
		case strings.HasPrefix(l, "  -"):
			l = st.diffDel.Render(l)
		default:
			l = st.dim.Render(l)
		}
		out = append(out, l)
	}
	return out
}

// shortArgs is a tool call's arguments on one line: the values of a JSON
// object, each cut short.
func shortArgs(raw json.RawMessage) string {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return strings.Join(strings.Fields(string(raw)), " ")
	}
	// The argument that says what a call is about, when it has one; the
	// rest (a file's content, say) is in the diff below.
	for _, k := range []string{"command", "path", "pattern", "url"} {
		if v, ok := obj[k].(string); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sortStrings(keys)
	var parts []string
	for _, k := range keys {
		v := fmt.Sprint(obj[k])
		v = strings.Join(strings.Fields(v), " ")
		if r := []rune(v); len(r) > 40 {
			v = string(r[:39]) + "…"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// wrap breaks plain text at width.
func wrap(s string, width int) string {
	if width < 1 {
		width = 1
	}
	return lipgloss.Wrap(s, width, " ")
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// markdown renders assistant text with glamour, one renderer per width and
// background.
type markdown struct {
	width int
	dark  bool
	r     *glamour.TermRenderer
}

func (md *markdown) render(text string, width int, dark bool) string {
	clean := Sanitize(text)
	if md.r == nil || md.width != width || md.dark != dark {
		style := "light"
		if dark {
			style = "dark"
		}
		r, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithWordWrap(max(10, width-4)))
		if err != nil {
			return wrap(clean, width)
		}
		md.r, md.width, md.dark = r, width, dark
	}
	out, err := md.r.Render(clean)
	if err != nil {
		return wrap(clean, width)
	}
	// Whatever glamour made of the text (links become OSC 8 in some
	// styles), only styling may reach the terminal.
	return strings.Trim(keepSGR(out), "\n")
}
