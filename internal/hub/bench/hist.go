package main

import "math/bits"

// hist is a log-linear histogram of nanosecond durations: 16 buckets per
// power of two, so a quantile is off by at most 1/16 (6%). Recording is an
// array increment, cheap enough for the readers' hot loop.
type hist [64 * 16]uint32

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

func (h *hist) add(v int64) { h[bucketOf(v)]++ }

func (h *hist) merge(o *hist) {
	for i, n := range o {
		h[i] += n
	}
}

func (h *hist) count() uint64 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	return n
}

func (h *hist) quantile(q float64) int64 {
	total := h.count()
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
	return h.max()
}

func (h *hist) max() int64 {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i] > 0 {
			return mid(i)
		}
	}
	return 0
}
