package coordinator

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

var bg = context.Background()

// requireEnded checks that each run has exactly one run.completed in the
// log, with that outcome.
func requireEnded(t *testing.T, h *harness, outcome string, runIDs ...string) {
	t.Helper()
	for _, id := range runIDs {
		count, got := h.db.completions(id)
		assert.Equal(t, 1, count, "run.completed of %s", id)
		assert.Equal(t, outcome, got, "outcome of %s", id)
	}
	assert.Empty(t, h.rec.broken)
}

// TestPromptRunsAndCompletes: a 202 yields exactly one run.completed, and
// the session ends idle (invariant 1).
func TestPromptRunsAndCompletes(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	acc := h.accept(sid, "hello")
	assert.Equal(t, proto.RunRunning, acc.State)
	assert.Equal(t, sid, acc.SessionID)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, acc.RunID)
	busy, queued := h.c.State("", sid)
	assert.False(t, busy)
	assert.Zero(t, queued)
}

// TestPromptsQueueInOrder: later prompts queue behind the active run, in
// order, and Status shows them; they run one at a time (invariant 7).
func TestPromptsQueueInOrder(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "first")
	b := h.accept(sid, "second")
	c, err := h.c.Compact(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Equal(t, proto.RunQueued, b.State)
	assert.Equal(t, 1, b.Position)
	assert.Equal(t, 2, c.Position)
	st, err := h.c.Status(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.True(t, st.Busy)
	require.NotNil(t, st.ActiveRunID)
	assert.Equal(t, a.RunID, *st.ActiveRunID)
	require.Len(t, st.Queued, 2)
	assert.Equal(t, proto.QueuedRun{RunID: b.RunID, Prompt: "second"}, st.Queued[0])
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID, b.RunID, c.RunID)
	ar, _ := h.rec.run(c.RunID)
	assert.True(t, ar.Compact, "a compaction run is run as one")
	h.requireIdle(sid)
}

// TestCancelStopsActiveAndQueued: a cancel lists the active run and the
// queued ones, each ends canceled, the ones that never started too (a
// cancel right after a 202 is not lost), and a prompt accepted after the
// cancel runs normally (invariants 2 and 4).
func TestCancelStopsActiveAndQueued(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "first")
	b := h.accept(sid, "second")
	c := h.accept(sid, "third")
	h.began(a.RunID)
	ids, err := h.c.Cancel(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Equal(t, []string{a.RunID, b.RunID, c.RunID}, ids)
	d := h.accept(sid, "after the cancel")
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeCanceled, a.RunID, b.RunID, c.RunID)
	requireEnded(t, h, proto.OutcomeEndTurn, d.RunID)
}

// TestCancelWhileIdleChangesNothing: invariant 3.
func TestCancelWhileIdleChangesNothing(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	ids, err := h.c.Cancel(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Equal(t, []string{}, ids)
	a := h.accept(sid, "hello")
	require.NoError(t, h.settle(sid))
	ids, err = h.c.Cancel(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Empty(t, ids)
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID)

	_, err = h.c.Cancel(bg, h.ws.ID, "0b0b0b0b-0000-4000-8000-000000000000")
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
}

// TestCancelAfterCommitIsNotListed: a run that committed to its end
// before the cancel is neither canceled nor listed, so every listed run
// ends canceled (invariant 2).
func TestCancelAfterCommitIsNotListed(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "hello")
	h.began(a.RunID)
	ar, _ := h.rec.run(a.RunID)
	require.True(t, ar.Commit(), "the run commits")
	ids, err := h.c.Cancel(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Empty(t, ids)
	assert.False(t, ar.Canceled())
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID)
}

// TestCancelMeetsTheLastStep: a cancel that comes as the run takes its
// last step, before it committed to its end, lists it, and the run ends
// canceled (invariant 2).
func TestCancelMeetsTheLastStep(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "hello")
	h.gates.step(sid)
	select {
	case id := <-h.rec.last:
		require.Equal(t, a.RunID, id)
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not reach its last step")
	}
	ids, err := h.c.Cancel(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Equal(t, []string{a.RunID}, ids)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeCanceled, a.RunID)
}

// TestSteer: a steered prompt joins the active run, which takes it
// before its next step, and adds no run.completed of its own; with no
// run, or with a compaction running, it is a run of its own.
func TestSteer(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	idle, err := h.steer(sid, "while idle")
	require.NoError(t, err)
	assert.Equal(t, proto.RunRunning, idle.State, "a steer with no run is a prompt")
	h.began(idle.RunID)
	s, err := h.steer(sid, "join it")
	require.NoError(t, err)
	assert.Equal(t, proto.RunSteered, s.State)
	assert.Equal(t, idle.RunID, s.RunID)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, idle.RunID)
	h.rec.mu.Lock()
	assert.Equal(t, 1, h.rec.steers[idle.RunID], "the run took the steered prompt")
	h.rec.mu.Unlock()

	sid = h.session()
	c, err := h.c.Compact(bg, h.ws.ID, sid)
	require.NoError(t, err)
	h.began(c.RunID)
	q, err := h.steer(sid, "behind a compaction")
	require.NoError(t, err)
	assert.Equal(t, proto.RunQueued, q.State)
	assert.NotEqual(t, c.RunID, q.RunID)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, c.RunID, q.RunID)
}

// TestPromptRefusesBadInput: what a prompt refuses is a 400 and changes
// nothing; an unknown session is 404.
func TestPromptRefusesBadInput(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	long := make([]byte, MaxPrompt+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, req := range map[string]proto.PromptRequest{
		"delivery":   {SessionID: sid, Prompt: "x", Delivery: "later"},
		"no session": {Prompt: "x"},
		"bad uuid":   {SessionID: "nope", Prompt: "x"},
		"empty":      {SessionID: sid, Prompt: "  "},
		"long":       {SessionID: sid, Prompt: string(long)},
		"client":     {SessionID: sid, Prompt: "x", ClientID: "nope"},
		"name":       {SessionID: sid, Prompt: "x", Attachments: []proto.Attachment{{Type: "blob", DisplayName: string(long[:2000])}}},
		"path":       {SessionID: sid, Prompt: "x", Attachments: []proto.Attachment{{Type: "file", Path: string(long[:5000])}}},
		"mime":       {SessionID: sid, Prompt: "x", Attachments: []proto.Attachment{{Type: "blob", MimeType: string(long[:300])}}},
	} {
		_, err := h.c.Prompt(bg, h.ws.ID, req)
		want := proto.CodeInvalidArgument
		if name == "long" || name == "name" || name == "path" || name == "mime" {
			want = proto.CodeBodyTooLarge
		}
		assert.Equal(t, want, apierr.ErrorCode(err), name)
	}
	_, err := h.prompt("0b0b0b0b-0000-4000-8000-000000000000", "x")
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
	_, err = h.c.Prompt(bg, "0b0b0b0b-0000-4000-8000-000000000000", proto.PromptRequest{SessionID: sid, Prompt: "x"})
	assert.Equal(t, proto.CodeWorkspaceNotFound, apierr.ErrorCode(err))
	h.requireIdle(sid)
}

// TestDeleteFencesPrompts: from the delete's start the session takes no
// prompt; a delete that failed lifts the fence; a session created again
// under a deleted one's id takes prompts.
func TestDeleteFencesPrompts(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "running")
	h.began(a.RunID)
	done := h.c.Forget(bg, h.ws, sid)
	requireEnded(t, h, proto.OutcomeCanceled, a.RunID)
	_, err := h.prompt(sid, "during the delete")
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
	done(false)
	b := h.accept(sid, "the delete failed")
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, b.RunID)

	require.NoError(t, h.sessions.Delete(bg, h.ws.ID, sid))
	_, err = h.prompt(sid, "after the delete")
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
	_, err = h.c.Compact(bg, h.ws.ID, sid)
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
	h.tools.mu.Lock()
	assert.Contains(t, h.tools.forgotten, sid)
	h.tools.mu.Unlock()

	// The same id again: a new session, which runs.
	require.NoError(t, h.db.CreateSession(bg, store.Session{ID: sid, WorkspaceID: h.ws.ID, Title: "again", Model: "echo"}))
	c := h.accept(sid, "created again")
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, c.RunID)
}

// TestDeleteWithQueuedRuns: a delete cancels what runs and what is
// queued; nothing of the session runs once it returned.
func TestDeleteWithQueuedRuns(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	var ids []string
	for range 5 {
		acc := h.accept(sid, "queued")
		ids = append(ids, acc.RunID)
	}
	require.NoError(t, h.sessions.Delete(bg, h.ws.ID, sid))
	for _, id := range ids {
		assert.Equal(t, proto.OutcomeCanceled, h.rec.outcome(id), "run %s", id)
	}
	busy, queued := h.c.State("", sid)
	assert.False(t, busy)
	assert.Zero(t, queued)
	assert.Nil(t, h.c.existing(sid), "a deleted session leaves the map")
}

// TestWorkspaceClosedSuspendsParkedRuns: when the workspace closes, runs
// end (canceled), a run waiting on a client is suspended, and an answer
// revives it after the restart, once: it ends normally (invariant 1).
func TestWorkspaceClosedSuspendsParkedRuns(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	p := h.accept(sid, "park on a client")
	q := h.accept(sid, "queued behind")
	h.began(p.RunID)
	h.restart(false)
	count, _ := h.db.completions(p.RunID)
	assert.Zero(t, count, "a suspended run has not ended")
	requireEnded(t, h, proto.OutcomeCanceled, q.RunID)
	assert.Equal(t, []string{p.RunID}, h.broker.suspendedRuns(sid))
	h.gates.open(sid)
	require.True(t, h.broker.answer(sid))
	h.broker.answer(sid) // a second answer revives nothing
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, p.RunID)
}

// TestRecoverEndsLostRuns: after a crash, the runs it left are ended
// interrupted at the next start, those waiting on a client excepted; on a
// takeover (RecoverWorkspace) the runs that never started run instead,
// with their attachments from the store.
func TestRecoverEndsLostRuns(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "running")
	b := h.accept(sid, "queued")
	h.began(a.RunID)
	h.restart(true)
	requireEnded(t, h, proto.OutcomeInterrupted, a.RunID, b.RunID)

	// Recover again: nothing left to end.
	require.NoError(t, h.c.Recover(bg))
	requireEnded(t, h, proto.OutcomeInterrupted, a.RunID, b.RunID)

	blob := base64.StdEncoding.EncodeToString([]byte("some notes"))
	c := h.accept(sid, "running")
	h.began(c.RunID)
	d, err := h.c.Prompt(bg, h.ws.ID, proto.PromptRequest{SessionID: sid, Prompt: "with a blob", Attachments: []proto.Attachment{{Type: "blob", Data: blob, MimeType: "text/plain", DisplayName: "notes"}}})
	require.NoError(t, err)
	s, err := h.steer(sid, "steered in")
	require.NoError(t, err)
	require.Equal(t, c.RunID, s.RunID)
	h.crash()
	h.start()
	queued, err := h.c.RecoverWorkspace(bg, h.ws.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, queued)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeInterrupted, c.RunID)
	requireEnded(t, h, proto.OutcomeEndTurn, d.RunID)
	ar, _ := h.rec.run(d.RunID)
	require.Len(t, ar.Attachments, 1, "the run taken over has its attachments")
	assert.Contains(t, ar.Attachments[0].Text, "some notes")

	_, err = h.c.RecoverWorkspace(bg, "0b0b0b0b-0000-4000-8000-000000000000")
	assert.Error(t, err)
}

// TestResume: a cold resume revives the session's suspended runs when
// asked to continue them, and ends them interrupted when not; a warm one
// (a run in memory) leaves them alone.
func TestResume(t *testing.T) {
	h := newHarness(t)
	const client = "0c0c0c0c-0000-4000-8000-000000000000"
	sid := h.session()
	p := h.accept(sid, "park")
	h.began(p.RunID)
	h.restart(false)
	h.gates.open(sid)
	res, err := h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client, ContinuePendingWork: true})
	require.NoError(t, err)
	assert.Equal(t, sid, res.Session.ID)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, p.RunID)

	sid = h.session()
	p = h.accept(sid, "park")
	h.began(p.RunID)
	h.restart(false)
	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client})
	require.NoError(t, err)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeInterrupted, p.RunID)

	// Warm: the parked run is in memory; a resume without continue
	// leaves it waiting.
	sid = h.session()
	p = h.accept(sid, "park")
	h.began(p.RunID)
	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client})
	require.NoError(t, err)
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, p.RunID)

	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: "nope"})
	assert.Equal(t, proto.CodeInvalidArgument, apierr.ErrorCode(err))
	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client, Provider: &proto.Provider{Type: "nope"}})
	assert.Equal(t, proto.CodeInvalidArgument, apierr.ErrorCode(err))
	h.tools.refuse = apierr.Errorf(proto.CodeInvalidArgument, "tool conflict")
	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client})
	assert.Equal(t, proto.CodeInvalidArgument, apierr.ErrorCode(err))
	h.tools.refuse = nil
	_, err = h.c.Resume(bg, h.ws.ID, sid, proto.ResumeRequest{ClientID: client, Provider: &proto.Provider{Type: "openai", APIKey: "k"}, MCPServers: []byte(`{}`)})
	require.NoError(t, err)
}

// TestPendingWork: the pending routes reach the broker for an existing
// workspace and session only.
func TestPendingWork(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	const nowhere = "0b0b0b0b-0000-4000-8000-000000000000"
	pend, err := h.c.Pending(bg, h.ws.ID, sid)
	require.NoError(t, err)
	assert.Empty(t, pend.Permissions)
	_, err = h.c.Pending(bg, h.ws.ID, nowhere)
	assert.Equal(t, proto.CodeSessionNotFound, apierr.ErrorCode(err))
	perms, err := h.c.Permissions(bg, h.ws.ID)
	require.NoError(t, err)
	assert.Empty(t, perms)
	_, err = h.c.Permissions(bg, nowhere)
	assert.Equal(t, proto.CodeWorkspaceNotFound, apierr.ErrorCode(err))
	got, err := h.c.AnswerPermission(bg, h.ws.ID, "r1", proto.PermissionAnswer{})
	require.NoError(t, err)
	assert.Equal(t, "answered r1", got)
	_, err = h.c.AnswerPermission(bg, nowhere, "r1", proto.PermissionAnswer{})
	assert.Equal(t, proto.CodeWorkspaceNotFound, apierr.ErrorCode(err))
	require.NoError(t, h.c.AnswerToolCall(bg, h.ws.ID, "r2", proto.ToolCallAnswer{}))
	assert.Equal(t, proto.CodeWorkspaceNotFound, apierr.ErrorCode(h.c.AnswerToolCall(bg, nowhere, "r2", proto.ToolCallAnswer{})))
}

// TestProviders: a session's own provider is built with the key it was
// given (in memory), and a provider that cannot be built still lets the
// run go through and end.
func TestProviders(t *testing.T) {
	h := newHarness(t)
	var got []provider.Config
	h.newProvider = func(pc provider.Config) (provider.Provider, error) {
		got = append(got, pc)
		if pc.BaseURL == "http://broken" {
			return nil, errors.New("no such provider")
		}
		return echoProvider{}, nil
	}
	s, err := h.sessions.Create(bg, h.ws.ID, proto.CreateSessionRequest{Model: "openai/gpt-x", Provider: &proto.Provider{Type: "openai", BaseURL: "http://own", APIKey: "sk-own"}})
	require.NoError(t, err)
	a := h.accept(s.ID, "hello")
	require.NoError(t, h.settle(s.ID))
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID)
	require.Len(t, got, 1)
	assert.Equal(t, "sk-own", got[0].APIKey)
	ar, _ := h.rec.run(a.RunID)
	assert.Equal(t, "gpt-x", ar.ModelName)
	assert.NotNil(t, ar.System)
	assert.NotEmpty(t, ar.System([]string{"bash"}))

	s, err = h.sessions.Create(bg, h.ws.ID, proto.CreateSessionRequest{Model: "openai/gpt-x", Provider: &proto.Provider{Type: "openai", BaseURL: "http://broken", APIKey: "k"}})
	require.NoError(t, err)
	b := h.accept(s.ID, "hello")
	require.NoError(t, h.settle(s.ID))
	ar, _ = h.rec.run(b.RunID)
	_, failed := ar.Provider.(failing)
	assert.True(t, failed, "the run gets a provider that fails")
	_, err = ar.Provider.Stream(bg, provider.Request{}, nil)
	assert.Error(t, err)
}

// TestMCPLostServers: a session whose own MCP servers were given before a
// restart has them listed failed, with why, and told once as it runs.
func TestMCPLostServers(t *testing.T) {
	h := newHarness(t)
	sid := "0d0d0d0d-0000-4000-8000-000000000000"
	require.NoError(t, h.db.CreateSession(bg, store.Session{ID: sid, WorkspaceID: h.ws.ID, Title: "t", Model: "echo", Config: []byte(`{"mcp_server_names":["mine"]}`)}))
	sts, err := h.c.MCPServers(bg, h.ws.ID)
	require.NoError(t, err)
	assert.Empty(t, sts)
	a := h.accept(sid, "hello")
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID)
	sts, err = h.c.MCPServers(bg, h.ws.ID)
	require.NoError(t, err)
	require.Len(t, sts, 1)
	assert.Equal(t, proto.MCPFailed, sts[0].Status)
	assert.Equal(t, sid, sts[0].SessionID)
	assert.Equal(t, []string{}, sts[0].Tools)
	_, err = h.c.MCPServers(bg, "0b0b0b0b-0000-4000-8000-000000000000")
	assert.Equal(t, proto.CodeWorkspaceNotFound, apierr.ErrorCode(err))
}

// TestFileAttachments: a prompt's files and blobs reach the run as the
// model reads them; a bad one is a 400.
func TestFileAttachments(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "bin"), []byte{0, 1, 2, 0, 3}, 0o644))
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "i.png"), png, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(h.dir, "d"), 0o755))
	atts := []proto.Attachment{
		{Type: "file", Path: "a.txt", LineRange: &proto.LineRange{Start: 2, End: 3}},
		{Type: "file", Path: "i.png"},
		{Type: "blob", Data: base64.StdEncoding.EncodeToString([]byte("note")), MimeType: "text/markdown"},
		{Type: "blob", Data: base64.StdEncoding.EncodeToString(png), MimeType: "image/png"},
	}
	a, err := h.c.Prompt(bg, h.ws.ID, proto.PromptRequest{SessionID: sid, Prompt: "look", Attachments: atts})
	require.NoError(t, err)
	require.NoError(t, h.settle(sid))
	ar, _ := h.rec.run(a.RunID)
	require.Len(t, ar.Attachments, 4)
	assert.Contains(t, ar.Attachments[0].Text, "two\nthree")
	assert.NotContains(t, ar.Attachments[0].Text, "one")
	assert.NotNil(t, ar.Attachments[1].Image)
	assert.Contains(t, ar.Attachments[2].Text, "note")
	assert.NotNil(t, ar.Attachments[3].Image)

	for name, att := range map[string]proto.Attachment{
		"missing":     {Type: "file", Path: "none.txt"},
		"no path":     {Type: "file"},
		"dir":         {Type: "file", Path: "d"},
		"binary":      {Type: "file", Path: "bin"},
		"range":       {Type: "file", Path: "a.txt", LineRange: &proto.LineRange{Start: 3, End: 2}},
		"past end":    {Type: "file", Path: "a.txt", LineRange: &proto.LineRange{Start: 9, End: 9}},
		"image range": {Type: "file", Path: "i.png", LineRange: &proto.LineRange{Start: 1, End: 1}},
		"file data":   {Type: "file", Path: "a.txt", Data: "eA=="},
		"outside":     {Type: "file", Path: "../x"},
		"no data":     {Type: "blob", MimeType: "text/plain"},
		"no mime":     {Type: "blob", Data: "eA=="},
		"base64":      {Type: "blob", Data: "!!", MimeType: "text/plain"},
		"media type":  {Type: "blob", Data: "eA==", MimeType: "not a type"},
		"unsupported": {Type: "blob", Data: "eA==", MimeType: "application/zip"},
		"binary blob": {Type: "blob", Data: base64.StdEncoding.EncodeToString([]byte{0, 1}), MimeType: "text/plain"},
		"blob path":   {Type: "blob", Data: "eA==", MimeType: "text/plain", Path: "a.txt"},
		"type":        {Type: "other"},
	} {
		_, err := h.c.Prompt(bg, h.ws.ID, proto.PromptRequest{SessionID: sid, Prompt: "x", Attachments: []proto.Attachment{att}})
		assert.Equal(t, proto.CodeInvalidArgument, apierr.ErrorCode(err), name)
	}
}

// TestHooksBindOnce: the Hooks are bound to one Coordinator, and a call
// before it exists is a wiring bug.
func TestHooksBindOnce(t *testing.T) {
	hooks := &Hooks{}
	assert.Panics(t, func() { hooks.State("w", "s") })
	New(Config{Hooks: hooks})
	busy, queued := hooks.State("w", "s")
	assert.False(t, busy)
	assert.Zero(t, queued)
	assert.Panics(t, func() { New(Config{Hooks: hooks}) })
}

// TestWaitAndSweep: Wait returns once the workers are done; a sweep drops
// what idle sessions keep, and their next prompt runs as before.
func TestWaitAndSweep(t *testing.T) {
	h := newHarness(t)
	sid := h.session()
	a := h.accept(sid, "hello")
	require.NoError(t, h.settle(sid))
	require.NoError(t, h.c.Wait(bg))
	h.c.SweepIdle()
	h.c.SweepIdle()
	assert.Nil(t, h.c.existing(sid))
	b := h.accept(sid, "again")
	require.NoError(t, h.settle(sid))
	requireEnded(t, h, proto.OutcomeEndTurn, a.RunID, b.RunID)
	_ = agent.ReviveContinue
}
