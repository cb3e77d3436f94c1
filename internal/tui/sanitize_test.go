package tui

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestSanitizeShowsControlsInsteadOfSendingThem(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"two\nlines", "two\nlines"},
		{"\x1b]0;PWNED\x07", "␛]0;PWNED␇"},
		{"\x1b[2J\x1b[H", "␛[2J␛[H"},
		{"\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "␛]8;;http://evil␛\\click␛]8;;␛\\"},
		{"bell\a", "bell␇"},
		{"cr\rover", "cr␍over"},
		{"tab\tx", "tab    x"},
		{"del\x7f", "del␡"},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Sanitize(c.in), "%q", c.in)
	}
	assert.Equal(t, "a␊b␍", SanitizeLine("a\nb\r"))
}

func TestKeepSGRDropsAllButStyling(t *testing.T) {
	in := "\x1b[1;38;5;200mbold\x1b[0m \x1b]0;title\x07\x1b[2J\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\a\r\x1bc end\n"
	assert.Equal(t, "\x1b[1;38;5;200mbold\x1b[0m link end\n", keepSGR(in))
}

// onlySGR reports whether every escape sequence in s is an SGR one, and s
// holds no other control character but newline: what a terminal may be
// sent.
func onlySGR(s string) bool {
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			n := sgrLen(s[i:])
			if n == 0 {
				return false
			}
			i += n
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f || bidiControl(r) {
			return false
		}
		i += size
	}
	return true
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "hello", "\x1b]0;PWNED\x07", "\x1b[2J", "\xff\xfe", "\u009b31m", "a\tb\r\n", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if !onlySGR(out) || strings.Contains(out, "\x1b") {
			t.Fatalf("Sanitize(%q) = %q lets a control through", s, out)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q is not UTF-8", s, out)
		}
		if Sanitize(out) != out {
			t.Fatalf("Sanitize is not idempotent on %q", s)
		}
		line := SanitizeLine(s)
		if strings.ContainsAny(line, "\n\r\x1b") {
			t.Fatalf("SanitizeLine(%q) = %q keeps a line break or ESC", s, line)
		}
		if !onlySGR(keepSGR(s)) {
			t.Fatalf("keepSGR(%q) = %q lets a control through", s, keepSGR(s))
		}
	})
}
