package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// counted is a workspace's claims, per client.
type counted map[string]int

func (c counted) Claim(id string) error { c[id]++; return nil }
func (c counted) Unclaim(id string) {
	if c[id]--; c[id] == 0 {
		delete(c, id)
	}
}

func (c counted) total() (n int) {
	for _, k := range c {
		n += k
	}
	return n
}

// The owner applies each node's claims reports as they are stamped, not
// as they arrive: a report overtaken by a later one (a stream opened and
// closed at once, reported twice) changes nothing. A node whose claims
// expired starts afresh, as after its restart; a node that loses the
// workspace releases every claim.
func TestStaleClaimsReportIsIgnored(t *testing.T) {
	ws := counted{}
	c := newRemoteClaims(ws)
	c.set("n2", 2, map[string]int{"c": 1})
	c.set("n2", 1, nil) // sent before, arrived after
	require.Equal(t, 1, ws["c"], "the later report holds")
	c.set("n2", 2, nil) // a duplicate
	require.Equal(t, 1, ws["c"])
	c.set("n2", 3, nil)
	require.Zero(t, ws["c"])

	c.set("n2", 4, map[string]int{"c": 2})
	require.Equal(t, 2, ws.total())
	c.expire(0)
	require.Zero(t, ws.total())
	c.set("n2", 1, map[string]int{"c": 1})
	require.Equal(t, 1, ws.total(), "a report after the expiry counts, whatever its stamp")

	c.set("n3", 1, map[string]int{"d": 2, "c": 1})
	require.Equal(t, counted{"c": 2, "d": 2}, ws)
	c.releaseAll()
	require.Empty(t, ws)
}

// A report's counts are bounded: a node claiming more streams than any
// node serves gets maxNodeClaims of them counted, and the report is
// applied at once rather than looping for ever.
func TestClaimsReportIsBounded(t *testing.T) {
	ws := counted{}
	c := newRemoteClaims(ws)
	c.set("n2", 1, map[string]int{"a": 1 << 62, "b": 3})
	require.Equal(t, maxNodeClaims, ws.total())
	c.set("n2", 2, map[string]int{"b": 3})
	require.Equal(t, counted{"b": 3}, ws, "the next report counts as usual")
	ws["local"] = 1 // a stream on the owner itself
	c.set("n2", 3, map[string]int{"b": -5, "local": -1})
	require.Equal(t, counted{"local": 1}, ws, "a negative count releases the node's own claims, no more")
	delete(ws, "local")
	c.releaseAll()
	require.Empty(t, ws)
}
