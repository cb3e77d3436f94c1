package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// A workspace's run-time state (open, the clients with streams on any
// node) is known to its owner only: the claims of other nodes' streams are
// reported there. Getting one workspace is a call on its owner like every
// call on a workspace; listing them all asks each owner for the state of
// the workspaces it owns, in one views command per owner, and shows the
// rest as this node knows them (closed, unless streams here claim them
// while their owner changes).

// viewsTimeout bounds an owner's answer: past it the list shows this
// node's own view of that owner's workspaces.
const viewsTimeout = 2 * time.Second

// viewsBatch bounds the ids of one command, far below NATS's payload limit.
const viewsBatch = 1000

// view is one workspace's state as its owner knows it.
type view struct {
	Open    bool `json:"open"`
	Clients int  `json:"clients"`
}

// ownersView replaces, in list, the state of the workspaces other nodes
// own with theirs. An owner that does not answer leaves this node's view.
func (n *Node) ownersView(ctx context.Context, list []proto.Workspace) {
	leases, err := n.cfg.Store.Leases(ctx)
	if err != nil {
		n.log.Warn("list workspaces: read leases", "err", err)
		return
	}
	now := time.Now()
	byOwner := map[string][]string{}
	for _, l := range leases {
		if l.Owner != n.cfg.NodeID && live(l, now) {
			byOwner[l.Owner] = append(byOwner[l.Owner], l.WorkspaceID)
		}
	}
	var (
		mu  sync.Mutex
		got = map[string]view{}
		wg  sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(ctx, viewsTimeout)
	defer cancel()
	for owner, ids := range byOwner {
		for len(ids) > 0 {
			batch := ids[:min(len(ids), viewsBatch)]
			ids = ids[len(batch):]
			wg.Go(func() {
				var vs map[string]view
				if err := n.send(ctx, owner, &command{Op: opViews, IDs: batch}, nil, &vs); err != nil {
					n.log.Warn("list workspaces: ask their owner", "owner", owner, "err", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range batch {
					if v, ok := vs[id]; ok {
						got[id] = v
					}
				}
			})
		}
	}
	wg.Wait()
	for i := range list {
		if v, ok := got[list[i].ID]; ok {
			list[i].Open, list[i].Clients = v.Open, v.Clients
		}
	}
}

// views answers another node's views command with the state of the
// workspaces, of ids, that this node owns.
func (n *Node) views(ctx context.Context, ids []string) map[string]view {
	if len(ids) > viewsBatch {
		return nil // the asker keeps its own view
	}
	out := make(map[string]view, len(ids))
	for _, id := range ids {
		if !n.owns(id) {
			continue
		}
		ws, err := n.cfg.Local.Workspaces.Get(ctx, id)
		if err != nil {
			continue
		}
		out[id] = view{Open: ws.Open, Clients: ws.Clients}
	}
	return out
}
