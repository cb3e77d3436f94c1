package copilot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A file attachment is named with its line count, as the CLI does: a last
// line without a newline counts, an empty or missing file has none.
func TestCountLines(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body string
		want int
	}{
		{"", 0}, {"a", 1}, {"a\n", 1}, {"a\nb", 2}, {"a\nb\n", 2}, {strings.Repeat("x\n", 50000) + "y", 50001},
	} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := countLines(p); got != tc.want {
			t.Errorf("countLines of %d bytes = %d, want %d", len(tc.body), got, tc.want)
		}
	}
	if got := countLines(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("countLines of a missing file = %d, want 0", got)
	}
}

// Counting a large file costs a buffer, not the file.
func BenchmarkCountLines(b *testing.B) {
	p := filepath.Join(b.TempDir(), "big")
	if err := os.WriteFile(p, []byte(strings.Repeat("a line of text\n", 1<<20)), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		countLines(p)
	}
}
