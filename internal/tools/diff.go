package tools

import (
	"fmt"
	"strings"
)

const (
	diffContext = 3
	// diffMaxLines and diffMaxLine keep a permission prompt readable; the
	// human needs the gist of a change, not a megabyte of it.
	diffMaxLines = 200
	diffMaxLine  = 500
)

// unifiedDiff renders a single-hunk, unified-style diff of before and after:
// everything between the common leading and trailing lines is shown as
// removed and added. That is coarser than a real diff for scattered changes
// but exact for the one-region changes edit makes, and needs no LCS.
func unifiedDiff(name, before, after string) string {
	if before == after {
		return "(no changes)"
	}
	a, b := splitLines(before), splitLines(after)
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	aEnd, bEnd := len(a)-s, len(b)-s
	from := max(0, p-diffContext)
	toA := min(len(a), aEnd+diffContext)
	toB := min(len(b), bEnd+diffContext)

	var out strings.Builder
	if before == "" {
		fmt.Fprintf(&out, "--- /dev/null\n+++ b/%s\n", name)
	} else {
		fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n", name, name)
	}
	fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(from, toA-from), hunkRange(from, toB-from))
	lines := 0
	emit := func(prefix string, ls []string) bool {
		for _, l := range ls {
			if lines >= diffMaxLines {
				return false
			}
			if len(l) > diffMaxLine {
				l = truncateUTF8(l, diffMaxLine) + " … [line truncated]"
			}
			out.WriteString(prefix + l + "\n")
			lines++
		}
		return true
	}
	total := (p - from) + (aEnd - p) + (bEnd - p) + (toA - aEnd)
	if emit(" ", a[from:p]) && emit("-", a[p:aEnd]) && emit("+", b[p:bEnd]) && emit(" ", a[aEnd:toA]) {
		return strings.ToValidUTF8(strings.TrimSuffix(out.String(), "\n"), "\uFFFD")
	}
	fmt.Fprintf(&out, "… [diff truncated: %d more lines]", total-lines)
	return strings.ToValidUTF8(out.String(), "\uFFFD")
}

// hunkRange formats "start,count" as diff does: an empty range starts at the
// line before it.
func hunkRange(from, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", from)
	}
	return fmt.Sprintf("%d,%d", from+1, n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
