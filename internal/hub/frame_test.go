package hub

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendFrame(t *testing.T) {
	require.Equal(t, "id: 7\nevent: run.started\ndata: {\"a\":1}\n\n",
		string(appendFrame(nil, 7, "run.started", []byte(`{"a":1}`))))
	// A stray line break must not end the frame early.
	require.Equal(t, "id: 8\nevent: x\ndata: a\ndata: b\ndata: c\ndata: \n\n",
		string(appendFrame(nil, 8, "x", []byte("a\nb\r\nc\r"))))
	require.Equal(t, "event: stream.reset\ndata: {\"head_seq\":3}\n\n",
		string(appendControl(nil, "stream.reset", map[string]int{"head_seq": 3})))
}

func TestRing(t *testing.T) {
	r := newRing(4, 100, 10)
	all := newSubscriber("")
	require.True(t, r.covers(10))
	require.False(t, r.covers(9))
	for seq := int64(11); seq <= 14; seq++ {
		r.push(ringEntry{seq: seq, frame: make([]byte, 10)})
	}
	require.True(t, r.covers(10), "nothing dropped yet")
	r.push(ringEntry{seq: 16, frame: make([]byte, 10)})
	require.False(t, r.covers(10))
	require.True(t, r.covers(11), "11 was dropped; everything after it is here")
	seqs := func(es []ringEntry) (out []int64) {
		for _, e := range es {
			out = append(out, e.seq)
		}
		return out
	}
	require.Equal(t, []int64{12, 13, 14, 16}, seqs(r.after(11, all)))
	require.Equal(t, []int64{14, 16}, seqs(r.after(13, all)))
	require.Empty(t, r.after(16, all))

	// The byte bound drops old entries too; one huge entry still fits alone.
	r.push(ringEntry{seq: 17, frame: make([]byte, 75)})
	require.Equal(t, []int64{14, 16, 17}, seqs(r.after(0, all)))
	require.True(t, r.covers(13))
	require.False(t, r.covers(12))
	r.push(ringEntry{seq: 18, frame: make([]byte, 500)})
	require.Equal(t, []int64{18}, seqs(r.after(0, all)))
	require.True(t, r.covers(17))

	// Session filter.
	r.push(ringEntry{seq: 19, session: "a", frame: []byte("x")})
	r.push(ringEntry{seq: 20, session: "b", frame: []byte("x")})
	require.Equal(t, []int64{19}, seqs(r.after(18, newSubscriber("a"))))
}
