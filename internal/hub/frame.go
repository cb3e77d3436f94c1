package hub

import (
	"bytes"
	"encoding/json"
	"strconv"
)

const (
	pingFrame = ": ping\n\n"

	// initialBuf is the first size of a pooled write buffer; chunkBytes is
	// how much a writer gathers before handing it to the connection, so a
	// 1 MiB backlog goes out as a few large writes instead of one 1 MiB
	// buffer per stream; maxPooledBuf is the biggest buffer put back in the
	// pool.
	initialBuf   = 4 << 10
	chunkBytes   = 64 << 10
	maxPooledBuf = 128 << 10
)

// appendFrame appends the SSE frame of one event. Publish formats a frame
// once and shares it between every stream and the ring.
func appendFrame(b []byte, seq int64, typ string, data []byte) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, typ...)
	b = append(b, '\n')
	b = appendData(b, data)
	return append(b, '\n')
}

// appendControl appends a frame without id: (stream.opened/reset/evicted).
func appendControl(b []byte, typ string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		// The control payloads are fixed structs of strings and ints.
		panic("hub: encode " + typ + ": " + err.Error())
	}
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, '\n')
	b = appendData(b, data)
	return append(b, '\n')
}

// appendData writes data as "data:" lines. Envelopes are single-line JSON,
// but a stray newline would otherwise end the frame early and let the rest
// be parsed as fields, so it is split per the SSE rules instead.
func appendData(b, data []byte) []byte {
	if !bytes.ContainsAny(data, "\r\n") {
		b = append(b, "data: "...)
		b = append(b, data...)
		return append(b, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n')
}

func frameLen(typ string, data []byte) int {
	// "id: " + 19 digits + "\nevent: " + typ + "\ndata: " + data + "\n\n"
	return 4 + 19 + 8 + len(typ) + 7 + len(data) + 2
}
