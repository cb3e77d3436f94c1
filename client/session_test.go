package client

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// Steering, usage, session settings and compaction through the SDK, against
// the real server and the echo model: a steered prompt joins the running
// run and is answered in it; run.completed, the assistant messages and the
// session carry usage that adds up; UpdateSession changes settings; Compact
// summarizes the conversation in a run of its own.
func TestSteerUsageAndCompactThroughTheSDK(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	c := e.c
	ws := e.workspace()
	stream := openStream(t, c, ws.ID, EventsOptions{})
	require.Equal(t, proto.EventStreamOpened, next(t, stream).Type)
	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{})
	require.NoError(t, err)

	acc, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "/slow 40 20"})
	require.NoError(t, err)
	untilRun(t, stream, proto.EventMessageDelta, acc.RunID)
	st, err := c.Steer(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "and then?"})
	require.NoError(t, err)
	assert.Equal(t, proto.PromptAccepted{RunID: acc.RunID, SessionID: sess.ID, State: proto.RunSteered}, st)
	rc, err := WaitRun(ctx, stream, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	require.NotNil(t, rc.Usage)
	assert.Positive(t, rc.Usage.InputTokens)
	assert.Positive(t, rc.Usage.OutputTokens)

	msgs, err := c.Messages(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	var roles []string
	var sum proto.Usage
	for _, m := range msgs {
		roles = append(roles, m.Role)
		if m.Role == proto.RoleAssistant {
			require.NotNil(t, m.Usage, "every assistant message says what its request used")
			sum = sum.Add(*m.Usage)
		}
	}
	assert.Equal(t, []string{"user", "assistant", "user", "assistant"}, roles, "the steered prompt is answered in the run")
	assert.Equal(t, "and then?", msgs[2].Parts[0].Text)
	assert.Equal(t, "echo: and then?", msgs[3].Parts[0].Text)
	assert.Equal(t, *rc.Usage, sum, "the run's usage is its messages'")

	updated, err := c.UpdateSession(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{
		Title: new("renamed"), Compaction: &proto.CompactionOptions{Auto: new(false)},
	})
	require.NoError(t, err)
	assert.Equal(t, "renamed", updated.Title)
	assert.Equal(t, proto.Compaction{Auto: false, Threshold: proto.DefaultCompaction.Threshold}, updated.Compaction)
	assert.Equal(t, *rc.Usage, updated.Usage, "the session's usage is its run's")

	cacc, err := c.Compact(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	ev, seen := untilRun(t, stream, proto.EventRunCompleted, cacc.RunID)
	crc := decode[proto.RunCompleted](t, ev)
	require.Equal(t, proto.OutcomeEndTurn, crc.Outcome, "%+v", crc.Error)
	assert.Contains(t, types(seen), proto.EventSessionCompactionCompleted)
	msgs, err = c.Messages(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	require.Len(t, msgs, 6, "the summary and the compaction run's end")
	assert.Equal(t, proto.PartSummary, msgs[4].Parts[0].Type)
	assert.Equal(t, msgs[3].ID, msgs[4].Parts[0].ThroughMessageID)

	got, err := c.GetSession(ctx, ws.ID, sess.ID)
	require.NoError(t, err)
	require.NotNil(t, crc.Usage)
	assert.Equal(t, rc.Usage.Add(*crc.Usage), got.Usage, "the compaction's usage counts too")
}

// The sandbox settings through the SDK: a new session shows the default,
// UpdateSession narrows it, and the health says whether this server can
// confine commands (this one was given no helper: it cannot).
func TestSandboxSettingsThroughTheSDK(t *testing.T) {
	e := startServer(t)
	ctx := ctxT(t)
	c := e.c
	ws := e.workspace()
	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{SandboxOptions: proto.SandboxOptions{SandboxRead: &[]string{"/srv/ref"}}})
	require.NoError(t, err)
	assert.Equal(t, proto.SandboxSettings{Sandbox: proto.SandboxWorkspace, SandboxRead: []string{"/srv/ref"}, SandboxWrite: []string{}}, sess.SandboxSettings)
	updated, err := c.UpdateSession(ctx, ws.ID, sess.ID, proto.UpdateSessionRequest{SandboxOptions: proto.SandboxOptions{Sandbox: new(proto.SandboxReadOnly)}})
	require.NoError(t, err)
	assert.Equal(t, proto.SandboxReadOnly, updated.Sandbox)
	assert.Equal(t, []string{"/srv/ref"}, updated.SandboxRead)
	h, err := c.Health(ctx)
	require.NoError(t, err)
	assert.False(t, h.Sandbox.Available)
	assert.Equal(t, "none", h.Sandbox.Mechanism)
}
