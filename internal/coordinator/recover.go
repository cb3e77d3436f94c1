package coordinator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/proto"
)

// recoverPage is how many events Recover reads at a time.
const recoverPage = 1000

// Recover ends the runs a crash left behind: accepted (run.accepted on disk)
// but never completed, and not waiting on a client either (those are
// suspended, not lost). Each ends as interrupted, with its user message and a
// finish part, so every 202 still yields exactly one run.completed. A clean
// shutdown leaves none; Recover runs at startup, before the server serves.
func (c *Coordinator) Recover(ctx context.Context) error {
	workspaces, err := c.cfg.Store.ListWorkspaces(ctx)
	if err != nil {
		return fmt.Errorf("recover runs: %w", err)
	}
	for _, w := range workspaces {
		if err := c.recoverWorkspace(ctx, w.ID); err != nil {
			return fmt.Errorf("recover runs of workspace %s: %w", w.ID, err)
		}
	}
	return nil
}

type lostRun struct {
	id, sessionID, prompt, clientID string
}

func (c *Coordinator) recoverWorkspace(ctx context.Context, wsID string) error {
	open := map[string]lostRun{}
	var order []string
	for after := int64(0); ; {
		evs, err := c.cfg.Store.WorkspaceEvents(ctx, wsID, after, 0, recoverPage)
		if err != nil {
			return err
		}
		for _, e := range evs {
			switch e.Type {
			case proto.EventRunAccepted:
				var env struct {
					Data proto.RunAccepted `json:"data"`
				}
				if err := json.Unmarshal(e.Envelope, &env); err != nil {
					return fmt.Errorf("decode event %d: %w", e.Seq, err)
				}
				open[e.RunID] = lostRun{id: e.RunID, sessionID: e.SessionID, prompt: env.Data.Prompt, clientID: env.Data.ClientID}
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
	if len(open) == 0 {
		return nil
	}
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
		ar := &agent.Run{
			ID:        r.id,
			SessionID: r.sessionID,
			ClientID:  r.clientID,
			Workspace: ws,
			Prompt:    r.prompt,
			Revive:    agent.ReviveInterrupt,
		}
		if sess, err := c.cfg.Store.GetSession(ctx, wsID, r.sessionID); err == nil {
			c.configure(ar, sess)
		}
		c.cfg.Runner.Execute(ctx, ar)
	}
	return nil
}
