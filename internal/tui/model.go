// Package tui is Tandem's terminal client: a Bubble Tea program that shows
// one session of a workspace (every client's prompts and answers, live),
// sends prompts, answers permission requests and runs the session commands.
// It talks to the server only through the API (the client SDK) and the
// event stream its runner feeds in as EventMsg; everything it draws from
// the server goes through Sanitize first.
package tui

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// callTimeout bounds one REST call made for a key or command.
const callTimeout = 30 * time.Second

// maxInputLines is how tall the input grows before it scrolls.
const maxInputLines = 6

// Config is what a Model starts with.
type Config struct {
	API API
	// Files is the workspace's directory, for @path completion and
	// attachments; nil turns both off.
	Files fs.FS
	// Hosting is set when the server runs inside this process: quitting
	// stops it, so a quit while a run goes on is asked first.
	Hosting bool
	// Note is shown in the status line (where the in-process server
	// listens, say).
	Note string
}

// EventMsg carries one event of the workspace's stream.
type EventMsg struct{ Event proto.Event }

// ConnMsg says how the connection to the server stands: "connecting…",
// "live" or "reconnecting…", with the error that caused it, if any.
type ConnMsg struct {
	State string
	Err   error
}

// ReadyMsg is sent once the workspace is open and the first session chosen.
type ReadyMsg struct {
	Workspace proto.Workspace
	Session   proto.Session
}

type loadedMsg struct {
	sid     string
	msgs    []proto.Message
	pending proto.PendingWork
	status  proto.AgentStatus
	err     error
}

// retryLoadMsg loads a session again after a failed load.
type retryLoadMsg struct{ sid string }

// retryLoad is the pause before a failed session load is tried again.
const retryLoad = 2 * time.Second

// maxEarly bounds the events kept while a session's history loads.
const maxEarly = 10000

type switchMsg struct {
	sess proto.Session
	err  error
	what string
	// note is shown once switched.
	note string
}

type sessionMsg struct {
	sess proto.Session
	err  error
	what string
}

type sessionsMsg struct {
	list []proto.Session
	err  error
}

type acceptedMsg struct {
	acc proto.PromptAccepted
	err error
}

type doneMsg struct {
	what string
	err  error
}

// fatalMsg ends the program with an error that retrying cannot fix.
type fatalMsg struct{ err error }

type queued struct {
	runID, prompt, clientID string
}

// Model is the TUI's state. It is a value Bubble Tea copies; the parts that
// must not be copied (render caches) sit behind pointers.
type Model struct {
	cfg    Config
	me     string
	width  int
	height int
	dark   bool
	st     styles

	ws      proto.Workspace
	sess    proto.Session
	ready   bool
	loading bool
	// early holds the session's events that came while its history loaded.
	early []proto.Event
	// stale says early overflowed and was dropped: the history being
	// loaded may predate what was dropped, so it is loaded again.
	stale bool

	conn    string
	clients int

	tr *transcript
	in textarea.Model

	active   string // running run id
	runBy    map[string]string
	queue    []queued
	perms    []proto.PermissionRequest
	dlg      *dialog
	picker   *picker
	rw       *rewinder
	fk       *forker
	help     bool
	attach   []string
	flash    string
	confirm  bool
	quitting bool
	fatal    error
}

// New returns the model; the runner sends it a ReadyMsg once connected.
func New(cfg Config) Model {
	in := textarea.New()
	in.ShowLineNumbers = false
	in.Prompt = "> "
	in.CharLimit = 0
	in.MaxHeight = 0
	in.Placeholder = "prompt, or /help"
	in.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j"))
	in.SetHeight(1)
	// The terminal's own cursor: no blinking redraws, and golden views
	// that do not depend on when they were taken.
	in.SetVirtualCursor(false)
	in.Focus()
	me := cfg.API.ClientID()
	tr := newTranscript(me)
	m := Model{cfg: cfg, me: me, width: 80, height: 24, dark: true, st: newStyles(true),
		conn: "connecting…", tr: &tr, in: in, runBy: map[string]string{}}
	m.in.SetStyles(textarea.DefaultStyles(true))
	return m
}

// Init asks the terminal for its background colour.
func (m Model) Init() tea.Cmd { return tea.RequestBackgroundColor }

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = max(msg.Width, 20), max(msg.Height, 8)
		m.in.SetWidth(m.width)
		return m, nil
	case tea.BackgroundColorMsg:
		m.dark = msg.IsDark()
		m.st = newStyles(m.dark)
		m.in.SetStyles(textarea.DefaultStyles(m.dark))
		return m, nil
	case ReadyMsg:
		m.ws, m.ready = msg.Workspace, true
		m.clients = msg.Workspace.Clients
		return m.switchTo(msg.Session)
	case ConnMsg:
		m.conn = msg.State
		if msg.Err != nil && msg.State != "live" {
			m.flash = "server: " + msg.Err.Error()
		}
		return m, nil
	case EventMsg:
		return m.event(msg.Event)
	case fatalMsg:
		m.fatal = msg.err
		return m, tea.Quit
	case loadedMsg:
		return m.loaded(msg)
	case retryLoadMsg:
		if msg.sid == m.sess.ID && m.loading {
			return m, m.load(msg.sid)
		}
		return m, nil
	case switchMsg:
		if msg.err != nil {
			m.flash = msg.what + ": " + explain(msg.err)
			return m, nil
		}
		next, cmd := m.switchTo(msg.sess)
		if msg.note != "" {
			mm := next.(Model)
			mm.flash = msg.note
			next = mm
		}
		return next, cmd
	case sessionMsg:
		if msg.err != nil {
			m.flash = msg.what + ": " + explain(msg.err)
			return m, nil
		}
		if msg.sess.ID == m.sess.ID {
			m.sess = msg.sess
		}
		if msg.what != "" {
			m.flash = msg.what
		}
		return m, nil
	case sessionsMsg:
		if msg.err != nil {
			m.flash = "sessions: " + explain(msg.err)
			m.picker = nil
			return m, nil
		}
		if m.picker != nil {
			m.picker.list = msg.list
			m.picker.clamp()
		}
		return m, nil
	case checkpointsMsg, checkpointDiffMsg, rewoundMsg:
		return m.rewindUpdate(msg)
	case acceptedMsg:
		if msg.err != nil {
			m.flash = "prompt: " + explain(msg.err)
			return m, nil
		}
		switch msg.acc.State {
		case proto.RunQueued:
			m.flash = fmt.Sprintf("queued (position %d)", msg.acc.Position)
		case proto.RunSteered:
			m.flash = "steered into the running run"
		}
		return m, nil
	case doneMsg:
		if msg.err != nil && !client.IsCode(msg.err, proto.CodeAlreadyResolved) {
			m.flash = msg.what + ": " + explain(msg.err)
		} else if msg.err == nil && msg.what != "" {
			m.flash = msg.what
		}
		return m, nil
	case quitCheckMsg:
		if msg.busy {
			m.confirm = true
			return m, nil
		}
		m.quitting = true
		return m, tea.Quit
	case tea.KeyPressMsg:
		return m.key(msg)
	case tea.MouseWheelMsg:
		switch msg.Button {
		case tea.MouseWheelUp:
			m.scroll(3)
		case tea.MouseWheelDown:
			m.scroll(-3)
		}
		return m, nil
	case tea.PasteMsg:
		if m.dlg == nil && m.picker == nil && m.rw == nil && m.fk == nil {
			var cmd tea.Cmd
			m.in, cmd = m.in.Update(msg)
			m.fitInput()
			return m, cmd
		}
		return m, nil
	}
	return m, nil
}

func (m *Model) scroll(n int) {
	m.tr.scroll(n, m.width, m.bodyHeight(), m.dark)
}

// switchTo shows another session: its history, pending requests and runs
// are loaded afresh.
func (m Model) switchTo(s proto.Session) (tea.Model, tea.Cmd) {
	m.sess = s
	m.loading = true
	m.early, m.stale = nil, false
	m.perms = nil
	m.dlg = nil
	m.rw = nil
	m.fk = nil
	m.queue = nil
	m.active = ""
	m.tr.reset(nil)
	m.flash = ""
	return m, m.load(s.ID)
}

func (m Model) load(sid string) tea.Cmd {
	api, ws := m.cfg.API, m.ws.ID
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		msgs, err := api.Messages(ctx, ws, sid)
		if err != nil {
			return loadedMsg{sid: sid, err: err}
		}
		pend, err := api.Pending(ctx, ws, sid)
		if err != nil {
			return loadedMsg{sid: sid, err: err}
		}
		st, err := api.AgentStatus(ctx, ws, sid)
		return loadedMsg{sid: sid, msgs: msgs, pending: pend, status: st, err: err}
	}
}

// refreshPending reloads what may have changed while the stream was away:
// permissions asked and runs started or ended meanwhile.
func (m Model) refreshPending() tea.Cmd {
	if m.sess.ID == "" {
		return nil
	}
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		pend, err := api.Pending(ctx, ws, sid)
		if err != nil {
			return doneMsg{what: "pending requests", err: err}
		}
		st, err := api.AgentStatus(ctx, ws, sid)
		return loadedMsg{sid: sid, pending: pend, status: st, err: err, msgs: nil}
	}
}

func (m Model) loaded(msg loadedMsg) (tea.Model, tea.Cmd) {
	if msg.sid != m.sess.ID {
		return m, nil
	}
	if msg.err != nil {
		m.flash = "load session: " + explain(msg.err)
		if !m.loading {
			return m, nil
		}
		// The events meanwhile wait (at most maxEarly: see event). The
		// history fetched next holds what any dropped ones said.
		m.stale = false
		sid := msg.sid
		return m, tea.Tick(retryLoad, func(time.Time) tea.Msg { return retryLoadMsg{sid: sid} })
	}
	if m.loading && m.stale {
		m.early, m.stale = nil, false
		return m, m.load(msg.sid)
	}
	if m.loading {
		m.tr.reset(msg.msgs)
		m.loading = false
		for _, hm := range msg.msgs {
			if hm.Role == proto.RoleUser && hm.RunID != "" && hm.ClientID != "" {
				m.runBy[hm.RunID] = hm.ClientID
			}
		}
	}
	m.perms = append([]proto.PermissionRequest(nil), msg.pending.Permissions...)
	for _, p := range m.perms {
		m.notePermissionDiff(p)
	}
	m.active = ""
	if msg.status.ActiveRunID != nil {
		m.active = *msg.status.ActiveRunID
	}
	m.queue = m.queue[:0]
	for _, q := range msg.status.Queued {
		m.queue = append(m.queue, queued{runID: q.RunID, prompt: q.Prompt, clientID: m.runBy[q.RunID]})
	}
	m.syncDialog()
	early := m.early
	m.early = nil
	var model tea.Model = m
	var cmds []tea.Cmd
	for _, ev := range early {
		var cmd tea.Cmd
		model, cmd = model.(Model).event(ev)
		cmds = append(cmds, cmd)
	}
	return model, tea.Batch(cmds...)
}

// syncDialog opens the dialog on the first pending permission when none is
// open.
func (m *Model) syncDialog() {
	if m.dlg != nil {
		for _, p := range m.perms {
			if p.RequestID == m.dlg.req.RequestID {
				return
			}
		}
		m.dlg = nil
	}
	if len(m.perms) > 0 {
		m.dlg = newDialog(m.perms[0])
	}
}

func (m *Model) notePermissionDiff(p proto.PermissionRequest) {
	if d, ok := p.Details["diff"].(string); ok && p.ToolCallID != "" {
		m.tr.setTool(p.ToolCallID, func(ts *toolState) {
			ts.diff = d
			ts.state = "waiting for permission"
		})
	}
}

// fitInput makes the input as tall as its text, up to maxInputLines.
func (m *Model) fitInput() {
	m.in.SetHeight(min(max(m.in.LineCount(), 1), maxInputLines))
}

// View draws the screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	if c := m.in.Cursor(); c != nil && m.dlg == nil && m.picker == nil && m.rw == nil && m.fk == nil && !m.confirm {
		c.Y += m.height - m.in.Height()
		v.Cursor = c
	}
	return v
}

// render is the screen's content, exactly height lines of at most width
// columns.
func (m Model) render() string {
	w := m.width
	lines := []string{m.header()}
	body := m.bodyHeight()
	var content []string
	switch {
	case m.confirm:
		content = m.confirmView(body)
	case m.picker != nil:
		content = m.picker.view(w, body, m.st)
	case m.rw != nil:
		content = m.rewindView(w, body)
	case m.fk != nil:
		content = m.forkView(w, body)
	case m.dlg != nil:
		content = m.dlg.view(w, body, m.st, m.tr)
	case m.help:
		content = helpView(w, body, m.st)
	default:
		content, _ = m.tr.window(w, body, m.dark)
	}
	for len(content) < body {
		content = append(content, "")
	}
	lines = append(lines, content[:body]...)
	lines = append(lines, m.extras()...)
	lines = append(lines, m.statusLine())
	lines = append(lines, strings.Split(m.in.View(), "\n")...)
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, w, "")
	}
	return strings.Join(lines, "\n")
}

// extras are the lines between the transcript and the status line: the
// completions, the attached files and the queued prompts.
func (m Model) extras() []string {
	var out []string
	if c := m.completions(); len(c) > 0 {
		out = append(out, m.st.completion.Render(ansi.Truncate("  "+strings.Join(c, "  "), m.width, "…")))
	}
	if len(m.attach) > 0 {
		out = append(out, m.st.dim.Render(ansi.Truncate("  📎 "+SanitizeLine(strings.Join(m.attach, ", ")), m.width, "…")))
	}
	for i, q := range m.queue {
		if i == 2 && len(m.queue) > 3 {
			out = append(out, m.st.dim.Render(fmt.Sprintf("  … and %d more queued", len(m.queue)-2)))
			break
		}
		line := fmt.Sprintf("  queued %d: %s", i+1, SanitizeLine(strings.Join(strings.Fields(q.prompt), " ")))
		out = append(out, m.st.dim.Render(ansi.Truncate(line, m.width, "…")))
	}
	return out
}

func (m Model) bodyHeight() int {
	h := m.height - 2 - len(m.extras()) - m.in.Height()
	return max(h, 1)
}

func (m Model) header() string {
	path := SanitizeLine(m.ws.Path)
	title := SanitizeLine(m.sess.Title)
	if title == "" && m.sess.ID != "" {
		title = "untitled " + SanitizeLine(shortID(m.sess.ID))
	}
	s := " " + path
	if title != "" {
		s += " · " + title
	}
	s = ansi.Truncate(s, m.width, "…")
	return m.st.header.Render(s + strings.Repeat(" ", max(0, m.width-ansi.StringWidth(s))))
}

func (m Model) statusLine() string {
	var parts []string
	if m.sess.Sandbox == proto.SandboxOff {
		// Said first, as the web app's badge says it: the commands reach
		// the whole machine. A narrow terminal cuts the model sooner.
		parts = append(parts, "unconfined")
	}
	model := SanitizeLine(m.sess.Model)
	if m.sess.ReasoningEffort != "" {
		model += " (" + SanitizeLine(m.sess.ReasoningEffort) + ")"
	}
	if model != "" {
		parts = append(parts, model)
	}
	if win := m.sess.Context.Window; win != nil && *win > 0 {
		parts = append(parts, fmt.Sprintf("ctx %d%%", m.sess.Context.Tokens*100 / *win))
	}
	u := m.sess.Usage
	if tok := u.InputTokens + u.OutputTokens; tok > 0 {
		s := count(tok) + " tok"
		if u.CostUSD != nil && *u.CostUSD > 0 {
			s += " " + cost(*u.CostUSD)
		}
		parts = append(parts, s)
	}
	clients := fmt.Sprintf("%d clients", m.clients)
	if m.clients == 1 {
		clients = "1 client"
	}
	parts = append(parts, clients)
	conn := m.st.statusLive.Render(m.conn)
	if m.conn != "live" {
		conn = m.st.statusWarn.Render(m.conn)
	}
	state := "idle"
	if m.active != "" {
		state = "working"
		if by := m.runBy[m.active]; by != "" {
			state += " (" + m.tr.who(by, "") + ")"
		}
	}
	if len(m.queue) > 0 {
		state += fmt.Sprintf(", %d queued", len(m.queue))
	}
	// What changes, first: a narrow terminal cuts the end.
	left := " " + conn + m.st.status.Render(" · "+state)
	if m.flash != "" {
		left += m.st.statusWarn.Render(" · " + SanitizeLine(m.flash))
	}
	left += m.st.status.Render(" · " + strings.Join(parts, " · "))
	if m.cfg.Note != "" {
		left += m.st.status.Render(" · " + SanitizeLine(m.cfg.Note))
	}
	return ansi.Truncate(left, m.width, "…")
}

func (m Model) confirmView(h int) []string {
	return []string{"",
		m.st.dialogTitle.Render(" A run is going on, and this TUI runs the server it uses."),
		" Quitting stops the server and cancels the run. Quit? " + m.st.key.Render("y") + "/" + m.st.key.Render("n"),
	}
}

// count writes a token count for people: 950, 12.3k, 1.2M.
func count(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 999_950:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e3), ".0") + "k"
	default:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	}
}

func cost(usd float64) string {
	if usd < 0.01 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// explain is an error for the status line: the server's message when it
// answered, else the error, on one line.
func explain(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

var _ = lipgloss.Width
