package coordinator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSystemPromptsBuildOncePerKey(t *testing.T) {
	var p systemPrompts
	builds := 0
	build := func(s string) func() string { return func() string { builds++; return s } }
	assert.Equal(t, "a", p.get([]string{"cfg", "/w", "2026-11-22", "bash"}, build("a")))
	assert.Equal(t, "a", p.get([]string{"cfg", "/w", "2026-11-22", "bash"}, build("x")))
	assert.Equal(t, 1, builds)
	// Any part that differs is another prompt, also when parts only move.
	assert.Equal(t, "b", p.get([]string{"cfg", "/w", "2026-11-23", "bash"}, build("b")))
	assert.Equal(t, "c", p.get([]string{"cfg", "/w", "2026-11-22"}, build("c")))
	assert.Equal(t, "d", p.get([]string{"cfg", "/w2", "026-11-22", "bash"}, build("d")))
	assert.Equal(t, 4, builds)

	for i := range maxPrompts * 2 {
		p.get([]string{fmt.Sprint(i)}, build("n"))
	}
	assert.LessOrEqual(t, len(p.m), maxPrompts)
}
