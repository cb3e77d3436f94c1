package cluster

import (
	"sync"
	"time"
)

// claimant is a workspace this node owns, as the claims of other nodes'
// streams change it (workspace.Workspace).
type claimant interface {
	// Claim counts one more stream of the client, open on another node.
	Claim(clientID string) error
	// Unclaim ends one such stream's claim.
	Unclaim(clientID string)
}

// maxNodeClaims bounds the streams of one workspace counted for one other
// node: far more than a node serves, far less than a bad report claims.
const maxNodeClaims = 1 << 14

// remoteClaims are the streams other nodes reported of one workspace this
// node owns, counted as claims on it like its own streams: they keep the
// workspace open, announce client.attached and client.detached, and a
// client gone from every node loses its tools after the detach grace.
type remoteClaims struct {
	ws claimant

	mu sync.Mutex
	// have holds each node's streams per client, as counted on ws; seen
	// when each node last reported, stamp the stamp of its last report
	// applied.
	have  map[string]map[string]int
	seen  map[string]time.Time
	stamp map[string]uint64
}

func newRemoteClaims(ws claimant) *remoteClaims {
	return &remoteClaims{ws: ws, have: map[string]map[string]int{}, seen: map[string]time.Time{}, stamp: map[string]uint64{}}
}

// set applies node's report (clients: its open streams per client),
// which replaces its previous one; nil releases them all. stamp orders a
// node's reports: one that arrives after a later one (stamped higher) is
// stale, and ignored.
func (c *remoteClaims) set(node string, stamp uint64, clients map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.stamp[node]; ok && stamp <= last {
		return
	}
	c.stamp[node] = stamp
	c.applyLocked(node, clients)
}

// expire releases the claims of nodes that reported nothing for maxAge:
// they died or lost touch, and their streams with them. Their next
// report counts, whatever its stamp (a restarted node's).
func (c *remoteClaims) expire(maxAge time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for node, seen := range c.seen {
		if time.Since(seen) > maxAge {
			delete(c.stamp, node)
			c.applyLocked(node, nil)
		}
	}
}

// releaseAll releases every node's claims: this node no longer owns the
// workspace, and they report to the new owner.
func (c *remoteClaims) releaseAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for node := range c.have {
		c.applyLocked(node, nil)
	}
	clear(c.stamp)
}

// applyLocked makes node's counted streams those of clients. Call with
// mu held.
func (c *remoteClaims) applyLocked(node string, clients map[string]int) {
	have := c.have[node]
	if have == nil {
		have = map[string]int{}
	}
	// The claims this report keeps, which the ones it adds join.
	total := 0
	for id, k := range have {
		total += min(k, max(clients[id], 0))
	}
	for id, n := range clients {
		// A report is a peer's word: a count it got wrong must not keep
		// this loop (and the lock, and Close waiting for it) for ever.
		for have[id] < n && total < maxNodeClaims {
			if c.ws.Claim(id) != nil {
				break // closing or stopping: the next report tries again
			}
			have[id]++
			total++
		}
	}
	for id, n := range have {
		for ; n > max(clients[id], 0); n-- { // a negative count is none
			c.ws.Unclaim(id)
		}
		if n == 0 {
			delete(have, id)
		} else {
			have[id] = n
		}
	}
	if len(have) == 0 {
		delete(c.have, node)
		delete(c.seen, node)
		return
	}
	c.have[node] = have
	c.seen[node] = time.Now()
}
