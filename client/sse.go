package client

import (
	"bufio"
	"io"
	"strings"
)

// sseFrame is one dispatched Server-Sent Events frame.
type sseFrame struct {
	id    string
	hasID bool
	event string
	data  string
}

// sseReader parses the text/event-stream format. It is written here rather
// than taken from a library because the format is small and the stream's
// guarantees (no gap, no duplicate) depend on knowing exactly when a frame
// is complete: a frame cut by a dropped connection must never be dispatched.
type sseReader struct {
	r *bufio.Reader
	// onLine is called for every line read, comments included, so a
	// watchdog can tell a quiet stream (heartbeats arrive) from a dead one.
	onLine func()
}

func newSSEReader(r io.Reader, onLine func()) *sseReader {
	if onLine == nil {
		onLine = func() {}
	}
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10), onLine: onLine}
}

// next returns the next complete frame. Comments (heartbeats) and frames
// without data are skipped, as the SSE spec says; a frame cut off by the end
// of the body is dropped and the read error returned.
func (p *sseReader) next() (sseFrame, error) {
	var f sseFrame
	var data strings.Builder
	hasData := false
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			// A line without its newline is incomplete, and so is its frame.
			return sseFrame{}, err
		}
		p.onLine()
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if hasData {
				f.data = data.String()
				return f, nil
			}
			f = sseFrame{}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.ContainsRune(value, 0) {
				f.id, f.hasID = value, true
			}
		case "event":
			f.event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
}
