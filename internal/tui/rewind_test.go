package tui

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// withCheckpoints is the loaded session with a checkpoint before each of
// its two runs; the newer one's diff carries an escape sequence.
func withCheckpoints(t *testing.T, w, h int) *driver {
	d := loaded(t, w, h)
	at := proto.Time{Time: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	d.api.checkpoints = []proto.Checkpoint{
		{ID: "cp1", RunID: "r1", MessageID: "m1", CreatedAt: at},
		{ID: "cp2", RunID: "r2", MessageID: "m4", CreatedAt: proto.Time{Time: at.Add(time.Minute)}},
	}
	d.api.diffs["cp1"] = proto.CheckpointDiff{Files: []proto.FileChange{{Path: "parse.go", Change: proto.ChangeModified}},
		Diff: "--- a/parse.go\n+++ b/parse.go\n@@ -1 +1,4 @@\n+if len(buf) == 0 {\n+\treturn ErrEmpty\n+}\n x := buf[0]\n"}
	d.api.diffs["cp2"] = proto.CheckpointDiff{Files: []proto.FileChange{{Path: "parse_test.go", Change: proto.ChangeAdded}},
		Diff: "--- /dev/null\n+++ b/parse_test.go\n@@ -0,0 +1 @@\n+func TestParseEmpty() // \x1b]0;PWNED\x07\x1b[2J\n"}
	return d
}

func TestRewindPicksACheckpointShowsItsDiffAndRewinds(t *testing.T) {
	for _, sz := range sizes {
		d := withCheckpoints(t, sz[0], sz[1])
		d.keys("/rewind", "enter")
		assert.True(t, d.hasCall("Checkpoints sess-1"), d.api.Calls())
		scr := d.screen() // also: no control sequence but colours
		assert.Contains(t, scr, "Rewind")
		assert.Contains(t, scr, "Why does the parser fail on empty input?", "each checkpoint shows its prompt")
		assert.Contains(t, scr, "and add a test please")
		assert.Contains(t, scr, "undoes: parse_test.go (added)", "the newest is picked first")
		assert.Contains(t, scr, "+func TestParseEmpty() // ␛]0;PWNED␇␛[2J", "the diff is shown escaped")

		d.keys("up")
		assert.True(t, d.hasCall("CheckpointDiff sess-1 cp1"), d.api.Calls())
		scr = d.screen()
		assert.Contains(t, scr, "undoes: parse.go (modified)")
		assert.Contains(t, scr, "+if len(buf) == 0 {")
		d.keys("enter")
		assert.True(t, d.hasCall("Rewind sess-1 cp1 files=true history=true force=false"), d.api.Calls())
		assert.Nil(t, d.m.rw, "a rewind that went through closes the picker")
		assert.Contains(t, d.screen(), "rewound: 1 files back, 2 messages out of the history")
	}
}

func TestRewindPickerScrollsALongDiffAndEscCloses(t *testing.T) {
	d := withCheckpoints(t, 80, 24)
	diff := "--- a/big.txt\n+++ b/big.txt\n"
	for i := range 100 {
		diff += "+line " + string(rune('a'+i%26)) + "\n"
	}
	d.api.diffs["cp2"] = proto.CheckpointDiff{Files: []proto.FileChange{{Path: "big.txt", Change: proto.ChangeModified}}, Diff: diff}
	d.keys("/rewind", "enter")
	assert.Contains(t, d.screen(), "lines 1-")
	d.keys("pgdown")
	assert.Greater(t, d.m.rw.top, 0)
	assert.NotContains(t, d.screen(), "lines 1-")
	d.keys("pgup")
	assert.Equal(t, 0, d.m.rw.top)
	d.keys("esc")
	assert.Nil(t, d.m.rw)
	assert.False(t, d.hasCall("Rewind"), "Esc rewinds nothing")
}

func TestRewindConflictNamesTheFilesAndFForces(t *testing.T) {
	d := withCheckpoints(t, 80, 24)
	d.api.rewindErr = []error{&client.APIError{Status: 409, Code: proto.CodeRewindConflict,
		Message: "files changed since the session's last run ended, not by it: parse_test.go; rewind with force to overwrite them"}}
	d.keys("/rewind", "enter", "enter")
	scr := d.screen()
	assert.Contains(t, scr, "parse_test.go; rewind with force", "the files are named")
	assert.Contains(t, scr, "f force the rewind")
	assert.NotNil(t, d.m.rw, "the picker stays open")
	d.keys("enter")
	assert.Len(t, filterCalls(d, "Rewind"), 1, "Enter does not retry a refused rewind")
	d.keys("f")
	assert.True(t, d.hasCall("Rewind sess-1 cp2 files=true history=true force=true"), d.api.Calls())
	assert.Nil(t, d.m.rw)
}

func TestRewindWhileBusyIsShownAsSuch(t *testing.T) {
	d := withCheckpoints(t, 80, 24)
	d.api.rewindErr = []error{&client.APIError{Status: 409, Code: proto.CodeSessionBusy, Message: "a run is active"}}
	d.keys("/rewind", "enter", "enter")
	assert.Contains(t, d.screen(), "the session is busy")
	d.keys("f")
	assert.Len(t, filterCalls(d, "Rewind"), 1, "f forces only a conflict")
}

func TestRewindWithoutCheckpoints(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/rewind", "enter")
	assert.Contains(t, d.screen(), "no checkpoints")
	d.keys("enter")
	assert.False(t, d.hasCall("Rewind"))
}

// Another client's rewind reloads the history: the rewound messages leave
// the transcript, and the status line says who rewound.
func TestSessionRewoundReloadsTheHistory(t *testing.T) {
	d := withCheckpoints(t, 80, 24)
	assert.Contains(t, d.screen(), "and add a test please")
	d.keys("/rewind", "enter")
	d.api.msgs[sid] = history()[:3]
	raw, err := json.Marshal(proto.SessionRewound{CheckpointID: "cp2", Files: []proto.FileChange{{Path: "parse_test.go", Change: proto.ChangeAdded}}, RemovedMessages: 2})
	require.NoError(t, err)
	d.send(EventMsg{Event: proto.Event{Type: proto.EventSessionRewound, WorkspaceID: wsID, SessionID: sid, Data: raw,
		Actor: &proto.Actor{TokenID: "t2", Name: "grace", ClientID: other}}})
	assert.Nil(t, d.m.rw, "the open picker's checkpoints are stale")
	scr := d.screen()
	assert.NotContains(t, scr, "and add a test please")
	assert.Contains(t, scr, "Why does the parser fail on empty input?")
	assert.Contains(t, scr, "grace rewound the session: 1 files back, 2 messages")
}

func TestForkSwitchesToTheCopy(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/fork Parser, take two", "enter")
	scr := d.screen()
	assert.Contains(t, scr, "Fork")
	assert.Contains(t, scr, "Why does the parser fail on empty input?", "the prompts are listed")
	assert.False(t, d.hasCall("ForkSession"), "nothing is forked before Enter")
	d.keys("enter")
	assert.True(t, d.hasCall(`ForkSession sess-1 through="" title="Parser, take two"`), "the newest prompt forks all: %v", d.api.Calls())
	assert.True(t, d.hasCall("Messages sess-fork"), "the copy is loaded")
	assert.Equal(t, "sess-fork", d.m.sess.ID)
	scr = d.screen()
	assert.Contains(t, scr, "Parser, take two")
	assert.Contains(t, scr, "forked")
}

func TestForkAtAPickedPrompt(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/fork", "enter", "up", "enter")
	assert.True(t, d.hasCall(`ForkSession sess-1 through="m3" title=""`), "through the last message of the first exchange: %v", d.api.Calls())

	d = loaded(t, 80, 24)
	d.keys("/fork", "enter", "esc")
	assert.Nil(t, d.m.fk)
	assert.False(t, d.hasCall("ForkSession"), "Esc forks nothing")

	d = newDriver(t, 80, 24)
	d.ready(session())
	d.keys("/fork", "enter")
	assert.True(t, d.hasCall(`ForkSession sess-1 through="" title=""`), "a session without prompts forks at once: %v", d.api.Calls())
}

func TestExportWritesTheDocumentAndNeverOverwritesUnlessBang(t *testing.T) {
	d := loaded(t, 240, 24) // room in the status line for a temporary path
	d.api.export = proto.Export{Format: proto.ExportFormat, Session: session(), Messages: history()}
	file := filepath.Join(t.TempDir(), "parser.json")
	d.keys("/export "+file, "enter")
	assert.True(t, d.hasCall("ExportSession sess-1"))
	assert.Contains(t, d.screen(), "exported 5 messages to")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc proto.Export
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, proto.ExportFormat, doc.Format)
	assert.Len(t, doc.Messages, 5)

	require.NoError(t, os.WriteFile(file, []byte("mine"), 0o600))
	d.keys("/export "+file, "enter")
	assert.Contains(t, d.screen(), "exists")
	raw, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "mine", string(raw), "an existing file is left alone")

	d.keys("/export! "+file, "enter")
	raw, err = os.ReadFile(file)
	require.NoError(t, err)
	assert.Contains(t, string(raw), proto.ExportFormat, "/export! overwrites")

	d.keys("/export", "enter")
	assert.Contains(t, d.screen(), "usage: /export FILE")
}

func TestNewCommandsComplete(t *testing.T) {
	d := loaded(t, 80, 24)
	d.keys("/rew", "tab")
	assert.Equal(t, "/rewind ", d.m.in.Value())
	d.keys("ctrl+c", "/fo", "tab")
	assert.Equal(t, "/fork ", d.m.in.Value())
	d.keys("ctrl+c", "/exp")
	assert.Contains(t, d.screen(), "/export!")
	d.keys("tab")
	assert.Equal(t, "/export", d.m.in.Value())
}

// Names from section 9: a user message loaded over REST shows its
// author's name, and the status line names who runs the active run.
func TestNamesOfAuthorsAndActors(t *testing.T) {
	d := newDriver(t, 80, 24)
	h := history()
	h[3].Author = &proto.Author{Name: "grace", ClientID: other}
	d.api.msgs[sid] = h
	d.ready(session())
	assert.Contains(t, d.screen(), "▍grace")
	assert.NotContains(t, d.screen(), shortID(other))

	const third = "33333333-aaaa-bbbb-cccc-000000000003"
	raw, err := json.Marshal(proto.RunAccepted{RunID: "r7", State: proto.RunRunning, ClientID: third})
	require.NoError(t, err)
	d.send(EventMsg{Event: proto.Event{Type: proto.EventRunAccepted, WorkspaceID: wsID, SessionID: sid, RunID: "r7", Data: raw,
		Actor: &proto.Actor{TokenID: "t3", Name: "linus", ClientID: third}}})
	assert.Contains(t, d.screen(), "working (linus)")
}

func filterCalls(d *driver, prefix string) []string {
	var out []string
	for _, c := range d.api.Calls() {
		if len(c) >= len(prefix) && c[:len(prefix)] == prefix {
			out = append(out, c)
		}
	}
	return out
}
