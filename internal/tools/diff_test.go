package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// numbered is a file of lines "line 1" to "line n", with the lines in changed
// upper-cased.
func numbered(n int, changed ...int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		l := fmt.Sprintf("line %d", i)
		for _, c := range changed {
			if c == i {
				l = strings.ToUpper(l)
			}
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// TestPermissionDiffShowsEveryHunk is defect 13: changing lines 3 and 28 of
// a 30-line file showed one block of 26 removed and 26 added lines. The
// diff has one hunk per change, each with three lines of context.
func TestPermissionDiffShowsEveryHunk(t *testing.T) {
	env := newEnv(t)
	writeFile(t, env, "f.txt", numbered(30))
	_, d := toolByName(t, "write").Summary(env, mustJSON(t, map[string]any{"path": "f.txt", "content": numbered(30, 3, 28)}))
	require.Equal(t, `--- a/f.txt
+++ b/f.txt
@@ -1,6 +1,6 @@
 line 1
 line 2
-line 3
+LINE 3
 line 4
 line 5
 line 6
@@ -25,6 +25,6 @@
 line 25
 line 26
 line 27
-line 28
+LINE 28
 line 29
 line 30`, d["diff"])

	// The same for edit, whose change is one region of a longer file.
	writeFile(t, env, "g.txt", numbered(100))
	_, d = toolByName(t, "edit").Summary(env, mustJSON(t, map[string]any{"path": "g.txt", "old_string": "line 50\nline 51\n", "new_string": "fifty\n"}))
	require.Equal(t, "--- a/g.txt\n+++ b/g.txt\n@@ -47,8 +47,7 @@\n line 47\n line 48\n line 49\n-line 50\n-line 51\n+fifty\n line 52\n line 53\n line 54", d["diff"])
}

// TestPermissionDiffKeepsEveryHunkOfALargeChange: many scattered changes are
// all shown (no line count limit); only the event size bounds the diff,
// and a cut says so.
func TestPermissionDiffKeepsEveryHunkOfALargeChange(t *testing.T) {
	var changed []int
	for i := 5; i < 5000; i += 50 {
		changed = append(changed, i)
	}
	d := unifiedDiff("f", numbered(5000), numbered(5000, changed...))
	require.Equal(t, len(changed), strings.Count(d, "\n@@ "))
	for _, c := range changed {
		require.Contains(t, d, fmt.Sprintf("\n+LINE %d\n", c))
	}
	require.NotContains(t, d, "diff cut")

	// A diff larger than an event can carry is cut at a line, saying so,
	// and fits in the event's data once encoded.
	before := strings.Repeat("<old line & more>\n", 100_000)
	after := strings.Repeat("<new line & more>\n", 100_000)
	d = unifiedDiff("big", before, after)
	require.Contains(t, d, "[diff cut: ")
	raw, err := json.Marshal(map[string]any{"diff": d})
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), diffMaxJSON+100)
	require.Greater(t, len(raw), diffMaxJSON-1024, "the cut keeps what fits")
	lines := strings.Split(d, "\n")
	require.Equal(t, "-<old line & more>", lines[4])
	require.True(t, strings.HasPrefix(lines[len(lines)-1], "… [diff cut: "), lines[len(lines)-1])
}

func TestJSONLen(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t cr\r", "<a href='x'>&</a>", "\x00\x1f", "é€😀", "\u2028\u2029"} {
		raw, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, len(raw)-2, jsonLen(s), "%q", s)
	}
}
