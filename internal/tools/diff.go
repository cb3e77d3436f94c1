package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff/lcs"
)

const (
	// diffContext is the unchanged lines shown around each change.
	diffContext = 3
	// diffMaxJSON bounds a diff by the size it takes in a permission
	// request's event, whose data may hold 1 MiB: the rest of the request
	// (summary, path, ids) gets the remaining 64 KiB.
	diffMaxJSON = 1<<20 - 64<<10
)

// unifiedDiff renders a unified diff of before and after, every hunk kept,
// each with diffContext lines of context, so that the person approving a
// change sees every line it changes. The one limit is the size of the event
// that carries the diff; a diff over it is cut at a line, saying so.
func unifiedDiff(name, before, after string) string {
	if before == after {
		return "(no changes)"
	}
	from := "a/" + name
	if before == "" {
		from = "/dev/null"
	}
	a, b := splitAfterLines(before), splitAfterLines(after)
	budget := diffBudget * (len(a) + len(b) + 1)
	d := renderHunks(from, "b/"+name, a, b, lineDiffs(a, b, 0, 0, &budget))
	return capDiff(strings.ToValidUTF8(strings.TrimSuffix(d, "\n"), "\uFFFD"))
}

// diffBudget bounds the work of lineDiffs to this many passes over the
// input's lines.
const diffBudget = 32

// lineDiffs diffs the lines a and b (at offsets ao and bo of the whole) with
// go-udiff's LCS (gopls's diff). That LCS bounds its search, so past some
// fifty differences it reports what remains as one block of removed and
// added lines, which hides nothing but shows unchanged lines as changed: such
// blocks are diffed again, each time with a fresh search, until they no
// longer shrink or the budget of work is spent.
func lineDiffs(a, b []string, ao, bo int, budget *int) []lcs.Diff {
	*budget -= len(a) + len(b)
	ds := lcs.DiffLines(a, b)
	out := make([]lcs.Diff, 0, len(ds))
	for _, d := range ds {
		whole := d.Start == 0 && d.End == len(a) && d.ReplStart == 0 && d.ReplEnd == len(b)
		if d.End-d.Start > 1 && d.ReplEnd-d.ReplStart > 1 && !whole && *budget > 0 {
			out = append(out, lineDiffs(a[d.Start:d.End], b[d.ReplStart:d.ReplEnd], ao+d.Start, bo+d.ReplStart, budget)...)
			continue
		}
		out = append(out, lcs.Diff{Start: ao + d.Start, End: ao + d.End, ReplStart: bo + d.ReplStart, ReplEnd: bo + d.ReplEnd})
	}
	return out
}

// renderHunks writes the unified diff of the line diffs ds (in order): a
// hunk per group of changes less than 2*diffContext lines apart, with
// diffContext lines of context around it.
func renderHunks(from, to string, a, b []string, ds []lcs.Diff) string {
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", from, to)
	for i := 0; i < len(ds); {
		// The hunk takes ds[i:j].
		j := i + 1
		for j < len(ds) && ds[j].Start-ds[j-1].End <= 2*diffContext {
			j++
		}
		aFrom := max(0, ds[i].Start-diffContext)
		aTo := min(len(a), ds[j-1].End+diffContext)
		bFrom := ds[i].ReplStart - (ds[i].Start - aFrom)
		bTo := ds[j-1].ReplEnd + (aTo - ds[j-1].End)
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aFrom, aTo-aFrom), hunkRange(bFrom, bTo-bFrom))
		at := aFrom
		for _, d := range ds[i:j] {
			writeLines(&out, " ", a[at:d.Start])
			writeLines(&out, "-", a[d.Start:d.End])
			writeLines(&out, "+", b[d.ReplStart:d.ReplEnd])
			at = d.End
		}
		writeLines(&out, " ", a[at:aTo])
		i = j
	}
	return out.String()
}

// writeLines writes lines (each with its newline, except maybe the file's
// last) with a prefix, marking a missing final newline as diff does.
func writeLines(out *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		out.WriteString(prefix)
		out.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats a hunk's "start,count" as diff does: the count is left
// out when it is 1, and an empty range starts at the line before it.
func hunkRange(from, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", from)
	case 1:
		return fmt.Sprint(from + 1)
	}
	return fmt.Sprintf("%d,%d", from+1, n)
}

// splitAfterLines splits s into lines that keep their newlines.
func splitAfterLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// fragmentDiff is unifiedDiff of two pieces of text rather than files (the
// old_string and new_string of an edit that cannot be applied): a missing
// final newline says nothing about a fragment, so it is not reported.
func fragmentDiff(name, before, after string) string {
	if !strings.HasSuffix(before, "\n") && !strings.HasSuffix(after, "\n") {
		before, after = before+"\n", after+"\n"
	}
	return unifiedDiff(name, before, after)
}

// capDiff cuts d at the last line that keeps its JSON encoding within
// diffMaxJSON and says how much is not shown.
func capDiff(d string) string {
	if len(d) <= diffMaxJSON/6 || jsonLen(d) <= diffMaxJSON {
		return d
	}
	used, cut := 0, 0
	for cut < len(d) {
		end := strings.IndexByte(d[cut:], '\n')
		if end < 0 {
			end = len(d)
		} else {
			end += cut + 1
		}
		n := jsonLen(d[cut:end])
		if used+n > diffMaxJSON-256 {
			break
		}
		used += n
		cut = end
	}
	rest := d[cut:]
	return fmt.Sprintf("%s… [diff cut: %d more lines (%d bytes) not shown; the change is too large for one permission request]",
		d[:cut], strings.Count(rest, "\n")+1, len(rest))
}

// jsonLen is the length of s encoded as a JSON string body by encoding/json,
// which escapes quotes, backslashes, control characters, and (for HTML
// safety) <, > and & and U+2028/U+2029.
func jsonLen(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
			n += 2
		case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}
