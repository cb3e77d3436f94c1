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
		if err := c.recoverWorkspace(ctx, w); err != nil {
			return fmt.Errorf("recover runs of workspace %s: %w", w.ID, err)
		}
	}
	return nil
}

type lostRun struct {
	id, sessionID, prompt, clientID string
	seq                             int64 // of its run.accepted
	// steers are the prompts that joined it (run.accepted, steered).
	steers []agent.Steer
}

func (c *Coordinator) recoverWorkspace(ctx context.Context, w store.Workspace) error {
	wsID := w.ID
	open := map[string]lostRun{}
	var order []string
	mark := w.RecoveredThrough
	for after := w.RecoveredThrough; ; {
		evs, err := c.cfg.Store.WorkspaceEvents(ctx, wsID, after, 0, recoverPage)
		if err != nil {
			return err
		}
		for _, e := range evs {
			mark = e.Seq
			switch e.Type {
			case proto.EventRunAccepted:
				var env struct {
					Data proto.RunAccepted `json:"data"`
				}
				if err := json.Unmarshal(e.Envelope, &env); err != nil {
					return fmt.Errorf("decode event %d: %w", e.Seq, err)
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
				open[e.RunID] = lostRun{id: e.RunID, sessionID: e.SessionID, prompt: env.Data.Prompt, clientID: env.Data.ClientID, seq: e.Seq}
				order = append(order, e.RunID)
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
	if len(open) > 0 {
		if err := c.endLostRuns(ctx, wsID, open, order); err != nil {
			return err
		}
	}
	if mark > w.RecoveredThrough {
		return c.cfg.Store.SetRecoveredThrough(ctx, wsID, mark)
	}
	return nil
}

// endLostRuns ends the open runs, in order, but those waiting on a client.
func (c *Coordinator) endLostRuns(ctx context.Context, wsID string, open map[string]lostRun, order []string) error {
	ws, err := c.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return err
	}
	waiting := map[string]bool{}
	for _, id := range order {
		r, ok := open[id]
		if !ok {
			continue
		}
		if _, seen := waiting[r.sessionID+"/"]; !seen {
			runs, err := c.cfg.Broker.UnfinishedRuns(ctx, wsID, r.sessionID)
			if err != nil {
				return err
			}
			waiting[r.sessionID+"/"] = true
			for _, w := range runs {
				waiting[w] = true
			}
		}
		if waiting[r.id] {
			continue // suspended on a client: resume or an answer settles it
		}
		c.log.Warn("ending a run lost in a crash", "run_id", r.id, "session_id", r.sessionID)
		steers := r.steers
		ar := &agent.Run{
			ID:        r.id,
			SessionID: r.sessionID,
			ClientID:  r.clientID,
			Workspace: ws,
			Prompt:    r.prompt,
			Revive:    agent.ReviveInterrupt,
			Steers: func(bool) []agent.Steer {
				out := steers
				steers = nil
				return out
			},
		}
		if sess, err := c.cfg.Store.GetSession(ctx, wsID, r.sessionID); err == nil {
			c.configure(ar, sess, c.revivedConfig(ws))
		}
		c.cfg.Runner.Execute(ctx, ar)
	}
	return nil
}
