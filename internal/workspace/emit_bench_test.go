package workspace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// discardSink is a stream's connection that keeps nothing but counts the
// frames written, so the benchmark can wait for the last one.
type discardSink struct{ writes atomic.Int64 }

func (s *discardSink) Open() error                      { return nil }
func (s *discardSink) Flush() error                     { return nil }
func (s *discardSink) SetWriteDeadline(time.Time) error { return nil }
func (s *discardSink) Write(p []byte) (int, error) {
	s.writes.Add(1)
	return len(p), nil
}

// BenchmarkEmitDelta is the hot path of a run: an ephemeral event (a
// message delta) numbered, published through the workspace's bus and
// queued on a watching stream. An op is one Emit, which returns once the
// event is published.
func BenchmarkEmitDelta(b *testing.B) {
	ctx := context.Background()
	ws, _ := openWorkspace(b, nil)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	sink := &discardSink{}
	go func() {
		defer close(done)
		_ = ws.Stream(sctx, sink, &StreamOptions{ClientID: "bench"})
	}()
	defer func() { cancel(); <-done }()
	for !ws.Watched() {
		time.Sleep(time.Millisecond)
	}
	d := Draft{Type: proto.EventMessageDelta, SessionID: "s", Data: proto.MessageDelta{Kind: "text", Text: "hello, world"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ws.Emit(ctx, d); err != nil {
			b.Fatal(err)
		}
	}
	require.True(b, ws.Watched(), "the stream kept up")
}
