package config

import (
	"slices"

	"github.com/tandem-dev/tandem/internal/sandbox"
)

// checkSandbox reads the sandbox keys of a file's top level (contract
// section 12): sandbox, sandbox_network, sandbox_read, sandbox_write.
func checkSandbox(c *checker, top map[string]*node) sandbox.Patch {
	var p sandbox.Patch
	if n := top["sandbox"]; n != nil {
		if s, ok := c.str(n, "sandbox", maxNameLen); ok {
			if slices.Contains(sandbox.Modes, s) {
				p.Mode = &s
			} else {
				c.add(n.off, "sandbox", "%s is not %s", quote(s), oneOf(sandbox.Modes))
			}
		}
	}
	if n := top["sandbox_network"]; n != nil {
		if n.kind != 'b' {
			c.add(n.off, "sandbox_network", "must be true or false, got %s", n.kindName())
		} else {
			b := n.boolean
			p.Network = &b
		}
	}
	p.Read = checkPaths(c, top["sandbox_read"], "sandbox_read")
	p.Write = checkPaths(c, top["sandbox_write"], "sandbox_write")
	return p
}

func checkPaths(c *checker, n *node, key string) *[]string {
	if n == nil {
		return nil
	}
	elems, ok := c.array(n, key, sandbox.MaxPaths)
	if !ok {
		return nil
	}
	paths := make([]string, 0, len(elems))
	for i, e := range elems {
		path := indexPath(key, i)
		s, ok := c.nonEmpty(e, path, sandbox.MaxPathLen)
		if !ok {
			continue
		}
		if err := sandbox.ValidPaths(key, []string{s}); err != nil {
			c.add(e.off, path, "must be an absolute path, got %s", quote(s))
			continue
		}
		paths = append(paths, s)
	}
	return &paths
}
