// Package benchkit holds what the benchmark commands (e2e/hubbench,
// e2e/loadbench) and the e2e benchmarks share: a latency histogram, a raw
// SSE subscriber, and what the host tells about its CPUs.
package benchkit

import (
	"fmt"
	"math/bits"
	"time"
)

// Hist is a log-linear histogram of nanosecond durations: 16 buckets per
// power of two, so a quantile is off by at most 1/16 (6%). Recording is an
// array increment, cheap enough for the readers' hot loop.
type Hist [64 * 16]uint32

func bucketOf(v int64) int {
	if v < 16 {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - 5 // keep the top 5 bits: 1xxxx
	return (shift+1)*16 + int(uint64(v)>>shift) - 16
}

// mid is a representative value of bucket i.
func mid(i int) int64 {
	if i < 16 {
		return int64(i)
	}
	shift := i/16 - 1
	lo := int64(16+i%16) << shift
	return lo + (int64(1)<<shift)/2
}

// Add records one duration.
func (h *Hist) Add(v int64) { h[bucketOf(v)]++ }

// Merge adds o's counts to h.
func (h *Hist) Merge(o *Hist) {
	for i, n := range o {
		h[i] += n
	}
}

// Count is the number of durations recorded.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	return n
}

// Quantile is the q-quantile (0 to 1) of the durations, in ns.
func (h *Hist) Quantile(q float64) int64 {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen > rank {
			return mid(i)
		}
	}
	return h.Max()
}

// Max is the largest duration recorded, in ns.
func (h *Hist) Max() int64 {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] > 0 {
			return mid(i)
		}
	}
	return 0
}

// Dur formats ns for a table: µs under a millisecond, ms under a second.
func Dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
