package coordinator

import (
	"fmt"
	"strings"
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

// TestSystemPromptsEvictAtTheirBounds fills the cache past its bounds in
// number and in bytes: it never holds more than either, and a prompt too
// large to share it is built every time.
func TestSystemPromptsEvictAtTheirBounds(t *testing.T) {
	var p systemPrompts
	check := func() {
		t.Helper()
		p.mu.Lock()
		defer p.mu.Unlock()
		sum := 0
		for k, v := range p.m {
			sum += len(k) + len(v)
		}
		assert.Equal(t, sum, p.bytes)
		assert.LessOrEqual(t, len(p.m), maxPrompts)
		assert.LessOrEqual(t, p.bytes, maxPromptBytes)
	}
	for i := range 3 * maxPrompts {
		p.get([]string{fmt.Sprint(i)}, func() string { return "small" })
		check()
	}
	big := strings.Repeat("x", maxPromptBytes/16)
	for i := range 64 {
		p.get([]string{fmt.Sprint("big", i)}, func() string { return big })
		check()
	}
	huge := strings.Repeat("y", maxPromptBytes/2)
	builds := 0
	for range 2 {
		p.get([]string{"huge"}, func() string { builds++; return huge })
		check()
	}
	assert.Equal(t, 2, builds)
}

// TestSweepForgetsPromptsUnusedSinceThePreviousSweep: a prompt no step
// asked for between two sweeps is forgotten; one asked for stays.
func TestSweepForgetsPromptsUnusedSinceThePreviousSweep(t *testing.T) {
	var p systemPrompts
	builds := 0
	build := func() string { builds++; return "prompt" }
	p.get([]string{"a"}, build)
	p.get([]string{"b"}, build)
	p.sweep()
	p.get([]string{"a"}, build)
	p.sweep()
	assert.Equal(t, 2, builds)
	assert.Len(t, p.m, 1)
	assert.Equal(t, len("a")+len("prompt"), p.bytes)
	p.get([]string{"a"}, build)
	assert.Equal(t, 2, builds, "a prompt asked for since the sweep before is kept")
	p.sweep()
	p.sweep()
	assert.Empty(t, p.m)
	assert.Zero(t, p.bytes)
}
