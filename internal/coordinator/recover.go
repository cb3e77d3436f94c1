package coordinator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// recoverPage is how many events Recover reads at a time.
const recoverPage = 1000

// Recover ends the runs a crash left behind: accepted (run.accepted on disk)
// but never completed, and not waiting on a client either (those are
// suspended, not lost). Each ends as interrupted, with its user message and a
// finish part, so every 202 still yields exactly one run.completed. A clean
// shutdown leaves none; Recover runs at startup, before the server serves.
//
// It reads each workspace's log from the workspace's RecoveredThrough on,
// and moves that mark up to just below the first run it finds open, so the
// next start reads only what came after: `tandem run`, which starts an
// in-process server when none answers, would otherwise read the whole
// history for each prompt.
// A run it ends now stays above the mark until a later start sees its
// run.completed on disk.
func (c *Coordinator) Recover(ctx context.Context) error {
	workspaces, err := c.cfg.Store.ListWorkspaces(ctx)
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	for _, w := range workspaces {
		if _, err := c.recoverWorkspace(ctx, w, false); err != nil {
			return fmt.Errorf("recover runs of workspace %s: %w", w.ID, err)
		}
	}
	// With the lost runs' ends recorded: what the sessions deleted since
	// the last start held goes.
	c.CollectCheckpoints(ctx)
	return nil
}

type lostRun struct {
	id, sessionID, prompt, clientID string
	seq                             int64 // of its run.accepted
	started                         bool
	compact                         bool // a compaction run (POST .../compact)
	// steers are the prompts that joined it (run.accepted, steered).
	steers []agent.Steer
}

// RecoverWorkspace is Recover for one workspace, for a node of a cluster
// that just took it over from a dead or departed owner: that owner's
// active runs end interrupted, its parked work stays suspended, and its
// queued runs (accepted, never started) run here. It reports how many runs
// it queued: their workspace must be open for them to run.
func (c *Coordinator) RecoverWorkspace(ctx context.Context, wsID string) (queued int, err error) {
	w, err := c.cfg.Store.GetWorkspace(ctx, wsID)
	if err != nil {
		return 0, fmt.Errorf("recover runs of workspace %s: %w", wsID, err)
	}
	return c.recoverWorkspace(ctx, w, true)
}

func (c *Coordinator) recoverWorkspace(ctx context.Context, w store.Workspace, requeue bool) (int, error) {
	wsID := w.ID
	open := map[string]lostRun{}
	var order []string
	mark := w.RecoveredThrough
	for after := w.RecoveredThrough; ; {
		evs, err := c.cfg.Store.WorkspaceEvents(ctx, wsID, after, 0, recoverPage)
		if err != nil {
			return 0, err
		}
		for _, e := range evs {
			mark = e.Seq
			switch e.Type {
			case proto.EventRunAccepted:
				var env struct {
					Data proto.RunAccepted `json:"data"`
				}
				if err := json.Unmarshal(e.Envelope, &env); err != nil {
					return 0, fmt.Errorf("decode event %d: %w", e.Seq, err)
				}
				if env.Data.State == proto.RunSteered {
					// A prompt that joined a run: recorded with the run's
					// end, unless the run had taken it already.
					if r, ok := open[e.RunID]; ok {
						r.steers = append(r.steers, agent.Steer{MessageID: env.Data.MessageID, Prompt: env.Data.Prompt, ClientID: env.Data.ClientID})
						open[e.RunID] = r
					}
					continue
				}
				open[e.RunID] = lostRun{id: e.RunID, sessionID: e.SessionID, prompt: env.Data.Prompt, clientID: env.Data.ClientID, seq: e.Seq, compact: env.Data.Compaction}
				order = append(order, e.RunID)
			case proto.EventRunStarted:
				if r, ok := open[e.RunID]; ok {
					r.started = true
					open[e.RunID] = r
				}
			case proto.EventRunCompleted:
				delete(open, e.RunID)
			}
		}
		if len(evs) < recoverPage {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	for _, r := range open {
		mark = min(mark, r.seq-1)
	}
	queued := 0
	if len(open) > 0 {
		var err error
		if queued, err = c.endLostRuns(ctx, wsID, open, order, requeue); err != nil {
			return 0, err
		}
	}
	if mark > w.RecoveredThrough {
		return queued, c.cfg.Store.SetRecoveredThrough(ctx, wsID, mark)
	}
	return queued, nil
}

// endLostRuns ends the open runs, in order, but those waiting on a client;
// with requeue, those that never started are queued again instead.
func (c *Coordinator) endLostRuns(ctx context.Context, wsID string, open map[string]lostRun, order []string, requeue bool) (int, error) {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return 0, err
	}
	var again []lostRun
	waiting := map[string]bool{}
	for _, id := range order {
		r, ok := open[id]
		if !ok {
			continue
		}
		if _, seen := waiting[r.sessionID+"/"]; !seen {
			runs, err := c.cfg.Broker.UnfinishedRuns(ctx, wsID, r.sessionID)
			if err != nil {
				return 0, err
			}
			waiting[r.sessionID+"/"] = true
			for _, w := range runs {
				waiting[w] = true
			}
		}
		if waiting[r.id] {
			continue // suspended on a client: resume or an answer settles it
		}
		if requeue && !r.started {
			again = append(again, r)
			continue
		}
		c.log.Warn("ending a run lost in a crash", "run_id", r.id, "session_id", r.sessionID)
		// Its user messages, written now if it never started, show them.
		own, kept, err := c.keptAttachments(ctx, r.id)
		if err != nil {
			c.log.Error("read the kept attachments of a lost run", "run_id", r.id, "err", err)
		}
		steers := withKept(r.steers, kept)
		ar := &agent.Run{
			ID:          r.id,
			SessionID:   r.sessionID,
			ClientID:    r.clientID,
			Workspace:   ws,
			Prompt:      r.prompt,
			Attachments: own,
			Revive:      agent.ReviveInterrupt,
			Steers: func(bool) []agent.Steer {
				out := steers
				steers = nil
				return out
			},
		}
		if sess, err := c.cfg.Store.GetSession(ctx, wsID, r.sessionID); err == nil {
			c.configure(ar, sess, c.revivedConfig(ws))
		}
		if cp := c.checkpointer(ws, r.sessionID, ar); cp != nil {
			ar.Ending = cp.endLost
		}
		c.cfg.Runner.Execute(ctx, ar)
	}
	// In accept order, behind whatever each session has: one run at a time
	// per session still holds.
	for _, r := range again {
		c.log.Info("running a run queued on the previous owner", "run_id", r.id, "session_id", r.sessionID)
		sr := c.lockSession(ws, r.sessionID)
		// Its attachments, and those of the prompts steered into it, are
		// read from the store as it starts: not all held here meanwhile.
		c.enqueueLocked(sr, &run{id: r.id, prompt: r.prompt, clientID: r.clientID, compact: r.compact, steers: r.steers, stored: true})
		sr.mu.Unlock()
	}
	return len(again), nil
}

// withKept gives the steers the attachments kept for them.
func withKept(steers []agent.Steer, kept map[string][]agent.Attachment) []agent.Steer {
	for i, st := range steers {
		steers[i].Attachments = kept[st.MessageID]
	}
	return steers
}
