package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/proto"
)

// dialog asks for a permission: the tool, what it wants, the whole diff
// (scrollable), and the answer keys. Every attached TUI opens one; the first
// answer from anywhere closes them all (see Model.permissionResolved).
type dialog struct {
	req       proto.PermissionRequest
	top       int // first diff line shown
	rejecting bool
	feedback  textinput.Model
	sent      bool
}

func newDialog(req proto.PermissionRequest) *dialog {
	fb := textinput.New()
	fb.Placeholder = "why not? (optional, Enter sends)"
	fb.Prompt = "feedback: "
	fb.CharLimit = 2000
	fb.SetVirtualCursor(false)
	return &dialog{req: req, feedback: fb}
}

func (d *dialog) diff() []string {
	s, _ := d.req.Details["diff"].(string)
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

func (m Model) dialogKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	d := m.dlg
	s := k.String()
	if d.rejecting {
		switch s {
		case "enter":
			return m, m.answer(proto.DecisionReject, d.feedback.Value())
		case "esc":
			d.rejecting = false
			d.feedback.Blur()
			return m, nil
		case "ctrl+c":
			return m.quit()
		}
		var cmd tea.Cmd
		d.feedback, cmd = d.feedback.Update(k)
		return m, cmd
	}
	page := max(1, m.bodyHeight()-8)
	switch s {
	case "a":
		return m, m.answer(proto.DecisionApproveOnce, "")
	case "s":
		return m, m.answer(proto.DecisionApproveSession, "")
	case "r":
		d.rejecting = true
		return m, d.feedback.Focus()
	case "up", "k":
		d.top--
	case "down", "j":
		d.top++
	case "pgup":
		d.top -= page
	case "pgdown":
		d.top += page
	case "ctrl+c":
		return m.quit()
	}
	d.top = max(0, min(d.top, len(d.diff())-page))
	return m, nil
}

// answer sends the decision; the dialog closes when permission.resolved
// comes back, as it does in every other client.
func (m Model) answer(decision, feedback string) tea.Cmd {
	m.dlg.sent = true
	api, ws, id := m.cfg.API, m.ws.ID, m.dlg.req.RequestID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		_, err := api.AnswerPermission(ctx, ws, id, proto.PermissionAnswer{Decision: decision, Feedback: feedback})
		return doneMsg{what: "answer", err: err}
	}
}

func (d *dialog) view(w, h int, st styles, tr *transcript) []string {
	inner := max(10, w-4)
	var lines []string
	title := fmt.Sprintf("Permission: %s (%s)", SanitizeLine(d.req.ToolName), SanitizeLine(d.req.Kind))
	lines = append(lines, st.dialogTitle.Render(ansi.Truncate(title, inner, "…")))
	for _, l := range strings.Split(wrap(Sanitize(d.req.Summary), inner), "\n") {
		lines = append(lines, l)
	}
	diff := d.diff()
	room := max(1, h-len(lines)-5)
	if len(diff) > 0 {
		end := min(len(diff), d.top+room)
		shown := diffLines(strings.Join(diff[d.top:end], "\n"), inner-2, 0, st)
		lines = append(lines, shown...)
		if len(diff) > room {
			lines = append(lines, st.dim.Render(fmt.Sprintf("lines %d-%d of %d (↑/↓, PgUp/PgDn)", d.top+1, end, len(diff))))
		}
	} else if cmd, ok := d.req.Details["command"].(string); ok {
		lines = append(lines, st.toolBody.Render(wrap("$ "+Sanitize(cmd), inner)))
	}
	lines = append(lines, "")
	switch {
	case d.rejecting:
		lines = append(lines, d.feedback.View())
	case d.sent:
		lines = append(lines, st.dim.Render("answer sent…"))
	default:
		lines = append(lines, st.key.Render("a")+" approve once  "+st.key.Render("s")+" approve for the session  "+st.key.Render("r")+" reject")
	}
	box := st.dialog.Width(w).Render(strings.Join(lines, "\n"))
	return strings.Split(box, "\n")
}
