package tools

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

const (
	// globMaxPattern and globMaxAlternatives bound the cost of matching one
	// path. doublestar matches without nested backtracking (linear in the
	// pattern times the path), except that it tries each "{a,b}"
	// alternative in turn, so their count multiplies the cost: together
	// they keep one match well under a millisecond, and a walk's time
	// proportional to the entries it visits, whatever the pattern.
	globMaxPattern      = 512
	globMaxAlternatives = 64
)

// globPattern is a checked glob, matched against slash-separated paths
// relative to the directory searched. The syntax is doublestar's: "*" and
// "?" within a segment, "**" for any number of whole segments, "[...]"
// classes ("[!...]" or "[^...]" negated), "{a,b}" alternatives, "\" to
// escape.
type globPattern struct {
	pattern string
	// segs are the pattern's segments, used to skip directories no match
	// can be under; nil when they cannot be told apart (a "/" inside
	// braces), and then nothing is skipped.
	segs []string
}

// compileGlob checks p and its cost bounds. what names the argument in the
// error the model reads.
func compileGlob(what, p string) (globPattern, error) {
	if len(p) > globMaxPattern {
		return globPattern{}, fmt.Errorf("invalid %s: %d bytes long, over the %d byte limit", what, len(p), globMaxPattern)
	}
	if !doublestar.ValidatePattern(p) {
		return globPattern{}, fmt.Errorf("invalid %s %q: unbalanced [ ] or { }, an empty [], or a trailing \\", what, p)
	}
	if n := alternatives(p); n > globMaxAlternatives {
		return globPattern{}, fmt.Errorf("invalid %s %q: its { } groups make %d alternatives, over the limit of %d; search in several calls", what, p, n, globMaxAlternatives)
	}
	return globPattern{pattern: p, segs: splitSegments(p)}, nil
}

// match reports whether the slash path rel matches.
func (g globPattern) match(rel string) bool {
	return doublestar.MatchUnvalidated(g.pattern, rel)
}

// mayContain reports whether some path below the directory dir (slash path
// relative to the search) could match, so that a walk can skip the rest.
func (g globPattern) mayContain(dir string) bool {
	if g.segs == nil {
		return true
	}
	parts := strings.Split(dir, "/")
	for i, p := range parts {
		if i >= len(g.segs) {
			return false
		}
		if g.segs[i] == "**" {
			return true
		}
		if !doublestar.MatchUnvalidated(g.segs[i], p) {
			return false
		}
	}
	return len(g.segs) > len(parts)
}

// splitSegments splits p at the slashes outside braces and escapes, or
// returns nil when a slash is inside braces.
func splitSegments(p string) []string {
	var segs []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case '/':
			if depth > 0 {
				return nil
			}
			segs = append(segs, p[start:i])
			start = i + 1
		}
	}
	return append(segs, p[start:])
}

// alternatives counts the patterns the "{...}" groups of p stand for:
// sequential groups multiply, alternatives within a group add. The count is
// capped, so that a hostile pattern cannot overflow it.
func alternatives(p string) int {
	n, _ := altSeq(p, 0)
	return n
}

const altCap = 1 << 20

// altSeq counts a sequence starting at p[i], up to the end of p or to the
// "," or "}" that ends the alternative it is in; it returns the count and
// where it stopped.
func altSeq(p string, i int) (int, int) {
	n := 1
	for i < len(p) {
		switch p[i] {
		case '\\':
			i += 2
			continue
		case ',', '}':
			return n, i
		case '{':
			sum := 0
			i++
			for {
				k, j := altSeq(p, i)
				sum = min(sum+k, altCap)
				i = j
				if i >= len(p) || p[i] == '}' {
					break
				}
				i++ // past the ","
			}
			n = min(n*sum, altCap)
		}
		i++
	}
	return n, i
}

// literalPrefix splits off the leading segments of p that hold no pattern
// syntax, which a search can go to directly; rest keeps at least one
// segment.
func literalPrefix(p string) (prefix, rest string) {
	rest = p
	for {
		seg, after, ok := strings.Cut(rest, "/")
		if !ok || strings.ContainsAny(seg, `*?[{\`) {
			return prefix, rest
		}
		if seg != "" && seg != "." {
			prefix = joinRel(prefix, seg)
		}
		rest = after
	}
}
