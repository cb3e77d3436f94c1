package client

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSSEReader(t *testing.T) {
	in := ": ping\n\n" +
		"id: 1\nevent: a\ndata: {\"x\":1}\n\n" +
		"event: stream.opened\r\ndata:{}\r\n\r\n" + // CRLF, no space after the colon
		"id: 2\nevent: b\ndata: line one\ndata: line two\n\n" + // multi-line data
		"id: 3\nevent: nodata\n\n" + // no data: not dispatched
		"retry: 10\nunknown\ndata:  two spaces\n\n" + // unknown fields ignored, one space stripped
		"id: 4\nevent: cut\ndata: {}\n" // no blank line: cut off
	lines := 0
	rd := newSSEReader(strings.NewReader(in), func() { lines++ })
	var got []sseFrame
	for {
		f, err := rd.next()
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		got = append(got, f)
	}
	assert.Equal(t, []sseFrame{
		{id: "1", hasID: true, event: "a", data: `{"x":1}`},
		{event: "stream.opened", data: "{}"},
		{id: "2", hasID: true, event: "b", data: "line one\nline two"},
		{data: " two spaces"},
	}, got)
	assert.Equal(t, strings.Count(in, "\n"), lines, "every line counts as life for the watchdog")
}
