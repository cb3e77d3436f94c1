package tui

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// commands are the slash commands, in the order /help lists them. A line
// whose first word is none of them is a prompt, sent as typed.
var commands = []struct{ name, args, help string }{
	{"/new", "[TITLE]", "start a new session"},
	{"/sessions", "", "pick another session (↑/↓, type to filter, Enter)"},
	{"/rename", "TITLE", "rename the session"},
	{"/model", "MODEL", "switch the session's model (PROVIDER/MODEL, or echo)"},
	{"/effort", "low|medium|high", "set the model's reasoning effort"},
	{"/compact", "", "summarize the conversation to free context"},
	{"/sandbox", "[MODE|network on|off]", "the sandbox; MODE: workspace, read-only, off"},
	{"/steer", "TEXT", "send TEXT into the running run"},
	{"/cancel", "", "cancel the running run (also Esc)"},
	{"/attach", "PATH", "attach a file to the next prompt (also @path)"},
	{"/rewind", "", "take files and history back to a checkpoint (its diff first)"},
	{"/fork", "[TITLE]", "copy the session up to a picked prompt, switch to the copy"},
	{"/export", "FILE", "write the session's export to FILE; /export! overwrites"},
	// Listed in /help with /export.
	{"/export!", "FILE", ""},
	{"/help", "", "show keys and commands"},
	{"/quit", "", "quit (runs go on)"},
}

func isCommand(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return true
		}
	}
	return false
}

// key handles a key press: the open overlay's first, then the input's.
func (m Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	if m.confirm {
		switch s {
		case "y", "Y":
			m.quitting = true
			return m, tea.Quit
		default:
			m.confirm = false
			return m, nil
		}
	}
	if m.picker != nil {
		return m.pickerKey(k)
	}
	if m.rw != nil {
		return m.rewindKey(k)
	}
	if m.fk != nil {
		return m.forkKey(k)
	}
	if m.dlg != nil {
		return m.dialogKey(k)
	}
	if m.help {
		m.help = false
		if s == "esc" || s == "q" {
			return m, nil
		}
	}
	switch s {
	case "enter":
		return m.submit()
	case "esc":
		if m.active == "" && len(m.queue) == 0 {
			m.flash = "nothing to cancel"
			return m, nil
		}
		return m, m.cancelRun()
	case "ctrl+c":
		if m.in.Value() != "" {
			m.in.Reset()
			m.fitInput()
			return m, nil
		}
		return m.quit()
	case "pgup":
		m.scroll(m.bodyHeight() - 1)
		return m, nil
	case "pgdown":
		m.scroll(-(m.bodyHeight() - 1))
		return m, nil
	case "ctrl+end":
		m.tr.offset = 0
		return m, nil
	case "ctrl+home":
		m.scroll(1 << 30)
		return m, nil
	case "ctrl+o":
		m.tr.unfold = !m.tr.unfold
		return m, nil
	case "tab":
		m.complete()
		return m, nil
	}
	var cmd tea.Cmd
	m.in, cmd = m.in.Update(k)
	m.fitInput()
	return m, cmd
}

func (m Model) quit() (tea.Model, tea.Cmd) {
	if m.cfg.Hosting && (m.active != "" || len(m.queue) > 0) {
		m.confirm = true
		return m, nil
	}
	if m.cfg.Hosting && m.ws.ID != "" {
		// The server stops with this TUI, and with it the runs of every
		// session of the workspace, not only the one on screen.
		api, ws := m.cfg.API, m.ws.ID
		return m, func() tea.Msg {
			ctx, cancel := contextWithTimeout()
			defer cancel()
			list, err := api.ListSessions(ctx, ws)
			busy := err != nil // unknown: ask
			for _, s := range list {
				busy = busy || s.Busy
			}
			return quitCheckMsg{busy: busy}
		}
	}
	m.quitting = true
	return m, tea.Quit
}

// quitCheckMsg says whether a run goes on in a session of the workspace
// when a hosting TUI is asked to quit.
type quitCheckMsg struct{ busy bool }

// submit runs the input: a command, or a prompt.
func (m Model) submit() (tea.Model, tea.Cmd) {
	text := m.in.Value()
	if strings.TrimSpace(text) == "" {
		return m, nil
	}
	if !m.ready || m.sess.ID == "" {
		m.flash = "not connected yet"
		return m, nil
	}
	name, arg, _ := strings.Cut(strings.TrimLeft(text, " "), " ")
	name = strings.TrimRight(name, "\n")
	if strings.HasPrefix(name, "/") && isCommand(name) {
		m.in.Reset()
		m.fitInput()
		return m.command(name, strings.TrimSpace(arg))
	}
	m.in.Reset()
	m.fitInput()
	return m, m.prompt(text, "")
}

// prompt sends text with the attachments named by /attach and @path.
func (m *Model) prompt(text, delivery string) tea.Cmd {
	req := proto.PromptRequest{SessionID: m.sess.ID, Prompt: text, Delivery: delivery}
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			req.Attachments = append(req.Attachments, proto.Attachment{Type: "file", Path: p})
		}
	}
	for _, p := range m.attach {
		add(p)
	}
	m.attach = nil
	for _, w := range strings.Fields(text) {
		if p, ok := strings.CutPrefix(w, "@"); ok && m.isFile(p) {
			add(p)
		}
	}
	api, ws := m.cfg.API, m.ws.ID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		acc, err := api.Prompt(ctx, ws, req)
		return acceptedMsg{acc: acc, err: err}
	}
}

func (m Model) isFile(p string) bool {
	if m.cfg.Files == nil || !fs.ValidPath(p) {
		return false
	}
	fi, err := fs.Stat(m.cfg.Files, p)
	return err == nil && !fi.IsDir()
}

func (m Model) cancelRun() tea.Cmd {
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := api.Cancel(ctx, ws, sid)
		return doneMsg{what: "cancel", err: err}
	}
}

// command runs a slash command.
func (m Model) command(name, arg string) (tea.Model, tea.Cmd) {
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	call := func(f func(ctx context.Context) tea.Msg) tea.Cmd {
		return func() tea.Msg {
			ctx, cancel := contextWithTimeout()
			defer cancel()
			return f(ctx)
		}
	}
	switch name {
	case "/new":
		model := m.sess.Model
		return m, call(func(ctx context.Context) tea.Msg {
			s, err := api.CreateSession(ctx, ws, proto.CreateSessionRequest{Title: arg, Model: model})
			return switchMsg{sess: s, err: err, what: "new session"}
		})
	case "/sessions":
		m.picker = &picker{}
		return m, call(func(ctx context.Context) tea.Msg {
			l, err := api.ListSessions(ctx, ws)
			return sessionsMsg{list: l, err: err}
		})
	case "/rename":
		if arg == "" {
			m.flash = "usage: /rename TITLE"
			return m, nil
		}
		return m, call(func(ctx context.Context) tea.Msg {
			s, err := api.UpdateSession(ctx, ws, sid, proto.UpdateSessionRequest{Title: &arg})
			return sessionMsg{sess: s, err: err, what: "renamed"}
		})
	case "/model":
		if arg == "" {
			m.flash = "usage: /model PROVIDER/MODEL"
			return m, nil
		}
		return m, call(func(ctx context.Context) tea.Msg {
			s, err := api.SetModel(ctx, ws, sid, proto.SetModelRequest{Model: arg})
			return sessionMsg{sess: s, err: err, what: "model: " + s.Model}
		})
	case "/effort":
		switch arg {
		case "low", "medium", "high":
		default:
			m.flash = "usage: /effort low|medium|high"
			return m, nil
		}
		model := m.sess.Model
		return m, call(func(ctx context.Context) tea.Msg {
			s, err := api.SetModel(ctx, ws, sid, proto.SetModelRequest{Model: model, ReasoningEffort: &arg})
			return sessionMsg{sess: s, err: err, what: "effort: " + arg}
		})
	case "/sandbox":
		if arg == "" {
			m.flash = sandboxSummary(m.sess.SandboxSettings)
			return m, nil
		}
		opts, what, ok := parseSandbox(arg)
		if !ok {
			m.flash = "usage: /sandbox [workspace|read-only|off] or /sandbox network on|off"
			return m, nil
		}
		return m, call(func(ctx context.Context) tea.Msg {
			s, err := api.UpdateSession(ctx, ws, sid, proto.UpdateSessionRequest{SandboxOptions: opts})
			if err != nil {
				// The server's own words (a member's widening is refused
				// with what only an owner may do) fit the status line.
				var ae *client.APIError
				if errors.As(err, &ae) && ae.Message != "" {
					err = errors.New(ae.Message)
				}
				return doneMsg{what: "/sandbox " + arg, err: err}
			}
			return sessionMsg{sess: s, what: what}
		})
	case "/compact":
		return m, call(func(ctx context.Context) tea.Msg {
			_, err := api.Compact(ctx, ws, sid)
			return doneMsg{what: "compaction queued", err: err}
		})
	case "/steer":
		if arg == "" {
			m.flash = "usage: /steer TEXT"
			return m, nil
		}
		return m, m.prompt(arg, proto.DeliverySteer)
	case "/cancel":
		return m, m.cancelRun()
	case "/attach":
		if !m.isFile(arg) {
			m.flash = "no file " + arg + " in the workspace"
			return m, nil
		}
		m.attach = append(m.attach, arg)
		return m, nil
	case "/rewind":
		return m.openRewind()
	case "/fork":
		return m.openFork(arg)
	case "/export", "/export!":
		if arg == "" {
			m.flash = "usage: /export FILE (/export! FILE overwrites)"
			return m, nil
		}
		overwrite := name == "/export!"
		return m, call(func(ctx context.Context) tea.Msg {
			doc, err := api.ExportSession(ctx, ws, sid)
			if err != nil {
				return doneMsg{what: "export", err: err}
			}
			return exportTo(arg, doc, overwrite)
		})
	case "/help":
		m.help = true
		return m, nil
	case "/quit":
		return m.quit()
	}
	return m, nil
}

// completions are the candidates for what is being typed: command names
// after a leading /, file names after @.
func (m Model) completions() []string {
	v := m.in.Value()
	if strings.HasPrefix(v, "/") && !strings.ContainsAny(v, " \n") {
		var out []string
		for _, c := range commands {
			if strings.HasPrefix(c.name, v) && c.name != v {
				out = append(out, c.name)
			}
		}
		return out
	}
	if i := strings.LastIndexAny(v, " \n"); true {
		w := v[i+1:]
		if p, ok := strings.CutPrefix(w, "@"); ok {
			return m.files(p)
		}
	}
	return nil
}

// files lists the workspace's names starting with prefix, at most 8.
func (m Model) files(prefix string) []string {
	if m.cfg.Files == nil {
		return nil
	}
	dir, base := path.Split(prefix)
	d := strings.TrimSuffix(dir, "/")
	if d == "" {
		d = "."
	}
	if !fs.ValidPath(d) {
		return nil
	}
	ents, err := fs.ReadDir(m.cfg.Files, d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, base) || strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".") {
			continue
		}
		if e.IsDir() {
			n += "/"
		}
		out = append(out, "@"+dir+SanitizeLine(n))
		if len(out) == 8 {
			break
		}
	}
	return out
}

// complete extends what is typed to the candidates' common prefix.
func (m *Model) complete() {
	c := m.completions()
	if len(c) == 0 {
		return
	}
	common := c[0]
	for _, s := range c[1:] {
		for !strings.HasPrefix(s, common) {
			common = common[:len(common)-1]
		}
	}
	v := m.in.Value()
	i := strings.LastIndexAny(v, " \n")
	word := v[i+1:]
	if len(common) <= len(word) {
		return
	}
	m.in.InsertString(common[len(word):])
	if len(c) == 1 && strings.HasPrefix(common, "/") {
		m.in.InsertString(" ")
	}
}

func helpView(w, h int, st styles) []string {
	lines := []string{st.dialogTitle.Render(" Keys") + st.dim.Render("  (any key closes this help)"),
		"  Enter send (queued while a run goes on)  Alt+Enter, Ctrl+J new line",
		"  Esc cancel the running run  Ctrl+C clear the input; on an empty one, quit",
		"  PgUp/PgDn, wheel scroll  Ctrl+Home top  Ctrl+End follow the end",
		"  Ctrl+O fold/unfold reasoning  Tab complete /commands and @files",
		"  Permission: a approve once  s approve for the session  r reject (+feedback)",
		"", st.dialogTitle.Render(" Commands")}
	heading := len(lines) - 1
	for _, c := range commands {
		if c.help != "" {
			lines = append(lines, "  "+st.key.Render(c.name)+" "+c.args+" — "+c.help)
		}
	}
	if len(lines) > h {
		// A short terminal loses the spacing and the commands' heading (each
		// starts with its /), not a command.
		lines = slices.Delete(lines, heading, heading+1)
		lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	}
	return lines
}

// parseSandbox reads /sandbox's argument: a mode, or the network switch.
// The server judges whether the caller may make the change (a member only
// narrows); what is the note the status line shows once it has.
func parseSandbox(arg string) (opts proto.SandboxOptions, what string, ok bool) {
	f := strings.Fields(arg)
	switch {
	case len(f) == 1 && (f[0] == proto.SandboxWorkspace || f[0] == proto.SandboxReadOnly || f[0] == proto.SandboxOff):
		mode := f[0]
		return proto.SandboxOptions{Sandbox: &mode}, "sandbox: " + mode, true
	case len(f) == 2 && f[0] == "network" && (f[1] == "on" || f[1] == "off"):
		on := f[1] == "on"
		return proto.SandboxOptions{SandboxNetwork: &on}, "sandbox network: " + f[1], true
	}
	return proto.SandboxOptions{}, "", false
}

// sandboxSummary says in one line what the session's commands may touch.
// The caller escapes it (the paths are the server's).
func sandboxSummary(s proto.SandboxSettings) string {
	mode := s.Sandbox
	switch mode {
	case "":
		mode = proto.SandboxWorkspace // a server of an older contract: none said
	case proto.SandboxOff:
		mode = "off (unconfined)"
	}
	net := "off"
	if s.SandboxNetwork {
		net = "on"
	}
	out := "sandbox: " + mode + " · network " + net
	if len(s.SandboxRead) > 0 {
		out += " · read " + strings.Join(s.SandboxRead, ", ")
	}
	if len(s.SandboxWrite) > 0 {
		out += " · write " + strings.Join(s.SandboxWrite, ", ")
	}
	return out
}
