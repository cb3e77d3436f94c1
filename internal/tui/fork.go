package tui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/proto"
)

// forker is /fork's picker: the session's prompts, the newest selected.
// Enter forks the session through the answer to the picked prompt (for the
// newest, through every stored message) and switches to the copy.
type forker struct {
	title string
	// prompts are the user messages shown; through[i] is the last message
	// of prompt i's exchange, "" for the last exchange (all of it).
	prompts []proto.Message
	through []string
	cur     int
}

// openFork lists the prompts of the transcript; with none, it forks at once.
func (m Model) openFork(title string) (tea.Model, tea.Cmd) {
	f := &forker{title: title}
	last := ""
	for _, e := range m.tr.entries {
		if e.kind != entryMessage || e.msg.ID == "" {
			continue
		}
		if e.msg.Role == proto.RoleUser {
			if len(f.prompts) > 0 {
				f.through = append(f.through, last)
			}
			f.prompts = append(f.prompts, e.msg)
		}
		last = e.msg.ID
	}
	if len(f.prompts) == 0 {
		return m, m.fork(title, "")
	}
	f.through = append(f.through, "")
	f.cur = len(f.prompts) - 1
	m.fk = f
	return m, nil
}

func (m Model) fork(title, through string) tea.Cmd {
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		s, err := api.ForkSession(ctx, ws, sid, proto.ForkRequest{ThroughMessageID: through, Title: title})
		return switchMsg{sess: s, err: err, what: "fork", note: "forked: this is the copy; /sessions goes back"}
	}
}

func (m Model) forkKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	f := m.fk
	switch k.String() {
	case "esc", "q", "ctrl+c":
		m.fk = nil
	case "up", "k":
		f.cur = max(0, f.cur-1)
	case "down", "j":
		f.cur = min(len(f.prompts)-1, f.cur+1)
	case "enter":
		m.fk = nil
		return m, m.fork(f.title, f.through[f.cur])
	}
	return m, nil
}

func (m Model) forkView(w, h int) []string {
	f, st := m.fk, m.st
	lines := []string{st.dialogTitle.Render("Fork") + st.dim.Render("  ↑/↓ pick · Enter fork · Esc close"),
		st.dim.Render(ansi.Truncate("The copy holds the conversation through the answer to the picked prompt.", w, "…"))}
	labels := make([]string, len(f.prompts))
	for i, p := range f.prompts {
		labels[i] = p.CreatedAt.Local().Format("Jan _2 15:04:05") + "  " + SanitizeLine(promptText(p))
	}
	return append(lines, pickRows(labels, f.cur, max(1, h-len(lines)), w, st)...)
}

// pickRows draws a list's window of at most rows labels around cur, the
// current one highlighted.
func pickRows(labels []string, cur, rows, w int, st styles) []string {
	var out []string
	first := max(0, min(cur-rows/2, len(labels)-rows))
	for i := first; i < len(labels) && i < first+rows; i++ {
		line := ansi.Truncate(" "+labels[i], w, "…")
		if i == cur {
			line = st.selected.Render(line + strings.Repeat(" ", max(0, w-ansi.StringWidth(line))))
		}
		out = append(out, line)
	}
	return out
}

// promptText is a user message's text on one line.
func promptText(m proto.Message) string {
	for _, p := range m.Parts {
		if p.Type == proto.PartText && strings.TrimSpace(p.Text) != "" {
			return strings.Join(strings.Fields(p.Text), " ")
		}
	}
	return "(no text)"
}
