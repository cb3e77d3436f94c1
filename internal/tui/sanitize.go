package tui

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Everything the TUI shows that it did not write itself (model and tool
// output, file names, titles, names, ids) comes from someone else and may
// carry terminal control sequences: a title change (ESC ] 0 ; … BEL), a
// clear screen (ESC [ 2 J), cursor moves, OSC 8 links, bells. A terminal
// acts on them, so none may reach it. They are shown instead, as Unicode
// control pictures (␛ for ESC, ␇ for BEL) or as \u escapes, so a reader
// sees that something was there.

// Sanitize makes untrusted text safe to draw: newlines stay, tabs become
// spaces, every other control character (C0, DEL, C1), the bidirectional
// overrides that reorder what is seen, and invalid UTF-8 are replaced by a
// visible stand-in.
func Sanitize(s string) string { return sanitize(s, true) }

// SanitizeLine is Sanitize for text shown on one line (a title, a name, a
// file name): line breaks are shown as ␊ and ␍ too.
func SanitizeLine(s string) string { return sanitize(s, false) }

func sanitize(s string, multiline bool) string {
	if safe(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune('\uFFFD')
			i++
			continue
		}
		i += size
		switch {
		case r == '\n' && multiline:
			b.WriteByte('\n')
		case r == '\t':
			b.WriteString("    ")
		case r < 0x20:
			// U+2400 + the code is its control picture: ␀ … ␟.
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case r >= 0x80 && r <= 0x9f, bidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// safe reports whether s needs no change, the common case, so that it costs
// no allocation.
func safe(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && !(c == '\n' && multiline) || c == 0x7f || c >= 0x80 {
			if c >= 0x80 {
				// Multi-byte: decode and check it properly.
				r, size := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && size == 1 || r <= 0x9f || bidiControl(r) {
					return false
				}
				i += size - 1
				continue
			}
			return false
		}
	}
	return true
}

// bidiControl reports the characters that make a terminal draw text in
// another order than it is stored (the "Trojan Source" trick): shown as
// is, they would let a tool output or a diff read differently from what it
// does.
func bidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// keepSGR removes from s every escape sequence but Select Graphic Rendition
// (colours, bold: ESC [ … m) and every other control character but newline.
// It is the last filter on what a renderer we do not control (glamour)
// produced from sanitized text: whatever it adds, only styling passes.
func keepSGR(s string) string {
	if !strings.ContainsAny(s, "\x1b\x07\r\x7f") && safe(s, true) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0x1b {
			if n := sgrLen(s[i:]); n > 0 {
				b.WriteString(s[i : i+n])
				i += n
				continue
			}
			i += escLen(s[i:])
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\n':
			b.WriteByte('\n')
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, bidiControl(r):
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sgrLen is the length of the SGR sequence s starts with, 0 if it starts
// with none: ESC [ then digits, ';' or ':' only, then m.
func sgrLen(s string) int {
	if len(s) < 3 || s[0] != 0x1b || s[1] != '[' {
		return 0
	}
	for i := 2; i < len(s) && i < 128; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c == ';', c == ':':
		case c == 'm':
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// escLen is how much of s, which starts with ESC, an escape sequence takes:
// CSI to its final byte, OSC/DCS/APC/PM/SOS to their terminator (BEL or
// ESC \), anything else the ESC and one byte.
func escLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']', 'P', '_', '^', 'X':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}
