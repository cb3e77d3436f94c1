package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numberedLines is "line 1" to "line n", with the lines in upper upper-cased.
func numberedLines(n int, upper ...int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		l := fmt.Sprintf("line %d", i)
		for _, u := range upper {
			if u == i {
				l = strings.ToUpper(l)
			}
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// TestRunShowsTheWholeDiffBeforeAsking is defect 13 at the terminal: a
// write that changes lines 3 and 28 of a 30-line file was shown as one
// 26-line block cut at 20 lines, so the question came with no added line.
// Now every changed line is on screen before "allow?".
func TestRunShowsTheWholeDiffBeforeAsking(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(numberedLines(30)), 0o644))
	content, err := json.Marshal(numberedLines(30, 3, 28))
	require.NoError(t, err)

	vars := map[string]string{"TANDEM_URL": srv.url, "TANDEM_TOKEN": srv.token, "HOME": t.TempDir()}
	var stdout, stderr syncBuffer
	env := &cliEnv{
		getenv:   func(k string) string { return vars[k] },
		stdin:    strings.NewReader("y\n"),
		stdout:   &stdout,
		stderr:   &stderr,
		stdinTTY: true,
		signals: func() (<-chan os.Signal, func()) {
			return make(chan os.Signal), func() {}
		},
		getwd: func() (string, error) { return dir, nil },
	}
	code := runCommand([]string{fmt.Sprintf(`/tool write {"path":"f.txt","content":%s}`, content)}, env)
	require.Equal(t, 0, code, stderr.String())

	out := stderr.String()
	asked := strings.Index(out, "allow?")
	require.GreaterOrEqual(t, asked, 0, out)
	shown := out[:asked]
	for _, l := range []string{"-line 3\n", "+LINE 3\n", "-line 28\n", "+LINE 28\n", "@@ -1,6 +1,6 @@", "@@ -25,6 +25,6 @@", " line 30\n"} {
		assert.Contains(t, shown, l, "shown before the question")
	}
	assert.Equal(t, numberedLines(30, 3, 28), readTestFile(t, filepath.Join(dir, "f.txt")))
}

// TestDetailLinesKeepEveryLine: a long diff is shown whole, with a summary
// next to the question.
func TestDetailLinesKeepEveryLine(t *testing.T) {
	var diff strings.Builder
	diff.WriteString("--- a/f\n+++ b/f\n@@ -1,100 +1,100 @@\n")
	for i := range 100 {
		fmt.Fprintf(&diff, "-old %d\n+new %d\n", i, i)
	}
	lines := detailLines(map[string]any{"path": "f", "diff": diff.String()})
	require.Len(t, lines, 3+200+1)
	assert.Equal(t, "+new 99", lines[len(lines)-2])
	assert.Equal(t, "(the diff above is 203 lines: 100 added, 100 removed; scroll up to read all of it)", lines[len(lines)-1])

	lines = detailLines(map[string]any{"diff": "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b"})
	assert.Equal(t, []string{"--- a/f", "+++ b/f", "@@ -1 +1 @@", "-a", "+b"}, lines)
}

func readTestFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}
