package natsbus

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/internal/bus"
	"github.com/tandem-dev/tandem/internal/bus/natsbus/natstest"
)

// benchNodes dials a publishing and a subscribing node on a NATS server in
// this process, and subscribes fn to workspace "w" on the second.
func benchNodes(b *testing.B, fn func(bus.Event)) bus.Publisher {
	s := natstest.Start(b)
	pubNode, err := Dial(Config{URL: s.ClientURL(), Name: "a"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pubNode.Close)
	subNode, err := Dial(Config{URL: s.ClientURL(), Name: "b"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(subNode.Close)
	cancel, err := subNode.Subscribe("w", fn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cancel)
	p, err := pubNode.Publisher("w", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	return p
}

// BenchmarkDelivery measures the sustained rate of events from a
// publisher on one node to a subscriber on another, with at most 1,024 in
// flight: the bus drops what its pending window cannot hold rather than
// make Publish wait, so an unpaced burst measures the drops.
func BenchmarkDelivery(b *testing.B) {
	const window = 1024
	var got atomic.Int64
	arrived := make(chan struct{}, 1)
	p := benchNodes(b, func(bus.Event) {
		got.Add(1)
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	data := make([]byte, 200)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		for int64(i)-got.Load() >= window {
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				b.Fatalf("delivered %d of %d", got.Load(), i)
			}
		}
		p.Publish(bus.Event{Seq: int64(i + 1), Type: "message.delta", SessionID: "s", Data: data})
	}
	for got.Load() < int64(b.N) {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			b.Fatalf("delivered %d of %d", got.Load(), b.N)
		}
	}
}

// BenchmarkLatency measures one event at a time from a publisher on one
// node to a subscriber on another: p50 and p99 of publish to arrival.
func BenchmarkLatency(b *testing.B) {
	arrived := make(chan time.Time, 1)
	p := benchNodes(b, func(bus.Event) { arrived <- time.Now() })
	data := make([]byte, 200)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		p.Publish(bus.Event{Seq: int64(i + 1), Type: "message.delta", SessionID: "s", Data: data})
		select {
		case at := <-arrived:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			b.Fatalf("event %d did not arrive", i+1)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50_us")
	b.ReportMetric(at(0.99), "p99_us")
}
