package tui

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

var update = flag.Bool("update", false, "rewrite the golden views under testdata/")

const (
	me    = "11111111-aaaa-bbbb-cccc-000000000001"
	other = "22222222-aaaa-bbbb-cccc-000000000002"
	wsID  = "ws-1"
	sid   = "sess-1"
)

// fakeAPI records the calls the model makes and answers them from its
// fields, as the server would.
type fakeAPI struct {
	mu       sync.Mutex
	calls    []string
	prompts  []proto.PromptRequest
	answers  []proto.PermissionAnswer
	sessions []proto.Session
	msgs     map[string][]proto.Message
	pending  proto.PendingWork
	status   proto.AgentStatus
	accept   proto.PromptAccepted
	err      error
	// The answers of section 11's calls.
	checkpoints []proto.Checkpoint
	diffs       map[string]proto.CheckpointDiff
	rewindErr   []error // the errors of the next Rewind calls, in turn
	updateErr   []error // the errors of the next sandbox UpdateSession calls, in turn
	export      proto.Export
}

func newFake() *fakeAPI {
	return &fakeAPI{msgs: map[string][]proto.Message{}, diffs: map[string]proto.CheckpointDiff{}, accept: proto.PromptAccepted{RunID: "run-9", State: proto.RunRunning}}
}

func (f *fakeAPI) call(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeAPI) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeAPI) ClientID() string { return me }
func (f *fakeAPI) ListSessions(ctx context.Context, ws string) ([]proto.Session, error) {
	f.call("ListSessions")
	return f.sessions, f.err
}
func (f *fakeAPI) GetSession(ctx context.Context, ws, id string) (proto.Session, error) {
	f.call("GetSession %s", id)
	for _, s := range f.sessions {
		if s.ID == id {
			return s, nil
		}
	}
	return proto.Session{ID: id}, f.err
}
func (f *fakeAPI) CreateSession(ctx context.Context, ws string, req proto.CreateSessionRequest) (proto.Session, error) {
	f.call("CreateSession title=%q model=%q", req.Title, req.Model)
	return proto.Session{ID: "sess-new", Title: req.Title, Model: req.Model}, f.err
}
func (f *fakeAPI) UpdateSession(ctx context.Context, ws, id string, req proto.UpdateSessionRequest) (proto.Session, error) {
	if req.Title != nil {
		f.call("UpdateSession %s title=%q", id, *req.Title)
		return proto.Session{ID: id, Title: *req.Title, Model: "echo"}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.sessions, func(x proto.Session) bool { return x.ID == id })
	if i < 0 {
		return proto.Session{}, fmt.Errorf("no session %s", id)
	}
	s := f.sessions[i]
	if o := req.SandboxOptions; o.Sandbox != nil {
		f.calls = append(f.calls, fmt.Sprintf("UpdateSession %s sandbox=%q", id, *o.Sandbox))
		s.Sandbox = *o.Sandbox
	} else if o.SandboxNetwork != nil {
		f.calls = append(f.calls, fmt.Sprintf("UpdateSession %s sandbox_network=%v", id, *o.SandboxNetwork))
		s.SandboxNetwork = *o.SandboxNetwork
	}
	if len(f.updateErr) > 0 {
		err := f.updateErr[0]
		f.updateErr = f.updateErr[1:]
		return proto.Session{}, err
	}
	f.sessions[i] = s
	return s, f.err
}
func (f *fakeAPI) Messages(ctx context.Context, ws, id string) ([]proto.Message, error) {
	f.call("Messages %s", id)
	return f.msgs[id], f.err
}
func (f *fakeAPI) Pending(ctx context.Context, ws, id string) (proto.PendingWork, error) {
	f.call("Pending %s", id)
	return f.pending, f.err
}
func (f *fakeAPI) AgentStatus(ctx context.Context, ws, id string) (proto.AgentStatus, error) {
	f.call("AgentStatus %s", id)
	return f.status, f.err
}
func (f *fakeAPI) Prompt(ctx context.Context, ws string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	f.call("Prompt %q delivery=%q", req.Prompt, req.Delivery)
	f.mu.Lock()
	f.prompts = append(f.prompts, req)
	f.mu.Unlock()
	return f.accept, f.err
}
func (f *fakeAPI) Cancel(ctx context.Context, ws, id string) ([]string, error) {
	f.call("Cancel %s", id)
	return nil, f.err
}
func (f *fakeAPI) SetModel(ctx context.Context, ws, id string, req proto.SetModelRequest) (proto.Session, error) {
	eff := ""
	if req.ReasoningEffort != nil {
		eff = *req.ReasoningEffort
	}
	f.call("SetModel %s model=%q effort=%q", id, req.Model, eff)
	return proto.Session{ID: id, Model: req.Model, ReasoningEffort: eff}, f.err
}
func (f *fakeAPI) Compact(ctx context.Context, ws, id string) (proto.PromptAccepted, error) {
	f.call("Compact %s", id)
	return proto.PromptAccepted{}, f.err
}
func (f *fakeAPI) AnswerPermission(ctx context.Context, ws, id string, a proto.PermissionAnswer) (proto.PermissionAnswered, error) {
	f.call("AnswerPermission %s %s feedback=%q", id, a.Decision, a.Feedback)
	return proto.PermissionAnswered{Resolved: true}, f.err
}

func (f *fakeAPI) ForkSession(ctx context.Context, ws, id string, req proto.ForkRequest) (proto.Session, error) {
	f.call("ForkSession %s through=%q title=%q", id, req.ThroughMessageID, req.Title)
	return proto.Session{ID: "sess-fork", Title: req.Title, Model: "echo", ForkedFrom: &proto.ForkedFrom{SessionID: id}}, f.err
}
func (f *fakeAPI) ExportSession(ctx context.Context, ws, id string) (proto.Export, error) {
	f.call("ExportSession %s", id)
	return f.export, f.err
}
func (f *fakeAPI) Checkpoints(ctx context.Context, ws, id string) ([]proto.Checkpoint, error) {
	f.call("Checkpoints %s", id)
	return f.checkpoints, f.err
}
func (f *fakeAPI) CheckpointDiff(ctx context.Context, ws, id, cid string) (proto.CheckpointDiff, error) {
	f.call("CheckpointDiff %s %s", id, cid)
	return f.diffs[cid], f.err
}
func (f *fakeAPI) Rewind(ctx context.Context, ws, id string, req proto.RewindRequest) (proto.RewindResult, error) {
	f.call("Rewind %s %s files=%v history=%v force=%v", id, req.CheckpointID, *req.Files, *req.History, req.Force)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rewindErr) > 0 {
		err := f.rewindErr[0]
		f.rewindErr = f.rewindErr[1:]
		if err != nil {
			return proto.RewindResult{}, err
		}
	}
	return proto.RewindResult{Files: f.diffs[req.CheckpointID].Files, RemovedMessages: 2}, f.err
}

// driver runs a Model the way Bubble Tea does, synchronously: every
// message goes through Update, and the commands it returns are run and
// their messages fed back, until none is left. The fake answers at once;
// a command that has not answered within a second is a timer (the load
// retry's, two seconds) and is dropped, which the tests stand in for by
// sending its message themselves.
type driver struct {
	t    *testing.T
	m    Model
	api  *fakeAPI
	quit bool
}

func newDriver(t *testing.T, w, h int, cfg ...func(*Config)) *driver {
	api := newFake()
	c := Config{API: api}
	for _, f := range cfg {
		f(&c)
	}
	d := &driver{t: t, m: New(c), api: api}
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	return d
}

// ready connects the model to session sid with the fake's history.
func (d *driver) ready(s proto.Session) {
	d.send(ReadyMsg{Workspace: proto.Workspace{ID: wsID, Path: "/home/ada/project", Clients: 2}, Session: s})
}

func (d *driver) send(msg tea.Msg) {
	d.t.Helper()
	queue := []tea.Msg{msg}
	for len(queue) > 0 && len(queue) < 1000 {
		msg, queue = queue[0], queue[1:]
		switch msg := msg.(type) {
		case tea.QuitMsg:
			d.quit = true
			continue
		case tea.BatchMsg:
			for _, c := range msg {
				if r := run(c); r != nil {
					queue = append(queue, r)
				}
			}
			continue
		}
		next, cmd := d.m.Update(msg)
		d.m = next.(Model)
		if r := run(cmd); r != nil {
			queue = append(queue, r)
		}
	}
}

func run(c tea.Cmd) tea.Msg {
	if c == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- c() }()
	select {
	case m := <-ch:
		return m
	case <-time.After(time.Second):
		return nil
	}
}

// keys types each string as key presses: named keys ("enter", "esc",
// "ctrl+c", "alt+enter", "pgup") or text, one rune at a time.
func (d *driver) keys(ks ...string) {
	d.t.Helper()
	for _, k := range ks {
		if msg, ok := namedKeys[k]; ok {
			d.send(msg)
			continue
		}
		for _, r := range k {
			d.send(tea.KeyPressMsg{Code: r, Text: string(r)})
		}
	}
}

var namedKeys = map[string]tea.KeyPressMsg{
	"enter":     {Code: tea.KeyEnter},
	"alt+enter": {Code: tea.KeyEnter, Mod: tea.ModAlt},
	"ctrl+j":    {Code: 'j', Mod: tea.ModCtrl},
	"esc":       {Code: tea.KeyEscape},
	"ctrl+c":    {Code: 'c', Mod: tea.ModCtrl},
	"ctrl+o":    {Code: 'o', Mod: tea.ModCtrl},
	"ctrl+end":  {Code: tea.KeyEnd, Mod: tea.ModCtrl},
	"ctrl+home": {Code: tea.KeyHome, Mod: tea.ModCtrl},
	"pgup":      {Code: tea.KeyPgUp},
	"pgdown":    {Code: tea.KeyPgDown},
	"up":        {Code: tea.KeyUp},
	"down":      {Code: tea.KeyDown},
	"tab":       {Code: tea.KeyTab},
	"backspace": {Code: tea.KeyBackspace},
}

func (d *driver) event(typ, session, run string, data any) {
	d.t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(d.t, err)
	d.send(EventMsg{Event: proto.Event{Type: typ, WorkspaceID: wsID, SessionID: session, RunID: run, Data: raw}})
}

// screen is the drawn view as text, after checking what every frame must
// be: exactly the terminal's height, no line wider than it, and no escape
// sequence but colours.
func (d *driver) screen() string {
	d.t.Helper()
	raw := d.m.View().Content
	require.True(d.t, onlySGR(raw), "the view sends a control sequence other than SGR: %q", raw)
	plain := ansi.Strip(raw)
	lines := strings.Split(plain, "\n")
	require.Len(d.t, lines, d.m.height, "the view is as tall as the terminal")
	for i, l := range lines {
		require.LessOrEqual(d.t, ansi.StringWidth(l), d.m.width, "line %d is wider than the terminal: %q", i, l)
	}
	return plain
}

// golden compares the screen with testdata/NAME-WxH.golden.
func (d *driver) golden(name string) {
	d.t.Helper()
	got := d.screen()
	// Trailing spaces are padding, not content.
	lines := strings.Split(got, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	got = strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", fmt.Sprintf("%s-%dx%d.golden", name, d.m.width, d.m.height))
	if *update {
		require.NoError(d.t, os.MkdirAll("testdata", 0o755))
		require.NoError(d.t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(d.t, err, "no golden view; run go test ./internal/tui -update")
	assert.Equal(d.t, string(want), got, "view differs from %s (go test ./internal/tui -update rewrites it)", path)
}

func (d *driver) hasCall(prefix string) bool {
	for _, c := range d.api.Calls() {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}
