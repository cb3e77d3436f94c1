package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/session"
	"github.com/tandem-dev/tandem/proto"
)

// writeTree writes files (slash paths to contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// readTree returns every file and directory under dir: files with their
// contents, directories as "DIR", symlinks as "LINK target".
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			out[rel] = "DIR"
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "LINK " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	}))
	return out
}

func (e *env) sessionPath(wsID, sid string) string {
	return fmt.Sprintf("/v1/workspaces/%s/sessions/%s", wsID, sid)
}

func (e *env) checkpoints(wsID, sid string) []proto.Checkpoint {
	e.t.Helper()
	var out proto.CheckpointList
	e.must(http.StatusOK, "GET", e.sessionPath(wsID, sid)+"/checkpoints", nil, &out)
	return out.Checkpoints
}

func (e *env) allMessages(wsID, sid string) []proto.Message {
	e.t.Helper()
	var out proto.MessageList
	e.must(http.StatusOK, "GET", e.sessionPath(wsID, sid)+"/messages?include_rewound=true", nil, &out)
	return out.Messages
}

// runToIdle prompts and waits for the run's end and the session's idle.
func (e *env) runToIdle(s *stream, wsID, sid, text string) proto.PromptAccepted {
	e.t.Helper()
	acc := e.prompt(wsID, sid, text)
	rc, _ := s.completion(acc.RunID)
	require.Equal(e.t, proto.OutcomeEndTurn, rc.Outcome, "run of %q", text)
	s.until(proto.EventSessionIdle)
	return acc
}

func bashPrompt(command string) string {
	args, _ := json.Marshal(map[string]string{"command": command})
	return "/tool bash " + string(args)
}

// A bash run that deletes and creates files and directories is taken
// back: files added since are removed with the directories they were in,
// deleted ones come back, changed ones get their content back, ignored
// files are left alone, and nothing but the tool's own changes was ever
// written in the workspace. A hand edit after the run makes the rewind a
// conflict until forced; another attached client sees session.rewound;
// the history leaves the default list, stays for audit, and checkpoints
// and rewinds work across a restart.
func TestRewindAfterBash(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{
		".gitignore":  "ignored/\n",
		"a.txt":       "one\n",
		"dir/b.txt":   "bee\n",
		"dir/sub/c":   "sea\n",
		"ignored/x":   "before\n",
		"keep/k.txt":  "kept\n",
		"bin/tool.sh": "#!/bin/sh\n",
	})
	require.NoError(t, os.Chmod(filepath.Join(e.workDir, "bin/tool.sh"), 0o755))
	original := readTree(t, e.workDir)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	other := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})

	e.runToIdle(s, ws.ID, sess.ID, "hello")
	assert.Empty(t, e.checkpoints(ws.ID, sess.ID), "a run that changed nothing has no checkpoint")
	kept := e.messages(ws.ID, sess.ID)

	acc := e.runToIdle(s, ws.ID, sess.ID, bashPrompt(
		"rm -r dir && mkdir -p new/deep && echo n > new/deep/n.txt && echo two > a.txt && echo after > ignored/x && chmod -x bin/tool.sh"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	assert.Equal(t, acc.RunID, cks[0].RunID)
	msgs := e.messages(ws.ID, sess.ID)
	require.Greater(t, len(msgs), len(kept))
	assert.Equal(t, msgs[len(kept)].ID, cks[0].MessageID, "the checkpoint names the run's user message")
	assert.Equal(t, proto.RoleUser, msgs[len(kept)].Role)

	var diff proto.CheckpointDiff
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, &diff)
	want := []proto.FileChange{
		{Path: "a.txt", Change: proto.ChangeModified},
		{Path: "bin/tool.sh", Change: proto.ChangeModified},
		{Path: "dir/b.txt", Change: proto.ChangeDeleted},
		{Path: "dir/sub/c", Change: proto.ChangeDeleted},
		{Path: "new/deep/n.txt", Change: proto.ChangeAdded},
	}
	assert.Equal(t, want, diff.Files)
	assert.Contains(t, diff.Diff, "-one")
	assert.Contains(t, diff.Diff, "+two")
	assert.NotContains(t, diff.Diff, "ignored/x")

	// Someone edits a file by hand: the rewind would lose it.
	writeTree(t, e.workDir, map[string]string{"keep/k.txt": "hand edit\n"})
	body := map[string]any{"checkpoint_id": cks[0].ID}
	status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", body, nil)
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, proto.CodeRewindConflict, errorCode(t, raw))
	assert.Contains(t, string(raw), "keep/k.txt")
	assert.FileExists(t, filepath.Join(e.workDir, "new/deep/n.txt"), "a refused rewind changes nothing")
	assert.Len(t, e.messages(ws.ID, sess.ID), len(msgs))

	body["force"] = true
	var res proto.RewindResult
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", body, &res)
	want = append(want, proto.FileChange{Path: "keep/k.txt", Change: proto.ChangeModified})
	sort.Slice(want, func(i, j int) bool { return want[i].Path < want[j].Path })
	assert.Equal(t, want, res.Files)
	assert.Equal(t, len(msgs)-len(kept), res.RemovedMessages)

	f, _ := other.until(proto.EventSessionRewound)
	var rewound proto.SessionRewound
	require.NoError(t, json.Unmarshal(f.envelope(t).Data, &rewound))
	assert.Equal(t, proto.SessionRewound{CheckpointID: cks[0].ID, Files: res.Files, RemovedMessages: res.RemovedMessages}, rewound)
	assert.Equal(t, sess.ID, f.envelope(t).SessionID)

	// Files as they were, but the ignored one, which is the tool's.
	now := readTree(t, e.workDir)
	wantTree := maps.Clone(original)
	wantTree["ignored/x"] = "after\n"
	// The sandbox made .tandem (empty, read-only to commands) before the
	// first command ran, so that no command could make it (section 12).
	wantTree[".tandem"] = "DIR"
	assert.Equal(t, wantTree, now, "the files are back, nothing else is in the workspace")
	fi, err := os.Stat(filepath.Join(e.workDir, "bin/tool.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the mode is back")

	// The history leaves the default list, and stays for audit.
	assert.Equal(t, ids(kept), ids(e.messages(ws.ID, sess.ID)))
	all := e.allMessages(ws.ID, sess.ID)
	require.Len(t, all, len(msgs))
	for i, m := range all {
		assert.Equal(t, i >= len(kept), m.Rewound, "message %d", i)
	}
	var got proto.Session
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID), nil, &got)
	assert.Equal(t, len(kept), got.MessageCount)
	assert.Len(t, e.checkpoints(ws.ID, sess.ID), 1, "the checkpoint rewound to is kept")

	// Across a restart: the checkpoint is still there, a new run takes
	// its own, and a rewind to it works.
	s.close()
	other.close()
	e.restart()
	s = e.openStream(ws.ID, newClientID(), "")
	require.Len(t, e.checkpoints(ws.ID, sess.ID), 1)
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, &diff)
	assert.Empty(t, diff.Files, "the files are as the checkpoint recorded them")
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo three > a.txt && mkdir made"))
	cks = e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 2)
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[1].ID}, &res)
	assert.Equal(t, []proto.FileChange{{Path: "a.txt", Change: proto.ChangeModified}}, res.Files)
	assert.Equal(t, wantTree["a.txt"], readTree(t, e.workDir)["a.txt"])
	assert.Equal(t, ids(kept), ids(e.messages(ws.ID, sess.ID)))

	// A rewind of the history alone leaves the files.
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo four > a.txt"))
	cks = e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 3, "the checkpoint rewound to stays, the new run adds its own")
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[1].ID, "files": false}, &res)
	assert.Equal(t, []proto.FileChange{}, res.Files)
	assert.Equal(t, "four\n", readTree(t, e.workDir)["a.txt"])
	assert.Len(t, e.checkpoints(ws.ID, sess.ID), 2, "later checkpoints are dropped")
	assert.Equal(t, ids(kept), ids(e.messages(ws.ID, sess.ID)))
}

func ids(msgs []proto.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// Refusals: a bad body, an unknown checkpoint, a busy session. Each
// changes nothing.
func TestRewindRefusals(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{"a.txt": "one\n"})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo two > a.txt"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	path := e.sessionPath(ws.ID, sess.ID) + "/rewind"

	status, raw := e.do("POST", path, map[string]any{}, nil)
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	status, raw = e.do("POST", path, map[string]any{"checkpoint_id": cks[0].ID, "forse": true}, nil)
	assert.Equal(t, http.StatusBadRequest, status, "%s", raw)
	status, raw = e.do("POST", path, map[string]any{"checkpoint_id": uuid.NewString()}, nil)
	assert.Equal(t, http.StatusNotFound, status, "%s", raw)
	assert.Equal(t, proto.CodeCheckpointNotFound, errorCode(t, raw))
	status, raw = e.do("GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+uuid.NewString()+"/diff", nil, nil)
	assert.Equal(t, http.StatusNotFound, status, "%s", raw)
	status, raw = e.do("GET", e.sessionPath(ws.ID, uuid.NewString())+"/checkpoints", nil, nil)
	assert.Equal(t, http.StatusNotFound, status, "%s", raw)

	acc := e.prompt(ws.ID, sess.ID, "/slow 100 50")
	status, raw = e.do("POST", path, map[string]any{"checkpoint_id": cks[0].ID}, nil)
	assert.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, proto.CodeSessionBusy, errorCode(t, raw))
	e.cancel(ws.ID, sess.ID)
	s.completion(acc.RunID)
	s.until(proto.EventSessionIdle)
	assert.Equal(t, "two\n", readTree(t, e.workDir)["a.txt"], "refusals changed nothing")

	// The session is idle again: the rewind goes through.
	var res proto.RewindResult
	e.must(http.StatusOK, "POST", path, map[string]any{"checkpoint_id": cks[0].ID}, &res)
	assert.Equal(t, "one\n", readTree(t, e.workDir)["a.txt"])
}

// A rewind racing a new prompt: either the rewind wins (the prompt then
// runs on the rewound session, or had run wholly before it and is taken
// back with the rest) or the prompt does (the rewind is session_busy and
// changes nothing); never half of each.
func TestRewindRacesPrompt(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{"a.txt": "0\n"})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	wins := map[int]int{}
	for i := range 8 {
		aBefore := readTree(t, e.workDir)["a.txt"]
		e.runToIdle(s, ws.ID, sess.ID, bashPrompt(fmt.Sprintf("echo %d > a.txt", i+1)))
		cks := e.checkpoints(ws.ID, sess.ID)
		ck := cks[len(cks)-1]
		require.Equal(t, ck.RunID, e.messages(ws.ID, sess.ID)[len(e.messages(ws.ID, sess.ID))-1].RunID)
		msgs := e.messages(ws.ID, sess.ID)
		ran := 0 // the checkpoint's run's messages
		for _, m := range msgs {
			if m.RunID == ck.RunID {
				ran++
			}
		}
		var (
			wg     sync.WaitGroup
			status int
			raw    []byte
			acc    proto.PromptAccepted
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			status, raw = e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": ck.ID}, nil)
		}()
		go func() {
			defer wg.Done()
			e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+ws.ID+"/agent", proto.PromptRequest{SessionID: sess.ID, Prompt: "next"}, &acc)
		}()
		wg.Wait()
		s.completion(acc.RunID)
		s.until(proto.EventSessionIdle)
		wins[status]++
		// The prompt's run came wholly before the rewind (then the rewind
		// took it back too) or wholly after it; never half.
		promptRewound := map[bool]int{}
		for _, m := range e.allMessages(ws.ID, sess.ID) {
			switch m.RunID {
			case acc.RunID:
				promptRewound[m.Rewound]++
			case ck.RunID:
				assert.Equal(t, status == http.StatusOK, m.Rewound, "the checkpoint's run is rewound when the rewind won")
			}
		}
		require.Len(t, promptRewound, 1, "the prompt's run is rewound whole or not at all")
		before := promptRewound[true] > 0
		live := e.messages(ws.ID, sess.ID)
		switch status {
		case http.StatusOK:
			assert.Equal(t, aBefore, readTree(t, e.workDir)["a.txt"])
			if before {
				assert.Len(t, live, len(msgs)-ran, "the prompt ran before the rewind, which took it back too")
			} else {
				assert.Len(t, live, len(msgs)-ran+2, "the prompt ran after the rewind")
			}
		case http.StatusConflict:
			assert.False(t, before, "a refused rewind takes nothing back")
			assert.Equal(t, proto.CodeSessionBusy, errorCode(t, raw))
			assert.Equal(t, fmt.Sprintf("%d\n", i+1), readTree(t, e.workDir)["a.txt"])
			assert.Len(t, live, len(msgs)+2, "nothing rewound")
		default:
			t.Fatalf("rewind answered %d: %s", status, raw)
		}
	}
	t.Logf("rewind won %d, prompt won %d", wins[http.StatusOK], wins[http.StatusConflict])
}

// A fork copies a prefix of the history under new ids with the source's
// settings; an export imported on another server and exported again has
// the same messages; a bad document is refused and creates nothing.
func TestForkExportImport(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{
		"permission_mode": "allow_all", "reasoning_effort": "high", "excluded_tools": []string{"bash"},
		"system_message": map[string]any{"mode": "append", "content": "be brief"},
	})
	e.runToIdle(s, ws.ID, sess.ID, "first")
	e.runToIdle(s, ws.ID, sess.ID, "second")
	msgs := e.messages(ws.ID, sess.ID)
	require.Len(t, msgs, 4)

	var fork proto.Session
	e.must(http.StatusCreated, "POST", e.sessionPath(ws.ID, sess.ID)+"/fork", map[string]any{"through_message_id": msgs[1].ID, "title": "forked"}, &fork)
	assert.Equal(t, "forked", fork.Title)
	assert.Equal(t, &proto.ForkedFrom{SessionID: sess.ID, MessageID: msgs[1].ID}, fork.ForkedFrom)
	assert.Equal(t, "high", fork.ReasoningEffort)
	assert.Equal(t, 2, fork.MessageCount)
	f, _ := s.until(proto.EventSessionCreated)
	assert.Equal(t, fork.ID, f.envelope(t).SessionID)
	copied := e.messages(ws.ID, fork.ID)
	require.Len(t, copied, 2)
	for i, m := range copied {
		assert.NotEqual(t, msgs[i].ID, m.ID, "new ids")
		assert.Equal(t, fork.ID, m.SessionID)
		assert.Equal(t, msgs[i].Role, m.Role)
		assert.Equal(t, msgs[i].Parts, m.Parts)
	}
	assert.Len(t, e.messages(ws.ID, sess.ID), 4, "the source is unchanged")
	// The fork runs on its own.
	e.runToIdle(s, ws.ID, fork.ID, "third")
	assert.Len(t, e.messages(ws.ID, fork.ID), 4)
	status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/fork", map[string]any{"through_message_id": uuid.NewString()}, nil)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, proto.CodeMessageNotFound, errorCode(t, raw))

	var doc proto.Export
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/export", nil, &doc)
	assert.Equal(t, proto.ExportFormat, doc.Format)
	assert.Equal(t, "allow_all", doc.Settings.PermissionMode)
	assert.Equal(t, []string{"bash"}, doc.Settings.ExcludedTools)
	require.Len(t, doc.Messages, 4)

	// Another server imports it.
	e2 := startEnv(t)
	ws2 := e2.createWorkspace()
	var before proto.SessionList
	e2.must(http.StatusOK, "GET", "/v1/workspaces/"+ws2.ID+"/sessions", nil, &before)
	bad := []any{
		map[string]any{"format": "tandem.session.v0", "session": doc.Session, "settings": doc.Settings, "messages": doc.Messages},
		map[string]any{"format": proto.ExportFormat, "session": doc.Session, "settings": doc.Settings, "messages": doc.Messages, "extra": 1},
		map[string]any{"format": proto.ExportFormat, "session": doc.Session, "settings": doc.Settings,
			"messages": []any{map[string]any{"id": uuid.NewString(), "session_id": sess.ID, "role": "wizard", "parts": []any{}, "created_at": doc.Messages[0].CreatedAt, "updated_at": doc.Messages[0].UpdatedAt}}},
		"not a document",
		// The source's id becomes imported_from, shown in every listing.
		map[string]any{"format": proto.ExportFormat, "session": map[string]any{"id": strings.Repeat("x", 300)}, "settings": doc.Settings, "messages": doc.Messages},
		// One message more than an import may hold.
		map[string]any{"format": proto.ExportFormat, "session": doc.Session, "settings": doc.Settings, "messages": tooManyMessages()},
	}
	for i, b := range bad {
		status, raw := e2.do("POST", "/v1/workspaces/"+ws2.ID+"/sessions/import", b, nil)
		assert.Equal(t, http.StatusBadRequest, status, "bad document %d: %s", i, raw)
	}
	var after proto.SessionList
	e2.must(http.StatusOK, "GET", "/v1/workspaces/"+ws2.ID+"/sessions", nil, &after)
	assert.Equal(t, len(before.Sessions), len(after.Sessions), "bad documents create nothing")

	var imported proto.Session
	e2.must(http.StatusCreated, "POST", "/v1/workspaces/"+ws2.ID+"/sessions/import", doc, &imported)
	assert.Equal(t, &proto.ImportedFrom{SessionID: sess.ID}, imported.ImportedFrom)
	assert.NotEqual(t, sess.ID, imported.ID)
	var again proto.Export
	e2.must(http.StatusOK, "GET", e2.sessionPath(ws2.ID, imported.ID)+"/export", nil, &again)
	assert.Equal(t, "allow_all", again.Settings.PermissionMode, "the owner's import keeps allow_all")
	// Anyone else's import of it asks: only an owner may make a session
	// that runs tools without asking (section 9).
	_, member := e2.person("mia", proto.RoleMember)
	var byMember proto.Session
	status, raw = e2.as(member, "POST", "/v1/workspaces/"+ws2.ID+"/sessions/import", doc, &byMember)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	var memberDoc proto.Export
	e2.must(http.StatusOK, "GET", e2.sessionPath(ws2.ID, byMember.ID)+"/export", nil, &memberDoc)
	assert.Equal(t, "ask", memberDoc.Settings.PermissionMode, "allow_all only for an owner")
	// So is a member's fork of an allow_all session; the owner's keeps it.
	var memberFork, ownerFork proto.Session
	status, raw = e2.as(member, "POST", e2.sessionPath(ws2.ID, imported.ID)+"/fork", map[string]any{}, &memberFork)
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	assert.Equal(t, "ask", memberFork.PermissionMode, "a member's fork asks")
	e2.must(http.StatusCreated, "POST", e2.sessionPath(ws2.ID, imported.ID)+"/fork", map[string]any{}, &ownerFork)
	assert.Equal(t, "allow_all", ownerFork.PermissionMode, "the owner's fork keeps allow_all")
	assert.Equal(t, doc.Settings.ExcludedTools, again.Settings.ExcludedTools)
	assert.Equal(t, doc.Settings.SystemMessage, again.Settings.SystemMessage)
	require.Len(t, again.Messages, len(doc.Messages))
	for i := range doc.Messages {
		assert.Equal(t, doc.Messages[i].Role, again.Messages[i].Role)
		assert.Equal(t, doc.Messages[i].Parts, again.Messages[i].Parts)
		assert.NotEqual(t, doc.Messages[i].ID, again.Messages[i].ID)
	}
	// The imported session runs.
	s2 := e2.openStream(ws2.ID, newClientID(), "")
	e2.runToIdle(s2, ws2.ID, imported.ID, "go on")
}

// Rewound messages are left out of what the model reads next.
func TestRewoundLeftOutOfModelContext(t *testing.T) {
	fake := newFakeModel(t, "openai", func(n int, _ map[string]any) step {
		if n == 1 {
			return step{toolCalls: []scriptedCall{{ID: "call_1", Name: "write", Args: `{"path":"w.txt","content":"written"}`}}}
		}
		return step{text: []string{"ok"}}
	})
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.openAISession(ws.ID, fake, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, "remember alpha")
	e.runToIdle(s, ws.ID, sess.ID, "write the file bravo")
	assert.FileExists(t, filepath.Join(e.workDir, "w.txt"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	var res proto.RewindResult
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[0].ID}, &res)
	assert.NoFileExists(t, filepath.Join(e.workDir, "w.txt"))
	e.runToIdle(s, ws.ID, sess.ID, "and now charlie")
	reqs := fake.Requests()
	last := reqs[len(reqs)-1].RawBody
	assert.Contains(t, last, "remember alpha")
	assert.Contains(t, last, "and now charlie")
	assert.NotContains(t, last, "bravo", "the rewound run is not in the model's context")
}

// tooManyMessages is a history one message longer than an import takes.
func tooManyMessages() []any {
	msgs := make([]any, session.MaxImportMessages+1)
	for i := range msgs {
		msgs[i] = map[string]any{"role": "user", "parts": []any{}}
	}
	return msgs
}

// Issue 31, item 5: a .gitignore the run rewrote does not make the files
// it ignored before look added since: the rewind leaves them, names them
// in kept, and removes only what the run made.
func TestRewindLeavesWhatTheCheckpointNeverRecorded(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{
		".gitignore":                ".env\nnode_modules/\n",
		".env":                      "TOKEN=secret\n",
		"node_modules/lib/index.js": "module.exports = 1\n",
		"src/app.js":                "app\n",
	})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("printf 'dist/\\n' > .gitignore && echo made > src/new.js"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)

	var diff proto.CheckpointDiff
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, &diff)
	assert.Equal(t, []proto.FileChange{
		{Path: ".gitignore", Change: proto.ChangeModified},
		{Path: "src/new.js", Change: proto.ChangeAdded},
	}, diff.Files)
	assert.Equal(t, []string{".env", "node_modules/lib/index.js"}, diff.Kept)

	var res proto.RewindResult
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[0].ID}, &res)
	assert.Equal(t, diff.Files, res.Files)
	assert.Equal(t, []string{".env", "node_modules/lib/index.js"}, res.Kept)
	assert.Equal(t, map[string]string{
		".gitignore": ".env\nnode_modules/\n", ".env": "TOKEN=secret\n",
		"node_modules": "DIR", "node_modules/lib": "DIR", "node_modules/lib/index.js": "module.exports = 1\n",
		"src": "DIR", "src/app.js": "app\n", ".tandem": "DIR", // .tandem: made (empty) by the sandbox
	}, readTree(t, e.workDir))
}

// Issue 31, item 6a: a file the run made ignored, then edited by hand, is
// a conflict: the rewind does not overwrite the edit without force.
func TestRewindConflictOnAFileIgnoredSince(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{"app.env": "A=1\n", "main.go": "package main\n"})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("printf '*.env\\n' > .gitignore"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	writeTree(t, e.workDir, map[string]string{"app.env": "A=2 by hand\n"})

	var diff proto.CheckpointDiff
	e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, &diff)
	assert.Contains(t, diff.Files, proto.FileChange{Path: "app.env", Change: proto.ChangeModified}, "not deleted: it is still there")

	body := map[string]any{"checkpoint_id": cks[0].ID}
	status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", body, nil)
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, proto.CodeRewindConflict, errorCode(t, raw))
	assert.Contains(t, string(raw), "app.env")
	got, _ := os.ReadFile(filepath.Join(e.workDir, "app.env"))
	assert.Equal(t, "A=2 by hand\n", string(got))

	body["force"] = true
	var res proto.RewindResult
	e.must(http.StatusOK, "POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", body, &res)
	got, _ = os.ReadFile(filepath.Join(e.workDir, "app.env"))
	assert.Equal(t, "A=1\n", string(got), "forced: the checkpoint's content")
}

// Issue 31, item 6c: a same-size hand edit with its modification time set
// back (as cp -p leaves it) is a conflict too.
func TestRewindConflictOnAnEditWithItsTimeSetBack(t *testing.T) {
	e := startEnv(t)
	writeTree(t, e.workDir, map[string]string{"notes.txt": "aaaa\n"})
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(e.workDir, "notes.txt"), old, old))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo made > new.txt"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	writeTree(t, e.workDir, map[string]string{"notes.txt": "bbbb\n"})
	require.NoError(t, os.Chtimes(filepath.Join(e.workDir, "notes.txt"), old, old))

	status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[0].ID}, nil)
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Contains(t, string(raw), "notes.txt")
	got, _ := os.ReadFile(filepath.Join(e.workDir, "notes.txt"))
	assert.Equal(t, "bbbb\n", string(got))
}

// Issue 31, item 7: a forced rewind that cannot be done whole (an ignored
// directory replaced by a symlink to outside the workspace) changes
// nothing, answers a clear 409, and emits no session.rewound.
func TestRewindAllOrNothing(t *testing.T) {
	e := startEnv(t)
	outside := t.TempDir()
	writeTree(t, e.workDir, map[string]string{"a.txt": "a\n", "build/out.txt": "out\n"})
	writeTree(t, outside, map[string]string{"mine.txt": "outside's\n"})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo A > a.txt && echo new > new.txt && printf 'build\\n' > .gitignore"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	require.NoError(t, os.RemoveAll(filepath.Join(e.workDir, "build")))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.workDir, "build")))
	before := readTree(t, e.workDir)

	status, raw := e.do("POST", e.sessionPath(ws.ID, sess.ID)+"/rewind", map[string]any{"checkpoint_id": cks[0].ID, "force": true}, nil)
	require.Equal(t, http.StatusConflict, status, "%s", raw)
	assert.Equal(t, proto.CodeRewindConflict, errorCode(t, raw))
	assert.Contains(t, string(raw), "build")
	assert.Contains(t, string(raw), "nothing was changed")
	assert.Equal(t, before, readTree(t, e.workDir), "nothing changed")
	assert.Equal(t, map[string]string{"mine.txt": "outside's\n"}, readTree(t, outside))
	assert.Len(t, e.allMessages(ws.ID, sess.ID), len(e.messages(ws.ID, sess.ID)), "no history rewound")
	// The next event is the one this test makes, not a session.rewound.
	e.createSession(ws.ID, nil)
	_, seen := s.until(proto.EventSessionCreated)
	for _, f := range seen {
		assert.NotEqual(t, proto.EventSessionRewound, f.envelope(t).Type)
	}
}

// storeObjects counts the checkpoint store's objects under the data dir,
// and checks every entry's mode is the data dir's (0700 directories, 0600
// files).
func storeObjects(t *testing.T, dataDir string) int {
	t.Helper()
	n := 0
	root := filepath.Join(dataDir, "checkpoints")
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		assert.Equal(t, want, fi.Mode().Perm(), "mode of %s", p)
		if !d.IsDir() && len(d.Name()) == 38 && filepath.Base(filepath.Dir(filepath.Dir(p))) == "objects" {
			n++
		}
		return nil
	}))
	return n
}

// Issue 31, item 8: looking at a diff writes nothing, even of a big file
// that keeps changing; the store's modes are the data dir's; a deleted
// session's objects are gone after a restart.
func TestCheckpointStoreReadsWriteNothingAndIsCollected(t *testing.T) {
	e := startEnv(t)
	log := strings.Repeat("a log line of some length, to make it big\n", 512<<10/42)
	writeTree(t, e.workDir, map[string]string{"app.log": log})
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"permission_mode": "allow_all"})
	e.runToIdle(s, ws.ID, sess.ID, bashPrompt("echo run >> app.log"))
	cks := e.checkpoints(ws.ID, sess.ID)
	require.Len(t, cks, 1)
	before := storeObjects(t, e.cfg.DataDir)
	for i := range 5 {
		writeTree(t, e.workDir, map[string]string{"app.log": log + fmt.Sprintf("line %d\n", i)})
		var diff proto.CheckpointDiff
		e.must(http.StatusOK, "GET", e.sessionPath(ws.ID, sess.ID)+"/checkpoints/"+cks[0].ID+"/diff", nil, &diff)
		require.Equal(t, []proto.FileChange{{Path: "app.log", Change: proto.ChangeModified}}, diff.Files)
		assert.Contains(t, diff.Diff, fmt.Sprintf("+line %d", i))
	}
	assert.Equal(t, before, storeObjects(t, e.cfg.DataDir), "five diffs wrote objects")

	e.must(http.StatusNoContent, "DELETE", e.sessionPath(ws.ID, sess.ID), nil, nil)
	s.close()
	e.restart()
	assert.Zero(t, storeObjects(t, e.cfg.DataDir), "no live session reaches anything")
}
