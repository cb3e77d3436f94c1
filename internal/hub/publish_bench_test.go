package hub

import (
	"github.com/tandem-dev/tandem/internal/event"

	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/internal/httpapi/sse"
)

// countWriter is an in-memory ResponseWriter that only remembers the last id
// written, so the benchmark can wait for every delivery.
type countWriter struct {
	hdr  http.Header
	last atomic.Int64
}

func (c *countWriter) Header() http.Header { return c.hdr }
func (c *countWriter) WriteHeader(int)     {}
func (c *countWriter) Flush()              {}
func (c *countWriter) Write(p []byte) (int, error) {
	if i := bytes.LastIndex(p, []byte("id: ")); i >= 0 {
		rest := p[i+4:]
		if j := bytes.IndexByte(rest, '\n'); j > 0 {
			if n, err := strconv.ParseInt(string(rest[:j]), 10, 64); err == nil {
				c.last.Store(n)
			}
		}
	}
	return len(p), nil
}

// BenchmarkPublish publishes ~200-byte events to 1000 in-memory streams. An
// op is one Publish plus its 1000 deliveries: the timer stops only when
// every stream's writer has written the last event.
func BenchmarkPublish(b *testing.B) {
	const subs = 1000
	// A queue that cannot overflow: the benchmark measures fan-out, not
	// eviction of writers that the publisher outruns on a small machine.
	hub := New(Config{QueueBytes: 256 << 20, Logger: quietLogger()})
	defer hub.Close()
	tp := hub.Topic("bench", 0, nil)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: ends every Serve
	writers := make([]*countWriter, subs)
	for i := range writers {
		w := &countWriter{hdr: http.Header{}}
		writers[i] = w
		wg.Go(func() { _ = tp.Serve(ctx, sse.NewWriter(w), &ServeOptions{ClientID: "bench", WorkspaceID: "bench"}) })
	}
	for tp.subscribers() < subs {
		time.Sleep(time.Millisecond)
	}
	data := []byte(`{"seq":0,"type":"message.delta","workspace_id":"7f9c2f1e-4a57-4f34-9d2b-8a8e6b0c1d2e","data":{"kind":"text","text":"` +
		strings.Repeat("x", 80) + `"}}`)

	b.ReportAllocs()
	b.SetBytes(int64(len(data)) * subs)
	b.ResetTimer()
	for i := range b.N {
		tp.Publish(event.Event{Seq: int64(i + 1), Type: "message.delta", Data: data})
	}
	for _, w := range writers {
		for w.last.Load() < int64(b.N) {
			if tp.subscribers() < subs {
				b.Fatal("a stream was evicted")
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*subs), "ns/delivery")
}
