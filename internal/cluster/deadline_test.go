package cluster

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A command that reaches the owner after its deadline (held in a buffer
// while the bus was away, or queued behind others) is refused: its
// sender has told its client workspace_unavailable, so it must not run.
func TestOwnerRefusesACommandPastItsDeadline(t *testing.T) {
	r := &runs{}
	sender, _, ws, _ := pair(t, r)
	body, err := json.Marshal(proto.PromptRequest{SessionID: uuid.NewString(), Prompt: "late"})
	require.NoError(t, err)
	data, err := json.Marshal(command{Op: opPrompt, WorkspaceID: ws, Body: body, Deadline: time.Now().Add(-time.Second).UnixMilli()})
	require.NoError(t, err)
	reply, err := sender.cfg.NATS.Request(commandSubject("owner"), data, 5*time.Second)
	require.NoError(t, err)
	var a answer
	require.NoError(t, json.Unmarshal(reply.Data, &a))
	require.NotNil(t, a.Error)
	assert.Equal(t, proto.CodeWorkspaceUnavailable, a.Error.Code)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Empty(t, r.prompts, "nothing of a late command runs")
}

// ctxRuns records the deadline of the context each prompt is served
// with.
type ctxRuns struct {
	runs
	deadline chan time.Time
}

func (r *ctxRuns) Prompt(ctx context.Context, ws string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	d, _ := ctx.Deadline()
	r.deadline <- d
	return r.runs.Prompt(ctx, ws, req)
}

// Every command carries a deadline, its sender's less the answer's way
// back, and the owner serves it within that deadline: what it does for
// the command (its store writes) is cut off before the sender stops
// waiting, not after.
func TestCommandsCarryTheSendersDeadline(t *testing.T) {
	r := &ctxRuns{deadline: make(chan time.Time, 1)}
	sender, owner, ws, _ := pair(t, &r.runs)
	owner.cfg.Local.Runs = r
	sender.cfg.ForwardTimeout = 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	sent := time.Now()
	_, err := sender.Domain().Runs.Prompt(ctx, ws, proto.PromptRequest{Prompt: "hi"})
	require.NoError(t, err)
	got := <-r.deadline
	callerDeadline, _ := ctx.Deadline()
	assert.True(t, got.Before(callerDeadline.Add(-time.Second)), "the owner's deadline %v leaves room for the answer before the caller's %v", got, callerDeadline)
	assert.True(t, got.After(sent.Add(3*time.Second)), "the owner's deadline %v is the caller's less a bounded room", got)
}
