package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/proto"
)

// picker lists the workspace's sessions: ↑/↓ move, typing filters, Enter
// switches, Esc closes.
type picker struct {
	list   []proto.Session
	filter string
	cur    int
}

func (p *picker) shown() []proto.Session {
	if p.filter == "" {
		return p.list
	}
	f := strings.ToLower(p.filter)
	var out []proto.Session
	for _, s := range p.list {
		if strings.Contains(strings.ToLower(s.Title), f) || strings.HasPrefix(s.ID, p.filter) {
			out = append(out, s)
		}
	}
	return out
}

func (p *picker) clamp() {
	p.cur = max(0, min(p.cur, len(p.shown())-1))
}

func (m Model) pickerKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	p := m.picker
	switch k.String() {
	case "esc", "ctrl+c":
		m.picker = nil
		return m, nil
	case "up":
		p.cur--
	case "down":
		p.cur++
	case "backspace":
		if p.filter != "" {
			r := []rune(p.filter)
			p.filter = string(r[:len(r)-1])
		}
	case "enter":
		shown := p.shown()
		m.picker = nil
		if len(shown) == 0 {
			return m, nil
		}
		s := shown[p.cur]
		if s.ID == m.sess.ID {
			return m, nil
		}
		return m.switchTo(s)
	default:
		if t := k.Key().Text; t != "" {
			p.filter += t
			p.cur = 0
		}
	}
	p.clamp()
	return m, nil
}

func (p *picker) view(w, h int, st styles) []string {
	lines := []string{st.dialogTitle.Render("Sessions") + st.dim.Render("  ↑/↓ move · type to filter · Enter switch · Esc close")}
	lines = append(lines, "filter: "+SanitizeLine(p.filter))
	shown := p.shown()
	if p.list == nil {
		lines = append(lines, st.dim.Render("loading…"))
	} else if len(shown) == 0 {
		lines = append(lines, st.dim.Render("no session matches"))
	}
	room := max(1, h-len(lines))
	first := max(0, p.cur-room+1)
	for i := first; i < len(shown) && i < first+room; i++ {
		s := shown[i]
		title := SanitizeLine(s.Title)
		if title == "" {
			title = "(untitled)"
		}
		busy := ""
		if s.Busy {
			busy = " · working"
		}
		line := fmt.Sprintf(" %s  %s  %d messages · %s%s", SanitizeLine(shortID(s.ID)), title, s.MessageCount, SanitizeLine(s.Model), busy)
		line = ansi.Truncate(line, w, "…")
		if i == p.cur {
			line = st.selected.Render(line + strings.Repeat(" ", max(0, w-ansi.StringWidth(line))))
		}
		lines = append(lines, line)
	}
	return lines
}
