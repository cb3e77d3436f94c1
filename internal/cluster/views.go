package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/proto"
)

// A workspace's run-time state (open, the clients with streams on any
// node) is known to its owner only: the claims of other nodes' streams are
// reported there. GET /v1/workspaces/{id} is forwarded to the owner like
// every route of a workspace; GET /v1/workspaces, which lists them all,
// asks each owner for the state of the workspaces it owns, in one request
// per owner, and shows the rest as this node knows them (closed, unless
// streams here claim them while their owner changes).

// viewsTimeout bounds an owner's answer: past it the list shows this
// node's own view of that owner's workspaces.
const viewsTimeout = 2 * time.Second

// viewsBatch bounds the ids of one request, far below NATS's payload limit.
const viewsBatch = 1000

// views asks an owner for the state of workspaces; it answers for those
// it owns.
type views struct {
	IDs []string `json:"ids"`
}

// view is one workspace's state as its owner knows it.
type view struct {
	Open    bool `json:"open"`
	Clients int  `json:"clients"`
}

func viewsSubject(nodeID string) string {
	return "tandem.node." + hex.EncodeToString([]byte(nodeID)) + ".views"
}

// list serves GET /v1/workspaces with every workspace's state as its
// owner knows it.
func (n *Node) list(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rec := &recorder{header: http.Header{}}
	next.ServeHTTP(rec, r)
	var body proto.WorkspaceList
	if rec.status == http.StatusOK && json.Unmarshal(rec.body.Bytes(), &body) == nil {
		n.ownersView(r.Context(), body.Workspaces)
		if data, err := json.Marshal(body); err == nil {
			rec.body.Reset()
			rec.body.Write(data)
			rec.header.Del("Content-Length")
		}
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
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
				vs, err := n.askViews(ctx, owner, batch)
				if err != nil {
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

func (n *Node) askViews(ctx context.Context, owner string, ids []string) (map[string]view, error) {
	req, _ := json.Marshal(views{IDs: ids})
	m, err := n.cfg.NATS.RequestWithContext(ctx, viewsSubject(owner), req)
	if err != nil {
		return nil, err
	}
	var vs map[string]view
	if err := json.Unmarshal(m.Data, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// viewed answers another node's views request for the workspaces this
// node owns (all loaded here: owning one loads it).
func (n *Node) viewed(m *nats.Msg) {
	var req views
	if err := json.Unmarshal(m.Data, &req); err != nil || len(req.IDs) > viewsBatch {
		req.IDs = nil // answered at once, with nothing: the asker keeps its own view
	}
	out := make(map[string]view, len(req.IDs))
	for _, id := range req.IDs {
		if !n.owns(id) {
			continue
		}
		ws, err := n.cfg.Workspaces.Get(n.ctx, id)
		if err != nil {
			continue
		}
		info := ws.Info()
		out[id] = view{Open: info.Open, Clients: info.Clients}
	}
	data, _ := json.Marshal(out)
	if err := m.Respond(data); err != nil {
		n.log.Warn("answer views request", "err", err)
	}
}
