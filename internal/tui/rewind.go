package tui

import (
	"errors"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// rewinder is /rewind's picker (contract section 11): the session's
// checkpoints, newest selected, with the diff a rewind to the selected one
// would undo. Enter rewinds files and history; a rewind_conflict answer
// names the files someone edited, and f forces it over them.
type rewinder struct {
	list   []proto.Checkpoint
	loaded bool
	cur    int
	diffs  map[string]*proto.CheckpointDiff
	top    int // first diff line shown
	// conflict is the server's rewind_conflict message; f forces.
	conflict string
	// problem is any other refusal (session_busy, say), shown in place.
	problem string
	sent    bool
}

type checkpointsMsg struct {
	sid  string
	list []proto.Checkpoint
	err  error
}

type checkpointDiffMsg struct {
	sid, cid string
	diff     proto.CheckpointDiff
	err      error
}

type rewoundMsg struct {
	sid string
	res proto.RewindResult
	err error
}

// openRewind opens the picker and loads the checkpoints.
func (m Model) openRewind() (tea.Model, tea.Cmd) {
	m.rw = &rewinder{diffs: map[string]*proto.CheckpointDiff{}}
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return m, func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		l, err := api.Checkpoints(ctx, ws, sid)
		return checkpointsMsg{sid: sid, list: l, err: err}
	}
}

func (r *rewinder) selected() (proto.Checkpoint, bool) {
	if r.cur < 0 || r.cur >= len(r.list) {
		return proto.Checkpoint{}, false
	}
	return r.list[r.cur], true
}

// loadDiff fetches the selected checkpoint's diff unless it is known.
func (m Model) loadDiff() tea.Cmd {
	cp, ok := m.rw.selected()
	if !ok || m.rw.diffs[cp.ID] != nil {
		return nil
	}
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		d, err := api.CheckpointDiff(ctx, ws, sid, cp.ID)
		return checkpointDiffMsg{sid: sid, cid: cp.ID, diff: d, err: err}
	}
}

// rewindUpdate handles the picker's answers from the server.
func (m Model) rewindUpdate(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case checkpointsMsg:
		if m.rw == nil || msg.sid != m.sess.ID {
			return m, nil
		}
		if msg.err != nil {
			m.rw = nil
			m.flash = "checkpoints: " + explain(msg.err)
			return m, nil
		}
		m.rw.list, m.rw.loaded = msg.list, true
		m.rw.cur = len(msg.list) - 1
		return m, m.loadDiff()
	case checkpointDiffMsg:
		if m.rw == nil || msg.sid != m.sess.ID {
			return m, nil
		}
		if msg.err != nil {
			m.rw.problem = "diff: " + explain(msg.err)
			return m, nil
		}
		m.rw.diffs[msg.cid] = &msg.diff
	case rewoundMsg:
		if msg.sid != m.sess.ID {
			return m, nil
		}
		if msg.err == nil {
			m.rw = nil
			m.flash = fmt.Sprintf("rewound: %d files back, %d messages out of the history", len(msg.res.Files), msg.res.RemovedMessages)
			return m, nil
		}
		if m.rw == nil {
			m.flash = "rewind: " + explain(msg.err)
			return m, nil
		}
		m.rw.sent = false
		var e *client.APIError
		switch {
		case client.IsCode(msg.err, proto.CodeRewindConflict) && errors.As(msg.err, &e):
			m.rw.conflict = e.Message
		case client.IsCode(msg.err, proto.CodeSessionBusy):
			m.rw.problem = "the session is busy: a run is going on or queued; rewind once it ends (Esc cancels it after closing this)"
		default:
			m.rw.problem = "rewind: " + explain(msg.err)
		}
	}
	return m, nil
}

// rewind asks the server to take files and history back to the selected
// checkpoint.
func (m Model) rewind(force bool) tea.Cmd {
	cp, ok := m.rw.selected()
	if !ok || m.rw.sent {
		return nil
	}
	m.rw.sent, m.rw.problem = true, ""
	if force {
		m.rw.conflict = ""
	}
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		yes := true
		res, err := api.Rewind(ctx, ws, sid, proto.RewindRequest{CheckpointID: cp.ID, Files: &yes, History: &yes, Force: force})
		return rewoundMsg{sid: sid, res: res, err: err}
	}
}

func (m Model) rewindKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	r := m.rw
	page := max(1, m.bodyHeight()-10)
	switch k.String() {
	case "esc", "q", "ctrl+c":
		m.rw = nil
		return m, nil
	case "enter":
		if r.conflict != "" {
			return m, nil
		}
		return m, m.rewind(false)
	case "f":
		if r.conflict == "" {
			return m, nil
		}
		return m, m.rewind(true)
	case "up", "k":
		if r.cur > 0 {
			r.cur, r.top, r.conflict, r.problem = r.cur-1, 0, "", ""
		}
		return m, m.loadDiff()
	case "down", "j":
		if r.cur < len(r.list)-1 {
			r.cur, r.top, r.conflict, r.problem = r.cur+1, 0, "", ""
		}
		return m, m.loadDiff()
	case "pgup":
		r.top -= page
	case "pgdown":
		r.top += page
	}
	r.top = max(0, min(r.top, len(r.diffLines())-page))
	return m, nil
}

// diffLines is the selected checkpoint's diff, sanitised, one line each.
func (r *rewinder) diffLines() []string {
	cp, ok := r.selected()
	if !ok || r.diffs[cp.ID] == nil || r.diffs[cp.ID].Diff == "" {
		return nil
	}
	return strings.Split(strings.TrimRight(Sanitize(r.diffs[cp.ID].Diff), "\n"), "\n")
}

// promptOf is the first line of the checkpoint's user message, as the
// transcript holds it.
func (t *transcript) promptOf(messageID string) string {
	e := t.byID[messageID]
	if e == nil {
		return "(a prompt no longer shown)"
	}
	return promptText(e.msg)
}

func (m Model) rewindView(w, h int) []string {
	r, st := m.rw, m.st
	lines := []string{st.dialogTitle.Render("Rewind") + st.dim.Render("  ↑/↓ pick · PgUp/PgDn scroll · Enter rewind · Esc close")}
	switch {
	case !r.loaded:
		return append(lines, st.dim.Render("loading checkpoints…"))
	case len(r.list) == 0:
		return append(lines, st.dim.Render("no checkpoints: no run of this session has changed files"))
	}
	lines = append(lines, st.dim.Render("Rewinding undoes the picked prompt's run and all later ones: files and history."))
	labels := make([]string, len(r.list))
	for i, cp := range r.list {
		labels[i] = cp.CreatedAt.Local().Format("Jan _2 15:04:05") + "  " + SanitizeLine(m.tr.promptOf(cp.MessageID))
		if cp.Missing {
			labels[i] += "  (not saved: no way back)"
		}
	}
	lines = append(lines, pickRows(labels, r.cur, 5, w, st)...)
	cp, _ := r.selected()
	var foot []string
	switch {
	case r.conflict != "":
		for _, l := range strings.Split(wrap("refused: "+SanitizeLine(r.conflict), w), "\n") {
			foot = append(foot, st.statusWarn.Render(l))
		}
		foot = append(foot, st.key.Render("f")+" force the rewind over these edits  "+st.key.Render("Esc")+" keep them")
	case r.problem != "":
		for _, l := range strings.Split(wrap(SanitizeLine(r.problem), w), "\n") {
			foot = append(foot, st.statusWarn.Render(l))
		}
	case r.sent:
		foot = append(foot, st.dim.Render("rewinding…"))
	default:
		foot = append(foot, st.key.Render("Enter")+" rewind files and history to before this prompt")
	}
	d := r.diffs[cp.ID]
	if d == nil {
		lines = append(lines, st.dim.Render("loading the diff…"))
		return append(lines, foot...)
	}
	var files []string
	for _, f := range d.Files {
		files = append(files, SanitizeLine(f.Path)+" ("+SanitizeLine(f.Change)+")")
	}
	if len(files) == 0 {
		lines = append(lines, st.dim.Render("no file differs from this checkpoint now"))
	} else {
		lines = append(lines, ansi.Truncate("undoes: "+strings.Join(files, ", "), w, "…"))
	}
	diff := r.diffLines()
	room := max(1, h-len(lines)-len(foot)-1)
	if len(diff) > 0 {
		top := min(r.top, max(0, len(diff)-1))
		end := min(len(diff), top+room)
		lines = append(lines, diffLines(strings.Join(diff[top:end], "\n"), w-2, 0, st)...)
		if len(diff) > room {
			lines = append(lines, st.dim.Render(fmt.Sprintf("lines %d-%d of %d (PgUp/PgDn)", top+1, end, len(diff))))
		}
	}
	return append(lines, foot...)
}

// rewound applies another's rewind (or this TUI's own): the history is
// loaded again, so the rewound messages leave the transcript.
func (m Model) rewound(ev proto.Event) (tea.Model, tea.Cmd) {
	d, err := client.DecodeData[proto.SessionRewound](ev)
	if err != nil {
		return m, nil
	}
	who := "someone"
	if a := ev.Actor; a != nil {
		who = m.tr.who(a.ClientID, a.Name)
	}
	note := fmt.Sprintf("%s rewound the session: %d files back, %d messages out of the history", who, len(d.Files), d.RemovedMessages)
	// An open picker's list and diffs are stale now.
	m.rw = nil
	m.flash = note
	// The transcript stays on screen until the new history replaces it;
	// events meanwhile wait for it, as on a switch.
	m.loading = true
	m.early = nil
	return m, m.load(m.sess.ID)
}
