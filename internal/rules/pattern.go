package rules

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxPatternLen bounds a pattern, so that a configuration file cannot make
// matching expensive.
const MaxPatternLen = 1024

// shellOperators are the characters a bash command chains, substitutes or
// redirects with. In an allow rule's command pattern a `*` never spans one of
// them: "git status*" must not approve "git status; rm -rf ~".
const shellOperators = ";&|<>()`\n\r"

// Pattern is a compiled pattern: `*` matches any run of characters (none
// included) and every other character matches itself.
//
// Matching is linear in the text whatever the pattern: the literal pieces
// between stars are placed left to right, each at its leftmost possible
// place, which is optimal for star-only patterns (a later place leaves less
// room and no more choice), so nothing is ever tried twice.
type Pattern struct {
	src string
	// segs are the literals between the stars; one seg means no star.
	segs []string
	// forbidden are the bytes a star may not match ("" for any).
	forbidden string
}

// CompilePattern compiles p. It fails on an empty pattern, one longer than
// MaxPatternLen, and invalid UTF-8.
func CompilePattern(p string) (Pattern, error) {
	return compile(p, "")
}

// compileCommandAllow compiles p for an allow rule's command: its stars do
// not match shell operators.
func compileCommandAllow(p string) (Pattern, error) {
	return compile(p, shellOperators)
}

func compile(p, forbidden string) (Pattern, error) {
	switch {
	case p == "":
		return Pattern{}, errors.New("pattern must not be empty")
	case len(p) > MaxPatternLen:
		return Pattern{}, fmt.Errorf("pattern is %d bytes, more than %d", len(p), MaxPatternLen)
	case !utf8.ValidString(p):
		return Pattern{}, errors.New("pattern is not valid UTF-8")
	}
	return Pattern{src: p, segs: strings.Split(p, "*"), forbidden: forbidden}, nil
}

// Match reports whether the whole of s matches the pattern. The zero Pattern
// matches nothing.
func (p Pattern) Match(s string) bool {
	segs := p.segs
	switch len(segs) {
	case 0:
		return false
	case 1:
		return s == segs[0]
	}
	first, last := segs[0], segs[len(segs)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	pos, end := len(first), len(s)-len(last)
	ops := opFinder{s: s, forbidden: p.forbidden, at: -1}
	for _, seg := range segs[1 : len(segs)-1] {
		if seg == "" {
			continue
		}
		window := s[pos:end]
		// The star before seg may not cross a forbidden byte, so seg
		// must start at or before the first one.
		if op := ops.next(pos); op >= 0 && op-pos+len(seg) < len(window) {
			window = window[:op-pos+len(seg)]
		}
		i := strings.Index(window, seg)
		if i < 0 {
			return false
		}
		pos += i + len(seg)
	}
	// The last star spans s[pos:end].
	op := ops.next(pos)
	return op < 0 || op >= end
}

// opFinder finds the first forbidden byte at or after a position, scanning
// each byte at most once over increasing positions.
type opFinder struct {
	s         string
	forbidden string
	at        int // last answer; -1 before the first
	done      bool
}

func (f *opFinder) next(pos int) int {
	if f.forbidden == "" || f.done {
		return -1
	}
	if f.at >= pos {
		return f.at
	}
	i := strings.IndexAny(f.s[pos:], f.forbidden)
	if i < 0 {
		f.done = true
		return -1
	}
	f.at = pos + i
	return f.at
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }
