package acp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/proto"
)

// attached is a session the editor created or loaded on this connection:
// its events reach the editor as session/update while the connection
// lasts, whoever caused them.
type attached struct {
	c    *conn
	id   string
	wsID string
	// root is the workspace's directory, for the absolute paths ACP wants.
	root string

	st     bridge.Stream
	ctx    context.Context
	cancel context.CancelFunc
	// ended is closed when the live loop ends: a prompt waiting for its
	// run then has nothing more to wait for.
	ended chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	started bool
	stopped bool
	tr      *translator
	// mine are the runs this connection prompted, waiting for their end.
	mine    map[string]bool
	results map[string]runResult
	waiters map[string]chan runResult
	// asks are the editor's outstanding permission requests, by request id.
	asks map[string]context.CancelFunc
}

// runResult is how a run ended, with its last finish reason (max_tokens
// ends a run end_turn).
type runResult struct {
	proto.RunCompleted
	finish string
}

// attach replays the session's history to the editor when replay is set
// (session/load), subscribes to what follows, and answers with its modes;
// the live updates start once the answer is sent.
func (c *conn) attach(ctx context.Context, ws proto.Workspace, s proto.Session, replay bool) (any, error) {
	hist, err := c.be.History(ctx, ws.ID, s.ID, 0)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(c.ctx)
	a := &attached{
		c: c, id: s.ID, wsID: ws.ID, root: ws.Path, ctx: actx, cancel: cancel, ended: make(chan struct{}),
		mine: map[string]bool{}, results: map[string]runResult{}, waiters: map[string]chan runResult{}, asks: map[string]context.CancelFunc{},
	}
	a.tr = newTranslator(a, s.PermissionMode)
	var after int64
	lastVersion := lastVersions(hist)
	for i, ev := range hist {
		ups := a.tr.replay(ev, i, lastVersion)
		if replay {
			for _, u := range ups {
				if err := a.send(u); err != nil {
					cancel()
					return nil, err
				}
			}
		}
		after = ev.Seq
	}
	a.st, err = c.be.Subscribe(actx, ws.ID, s.ID, after)
	if err != nil {
		cancel()
		return nil, err
	}
	modes, err := c.modes(ctx, s.PermissionMode)
	if err != nil {
		a.st.Close()
		cancel()
		return nil, err
	}
	c.mu.Lock()
	old := c.sessions[s.ID]
	c.sessions[s.ID] = a
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	res := &sessionResult{Modes: modes, after: a.start}
	if !replay {
		res.SessionID = s.ID
	}
	return res, nil
}

// send sends one session/update.
func (a *attached) send(u any) error {
	return a.c.peer.notify("session/update", update{SessionID: a.id, Update: u})
}

// start runs the live loop: the permission requests still pending when
// the session was attached go to the editor, then every event as it comes.
func (a *attached) start() {
	a.mu.Lock()
	if a.stopped || a.started {
		a.mu.Unlock()
		return
	}
	a.started = true
	pending := a.tr.pendingAsks()
	a.mu.Unlock()
	for _, req := range pending {
		a.ask(req, a.tr.permissionCall(req))
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(a.ended)
		for {
			ev, err := a.st.Next(a.ctx)
			if err != nil {
				if a.ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					a.c.srv.log.Warn("acp: session event stream ended", "session", a.id, "err", err)
				}
				return
			}
			for _, u := range a.tr.live(ev) {
				if err := a.send(u); err != nil {
					return
				}
			}
		}
	}()
}

// stop ends the session's updates and waits for what it started.
func (a *attached) stop() {
	a.mu.Lock()
	a.stopped = true
	started := a.started
	a.mu.Unlock()
	a.cancel()
	_ = a.st.Close()
	if !started {
		close(a.ended)
	}
	a.wg.Wait()
}

// accepted notes a run this connection prompted (run.accepted with its
// client id), so that its end is kept for its prompt even when it comes
// before the prompt waits for it.
func (a *attached) accepted(runID string) {
	a.mu.Lock()
	a.mine[runID] = true
	a.mu.Unlock()
}

// completed delivers a run's end to its prompt.
func (a *attached) completed(r runResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.waiters[r.RunID]; ok {
		ch <- r
		delete(a.waiters, r.RunID)
		delete(a.mine, r.RunID)
		return
	}
	if a.mine[r.RunID] {
		a.results[r.RunID] = r
		delete(a.mine, r.RunID)
	}
}

// waitRun returns where the end of a run of this connection arrives.
func (a *attached) waitRun(runID string) <-chan runResult {
	ch := make(chan runResult, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.results[runID]; ok {
		delete(a.results, runID)
		ch <- r
		return ch
	}
	a.waiters[runID] = ch
	return ch
}

// forgetRun drops a prompt's wait (its request ended first).
func (a *attached) forgetRun(runID string) {
	a.mu.Lock()
	delete(a.waiters, runID)
	delete(a.results, runID)
	delete(a.mine, runID)
	a.mu.Unlock()
}

// Permission options: ACP's kinds, with Tandem's decisions as their ids.
var permissionOptions = []permissionOption{
	{OptionID: proto.DecisionApproveOnce, Name: "Approve once", Kind: "allow_once"},
	{OptionID: proto.DecisionApproveSession, Name: "Approve for this session", Kind: "allow_always"},
	{OptionID: proto.DecisionReject, Name: "Reject", Kind: "reject_once"},
}

// ask sends a permission request to the editor, at the same time as the
// server sends it to every other client, and answers with the editor's
// choice. When another client answers first, resolved withdraws it.
func (a *attached) ask(req proto.PermissionRequest, call toolCall) {
	a.mu.Lock()
	if a.stopped || a.asks[req.RequestID] != nil {
		a.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(a.ctx)
	a.asks[req.RequestID] = cancel
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		defer cancel()
		raw, err := a.c.peer.call(ctx, "session/request_permission", permissionParams{SessionID: a.id, ToolCall: call, Options: permissionOptions})
		// From here on the request is the editor's answer's, not
		// withdrawable: the answer's own permission.resolved must not
		// cancel the call that sends it.
		a.mu.Lock()
		delete(a.asks, req.RequestID)
		a.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				a.c.srv.log.Warn("acp: permission request", "request", req.RequestID, "err", err)
			}
			return
		}
		var ans permissionAnswer
		if err := json.Unmarshal(raw, &ans); err != nil || ans.Outcome.Outcome != "selected" {
			return // cancelled (or unreadable): this answer decides nothing
		}
		switch ans.Outcome.OptionID {
		case proto.DecisionApproveOnce, proto.DecisionApproveSession, proto.DecisionReject:
		default:
			a.c.srv.log.Warn("acp: permission answer with an unknown option", "option", ans.Outcome.OptionID)
			return
		}
		// A late answer (another client's came first) changes nothing:
		// the server says it was resolved already.
		if _, err := a.c.be.AnswerPermission(a.ctx, a.wsID, req.RequestID, proto.PermissionAnswer{ClientID: a.c.clientID, Decision: ans.Outcome.OptionID}); err != nil && a.ctx.Err() == nil {
			a.c.srv.log.Warn("acp: answer permission", "request", req.RequestID, "err", err)
		}
	}()
}

// resolved withdraws the editor's request for a permission another client
// answered (or that ended otherwise).
func (a *attached) resolved(requestID string) {
	a.mu.Lock()
	cancel := a.asks[requestID]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
