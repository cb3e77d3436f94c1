package natsbus

import (
	"encoding/binary"
	"errors"

	"github.com/tandem-dev/tandem/internal/bus"
)

// A frame is one message on a workspace's event subject:
//
//	event:  0x01, flags (bit 0: kept), uvarint seq, uvarint prev,
//	        8 bytes origin, uvarint len + type, uvarint len + session id,
//	        then the envelope to the end
//	beacon: 0x02, uvarint seq (the publisher's last seq)
//
// prev is the seq of the frame its publisher put on the bus before this
// one (the head it took over at, for its first): a receiver whose last
// seq is below it missed events the stream no longer had or never got.
// origin names the node's bus, so a node skips the events it already
// delivered in process.
//
// Binary rather than JSON: the envelope is already JSON and goes through
// untouched; decoding copies the type and session id, and the event's Data
// shares the message nats.go allocated for us.
const (
	kindEvent  = 0x01
	kindBeacon = 0x02
	flagKept   = 0x01
)

type frame struct {
	beacon bool
	event  bus.Event // for a beacon, only Seq
	prev   int64
	origin uint64
}

// frameSize is an upper bound of e's frame's length.
func frameSize(e bus.Event) int {
	return 2 + 3*binary.MaxVarintLen64 + 8 + binary.MaxVarintLen64 + len(e.Type) + len(e.SessionID) + len(e.Data)
}

func appendEvent(b []byte, e bus.Event, prev int64, origin uint64) []byte {
	var flags byte
	if e.Kept {
		flags |= flagKept
	}
	b = append(b, kindEvent, flags)
	b = binary.AppendUvarint(b, uint64(e.Seq))
	b = binary.AppendUvarint(b, uint64(prev))
	b = binary.BigEndian.AppendUint64(b, origin)
	b = binary.AppendUvarint(b, uint64(len(e.Type)))
	b = append(b, e.Type...)
	b = binary.AppendUvarint(b, uint64(len(e.SessionID)))
	b = append(b, e.SessionID...)
	return append(b, e.Data...)
}

func appendBeacon(b []byte, seq int64) []byte {
	return binary.AppendUvarint(append(b, kindBeacon), uint64(seq))
}

var errMalformed = errors.New("malformed frame")

// maxSeq keeps decoded seqs positive int64s.
const maxSeq = 1<<63 - 1

// decode reads a frame; the event's Data shares b.
func decode(b []byte) (frame, error) {
	if len(b) == 0 {
		return frame{}, errMalformed
	}
	kind, b := b[0], b[1:]
	switch kind {
	case kindBeacon:
		seq, n := binary.Uvarint(b)
		if n <= 0 || n != len(b) || seq > maxSeq {
			return frame{}, errMalformed
		}
		return frame{beacon: true, event: bus.Event{Seq: int64(seq)}}, nil
	case kindEvent:
		if len(b) == 0 {
			return frame{}, errMalformed
		}
		flags, b := b[0], b[1:]
		seq, n := binary.Uvarint(b)
		if n <= 0 || seq == 0 || seq > maxSeq {
			return frame{}, errMalformed
		}
		b = b[n:]
		prev, n := binary.Uvarint(b)
		if n <= 0 || prev >= seq {
			return frame{}, errMalformed
		}
		b = b[n:]
		if len(b) < 8 {
			return frame{}, errMalformed
		}
		origin := binary.BigEndian.Uint64(b)
		b = b[8:]
		typ, b, ok := field(b)
		if !ok {
			return frame{}, errMalformed
		}
		session, b, ok := field(b)
		if !ok {
			return frame{}, errMalformed
		}
		return frame{
			event: bus.Event{Seq: int64(seq), Type: typ, SessionID: session, Kept: flags&flagKept != 0, Data: b},
			prev:  int64(prev), origin: origin,
		}, nil
	}
	return frame{}, errMalformed
}

// field reads a length-prefixed string.
func field(b []byte) (string, []byte, bool) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return "", nil, false
	}
	b = b[n:]
	return string(b[:l]), b[l:], true
}
