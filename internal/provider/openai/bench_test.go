package openai_test

import (
	"context"
	"testing"

	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/providertest"
)

// BenchmarkStream streams a 20-delta answer, with and without the usage
// chunk stream_options.include_usage adds: what reading usage costs a
// model step on the client side.
func BenchmarkStream(b *testing.B) {
	chunks := []string{withNullUsage(chunk(`{"role":"assistant","content":""}`, ""))}
	for range 20 {
		chunks = append(chunks, withNullUsage(chunk(`{"content":"word "}`, "")))
	}
	chunks = append(chunks, withNullUsage(chunk(`{}`, "stop")))
	for _, withUsage := range []bool{false, true} {
		name := "no-usage"
		cs := chunks
		if withUsage {
			name = "usage"
			cs = append(append([]string(nil), chunks...), usageChunk)
		}
		b.Run(name, func(b *testing.B) {
			srv := providertest.New(b, sse(cs...))
			p := newProvider(b, provider.Config{Type: "openai", BaseURL: srv.URL})
			req := provider.Request{Model: "m", Messages: []provider.Message{{Role: "user", Text: "hi"}}}
			for b.Loop() {
				if _, err := p.Stream(context.Background(), req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
