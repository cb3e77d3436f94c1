package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// blobs is the blob part of a cluster's store, in memory; the rest of
// Store is not called by these tests.
type blobs struct {
	Store
	mu   sync.Mutex
	data map[string][]byte
	puts int
	// lease is what GetLease answers.
	lease store.Lease
}

// GetWorkspace finds every workspace: none of these tests forgets one.
func (b *blobs) GetWorkspace(_ context.Context, id string) (store.Workspace, error) {
	return store.Workspace{ID: id}, nil
}

func (b *blobs) GetLease(_ context.Context, ws string) (store.Lease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease.WorkspaceID != ws {
		return store.Lease{}, errors.New("blobs: no such lease")
	}
	return b.lease, nil
}

func (b *blobs) PutBlob(_ context.Context, id string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.data[id] = append([]byte(nil), data...)
	b.puts++
	return nil
}

func (b *blobs) TakeBlob(_ context.Context, id string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.data[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	delete(b.data, id)
	return d, nil
}

// runs is the owner's domain: it records the prompts and callers it got,
// and answers as told.
type runs struct {
	domain.Runs
	mu      sync.Mutex
	prompts []proto.PromptRequest
	callers []domain.Caller
	err     error
	big     string
}

func (r *runs) Prompt(ctx context.Context, _ string, req proto.PromptRequest) (proto.PromptAccepted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	who, _ := domain.CallerFrom(ctx)
	r.prompts = append(r.prompts, req)
	r.callers = append(r.callers, who)
	if r.err != nil {
		return proto.PromptAccepted{}, r.err
	}
	return proto.PromptAccepted{RunID: "run-1", SessionID: req.SessionID, State: "running"}, nil
}

// pair is two nodes on one NATS server: owner holds the workspace's
// lease, sender knows it.
func pair(t testing.TB, ownerRuns *runs) (sender, owner *Node, ws string, st *blobs) {
	ns := natstest.Start(t)
	st = &blobs{data: map[string][]byte{}}
	conn := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	ws = uuid.NewString()
	owner = New(Config{NodeID: "owner", NATS: conn(), Store: st, Local: domain.Services{Runs: ownerRuns}})
	sender = New(Config{NodeID: "sender", NATS: conn(), Store: st})
	lease := store.Lease{WorkspaceID: ws, Owner: "owner", Epoch: 1, Expires: time.Now().Add(time.Hour)}
	owner.owned[ws] = lease
	sender.owners[ws] = lease
	for _, n := range []*Node{owner, sender} {
		sub, err := n.cfg.NATS.Subscribe(commandSubject(n.cfg.NodeID), n.serveCommand)
		require.NoError(t, err)
		require.NoError(t, n.cfg.NATS.Flush())
		t.Cleanup(func() {
			_ = sub.Unsubscribe()
			n.spawned.Stop()
			n.spawned.Wait()
		})
	}
	return sender, owner, ws, st
}

// A prompt sent to a node that does not own the workspace reaches the
// owner's domain as the same request, with its caller; the owner's answer
// comes back as it was given.
func TestRouterSendsTypedCallsToTheOwner(t *testing.T) {
	r := &runs{}
	sender, _, ws, _ := pair(t, r)
	who := domain.Caller{TokenID: "tok-1", Name: "ana", Role: "member", ClientID: uuid.NewString()}
	ctx := domain.WithCaller(context.Background(), who)
	req := proto.PromptRequest{SessionID: uuid.NewString(), Prompt: "hello", ClientID: who.ClientID, Delivery: proto.DeliverySteer,
		Attachments: []proto.Attachment{{Type: "file", Path: "a.go", LineRange: &proto.LineRange{Start: 1, End: 3}}}}
	acc, err := sender.Domain().Runs.Prompt(ctx, ws, req)
	require.NoError(t, err)
	assert.Equal(t, proto.PromptAccepted{RunID: "run-1", SessionID: req.SessionID, State: "running"}, acc)
	require.Len(t, r.prompts, 1)
	assert.Equal(t, req, r.prompts[0])
	assert.Equal(t, who, r.callers[0])
}

// The owner's errors are the caller's: the same code and message, so
// they map to the same status on any node. A storage failure stays one,
// and an unexpected failure shows no detail.
func TestRouterCarriesTheOwnersErrors(t *testing.T) {
	r := &runs{}
	sender, _, ws, _ := pair(t, r)
	run := func(err error) error {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		_, got := sender.Domain().Runs.Prompt(context.Background(), ws, proto.PromptRequest{Prompt: "x"})
		return got
	}
	var te *apierr.Error
	err := run(apierr.Errorf(proto.CodeSessionNotFound, "session s not found"))
	require.ErrorAs(t, err, &te)
	assert.Equal(t, &apierr.Error{Code: proto.CodeSessionNotFound, Message: "session s not found"}, te)

	err = run(errors.Join(errors.New("disk full at /var/lib/secret"), store.ErrUnavailable))
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.NotContains(t, err.Error(), "secret")

	err = run(errors.New("boom at /var/lib/secret"))
	assert.Equal(t, proto.CodeInternal, apierr.ErrorCode(err))
	assert.NotContains(t, err.Error(), "secret")
}

// A command larger than one NATS message goes by reference: its body is
// in the store's blobs, taken (and deleted) by the owner.
func TestRouterPassesLargeCommandsByReference(t *testing.T) {
	r := &runs{}
	sender, _, ws, st := pair(t, r)
	big := strings.Repeat("x", int(sender.cfg.NATS.MaxPayload())*3)
	_, err := sender.Domain().Runs.Prompt(context.Background(), ws, proto.PromptRequest{Prompt: "look",
		Attachments: []proto.Attachment{{Type: "blob", MimeType: "image/png", Data: big}}})
	require.NoError(t, err)
	require.Len(t, r.prompts, 1)
	assert.Equal(t, big, r.prompts[0].Attachments[0].Data, "the attachment arrived whole")
	assert.Equal(t, 1, st.puts)
	assert.Empty(t, st.data, "the owner took the blob")
}

// A node that does not own the workspace (it lost it since the sender
// looked) answers workspace_unavailable, and the sender forgets the
// owner it knew.
func TestRouterOwnerThatLostTheWorkspace(t *testing.T) {
	r := &runs{}
	sender, owner, ws, _ := pair(t, r)
	owner.mu.Lock()
	delete(owner.owned, ws)
	owner.mu.Unlock()
	_, err := sender.Domain().Runs.Prompt(context.Background(), ws, proto.PromptRequest{Prompt: "x"})
	assert.Equal(t, proto.CodeWorkspaceUnavailable, apierr.ErrorCode(err))
	assert.Empty(t, r.prompts)
	sender.mu.Lock()
	_, known := sender.owners[ws]
	sender.mu.Unlock()
	assert.False(t, known)
}

// Status answers with a queued prompt as large as told.
func (r *runs) Status(context.Context, string, string) (proto.AgentStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return proto.AgentStatus{Queued: []proto.QueuedRun{{RunID: "run-2", Prompt: r.big}}}, nil
}

// An answer larger than one NATS message comes back by reference too: the
// owner puts it in the blobs, and the sender takes it.
func TestRouterPassesLargeAnswersByReference(t *testing.T) {
	r := &runs{}
	sender, _, ws, st := pair(t, r)
	r.big = strings.Repeat("y", int(sender.cfg.NATS.MaxPayload())*2)
	got, err := sender.Domain().Runs.Status(context.Background(), ws, uuid.NewString())
	require.NoError(t, err)
	require.Len(t, got.Queued, 1)
	assert.Equal(t, r.big, got.Queued[0].Prompt, "the answer arrived whole")
	assert.Equal(t, 1, st.puts)
	assert.Empty(t, st.data, "the sender took the blob")
}

// What a peer sends that the owner cannot serve changes nothing: an
// unknown command is refused as invalid, and a command whose blob is gone
// (swept, or taken already) is answered workspace_unavailable.
func TestRouterRefusesUnknownAndLostCommands(t *testing.T) {
	r := &runs{}
	sender, _, ws, _ := pair(t, r)
	err := sender.send(context.Background(), "owner", &command{Op: "run.format_disk", WorkspaceID: ws}, nil, nil)
	assert.Equal(t, proto.CodeInvalidArgument, apierr.ErrorCode(err))

	m := nats.NewMsg(commandSubject("owner"))
	m.Header.Set(hdrBlob, uuid.NewString())
	reply, err := sender.cfg.NATS.RequestMsg(m, 5*time.Second)
	require.NoError(t, err)
	assert.Contains(t, string(reply.Data), proto.CodeWorkspaceUnavailable)
	assert.Empty(t, r.prompts)
}

// A command to an owner that is gone (no node listens for it) fails at
// once with workspace_unavailable, not after the forward timeout; the
// sender forgets that owner, routes once more from the store (which may
// have a new owner, or none), and deletes the blobs of a large command.
func TestRouterOwnerGone(t *testing.T) {
	r := &runs{}
	sender, _, ws, st := pair(t, r)
	sender.cfg.ForwardTimeout = time.Minute
	gone := store.Lease{WorkspaceID: ws, Owner: "gone", Epoch: 2, Expires: time.Now().Add(time.Hour)}
	sender.remember(gone)
	st.mu.Lock()
	st.lease = gone // what the store says too: the owner died, its lease not yet run out
	st.mu.Unlock()
	start := time.Now()
	_, err := sender.Domain().Runs.Prompt(context.Background(), ws, proto.PromptRequest{Prompt: strings.Repeat("x", int(sender.cfg.NATS.MaxPayload()))})
	assert.Equal(t, proto.CodeWorkspaceUnavailable, apierr.ErrorCode(err))
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 2, st.puts, "the command went by reference, twice: routed again from the store, which still names the gone owner")
	assert.Empty(t, st.data, "nobody will take its blob: it is gone")
	sender.mu.Lock()
	_, known := sender.owners[ws]
	sender.mu.Unlock()
	assert.False(t, known)
}

// A node that still believes a gone node owns the workspace (its lease
// was released, or taken over, since) routes the call again from the
// store, once, and it reaches the owner the store names: the caller never
// sees the stale belief.
func TestRouterStaleOwnerRoutesAgain(t *testing.T) {
	r := &runs{}
	sender, _, ws, st := pair(t, r)
	st.mu.Lock()
	st.lease = store.Lease{WorkspaceID: ws, Owner: "owner", Epoch: 3, Expires: time.Now().Add(time.Hour)}
	st.mu.Unlock()
	sender.remember(store.Lease{WorkspaceID: ws, Owner: "gone", Epoch: 2, Expires: time.Now().Add(time.Hour)})
	acc, err := sender.Domain().Runs.Prompt(context.Background(), ws, proto.PromptRequest{Prompt: "hi"})
	require.NoError(t, err)
	assert.NotEmpty(t, acc.RunID)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Len(t, r.prompts, 1, "the owner got the prompt once")
}
