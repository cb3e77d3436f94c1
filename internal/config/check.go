package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// checker walks a parsed file and collects its problems.
type checker struct {
	file string
	data []byte
	errs Errors
	full bool
	// workspace is set for a workspace's file (see ParseWorkspace).
	workspace bool
}

func (c *checker) add(off int, key, format string, args ...any) {
	if c.full {
		return
	}
	e := &Error{File: c.file, Key: key, Reason: fmt.Sprintf(format, args...)}
	if c.data != nil {
		e.Line, e.Col = lineCol(c.data, off)
	}
	if len(c.errs) == maxErrors {
		e.Key = ""
		e.Reason = fmt.Sprintf("more problems not shown; fix these %d first", maxErrors)
		c.full = true
	}
	c.errs = append(c.errs, e)
}

// object checks that n is an object whose keys are all in allowed, each
// given once, and returns its values by key.
func (c *checker) object(n *node, path string, allowed ...string) (map[string]*node, bool) {
	if n.kind != 'o' {
		c.add(n.off, path, "must be an object, got %s", n.kindName())
		return nil, false
	}
	out := make(map[string]*node, len(n.members))
	for _, m := range n.members {
		key := keyPath(path, m.key)
		if !contains(allowed, m.key) {
			c.add(m.keyOff, key, "unknown key%s; want %s", suggest(m.key, allowed), oneOf(allowed))
			continue
		}
		if _, dup := out[m.key]; dup {
			c.add(m.keyOff, key, "given twice")
			continue
		}
		out[m.key] = m.val
	}
	return out, true
}

// entries checks that n is an object used as a map (any keys, each once) of
// at most max entries and returns its members in file order.
func (c *checker) entries(n *node, path string, max int) []member {
	if n.kind != 'o' {
		c.add(n.off, path, "must be an object, got %s", n.kindName())
		return nil
	}
	if len(n.members) > max {
		c.add(n.off, path, "has %d entries, more than %d", len(n.members), max)
		return nil
	}
	seen := make(map[string]bool, len(n.members))
	out := make([]member, 0, len(n.members))
	for _, m := range n.members {
		if seen[m.key] {
			c.add(m.keyOff, keyPath(path, m.key), "given twice")
			continue
		}
		seen[m.key] = true
		out = append(out, m)
	}
	return out
}

// array checks that n is an array of at most max elements.
func (c *checker) array(n *node, path string, max int) ([]*node, bool) {
	if n.kind != 'a' {
		c.add(n.off, path, "must be an array, got %s", n.kindName())
		return nil, false
	}
	if len(n.elems) > max {
		c.add(n.off, path, "has %d elements, more than %d", len(n.elems), max)
		return nil, false
	}
	return n.elems, true
}

// str checks that n is a string of at most max bytes without NUL.
func (c *checker) str(n *node, path string, max int) (string, bool) {
	if n.kind != 's' {
		c.add(n.off, path, "must be a string, got %s", n.kindName())
		return "", false
	}
	switch {
	case len(n.str) > max:
		c.add(n.off, path, "is %d bytes long, more than %d", len(n.str), max)
		return "", false
	case strings.ContainsRune(n.str, 0):
		c.add(n.off, path, "must not contain a NUL character")
		return "", false
	}
	return n.str, true
}

// nonEmpty is str for a value that must not be empty or only white space.
func (c *checker) nonEmpty(n *node, path string, max int) (string, bool) {
	s, ok := c.str(n, path, max)
	if ok && strings.TrimSpace(s) == "" {
		c.add(n.off, path, "must not be empty")
		return "", false
	}
	return s, ok
}

// integer checks that n is a whole number in [min, max].
func (c *checker) integer(n *node, path string, min, max int64) (int64, bool) {
	if n.kind != 'n' {
		c.add(n.off, path, "must be a number, got %s", n.kindName())
		return 0, false
	}
	v, err := strconv.ParseInt(n.num.String(), 10, 64)
	if err != nil {
		// 1e3 or 1000.0 are whole numbers a person may well write.
		f, ferr := strconv.ParseFloat(n.num.String(), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			c.add(n.off, path, "must be a whole number, got %s", n.num)
			return 0, false
		}
		v = int64(f)
	}
	if v < min || v > max {
		c.add(n.off, path, "must be between %d and %d, got %d", min, max, v)
		return 0, false
	}
	return v, true
}

// number checks that n is a finite number in [min, max].
func (c *checker) number(n *node, path string, min, max float64) (float64, bool) {
	if n.kind != 'n' {
		c.add(n.off, path, "must be a number, got %s", n.kindName())
		return 0, false
	}
	f, err := strconv.ParseFloat(n.num.String(), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		c.add(n.off, path, "must be a finite number, got %s", n.num)
		return 0, false
	}
	if f < min || f > max {
		c.add(n.off, path, "must be between %g and %g, got %g", min, max, f)
		return 0, false
	}
	return f, true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func oneOf(list []string) string {
	switch len(list) {
	case 0:
		return "no keys here"
	case 1:
		return list[0]
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}

// suggest names the allowed key a typo most likely meant.
func suggest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(key), a, bestD); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// editDistance is the Levenshtein distance of a and b, or limit when it is
// at least limit (long keys cost nothing past that).
func editDistance(a, b string, limit int) int {
	if len(a) > 64 || len(b) > 64 {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}
