// Package copilot serves the GitHub Copilot CLI's SDK protocol (JSON-RPC 2.0
// framed with Content-Length headers, protocol version 3) on top of Tandem's
// sessions: a Copilot session is a Tandem session, its external tools are
// Tandem client tools, its permission requests Tandem permission requests,
// and its events are translated from Tandem's event stream.
package copilot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits of a frame. A header line longer than maxHeaderLine, more than
// maxHeaders lines, or a body over the reader's limit is a protocol error.
const (
	maxHeaderLine = 1024
	maxHeaders    = 32
	// DefaultMaxFrame bounds a frame's body: attachments travel inline as
	// base64 blobs, so it is generous, but finite.
	DefaultMaxFrame = 32 << 20
)

// ErrFrame is wrapped by every framing error: the stream cannot be trusted
// after one, so the connection ends.
var ErrFrame = errors.New("copilot: bad frame")

// frameReader reads Content-Length framed bodies.
type frameReader struct {
	r   *bufio.Reader
	max int
	// limit, when set, lowers max for the frame whose headers were just
	// read: the bound may change between frames.
	limit func(max int) int
}

func newFrameReader(r io.Reader, max int) *frameReader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Read returns the next frame's body. io.EOF means the stream ended cleanly
// between frames.
func (f *frameReader) Read() ([]byte, error) {
	length := -1
	for n := 0; ; n++ {
		if n >= maxHeaders {
			return nil, fmt.Errorf("%w: more than %d header lines", ErrFrame, maxHeaders)
		}
		line, err := f.line()
		if err != nil {
			if errors.Is(err, io.EOF) && n == 0 && line == "" {
				return nil, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: stream ended in a header", ErrFrame)
			}
			return nil, err
		}
		if line == "" {
			if n == 0 {
				// Blank lines between frames are tolerated.
				n--
				continue
			}
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%w: header line without a colon", ErrFrame)
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			v, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%w: Content-Length %q", ErrFrame, strings.TrimSpace(value))
			}
			length = v
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("%w: no Content-Length", ErrFrame)
	}
	max := f.max
	if f.limit != nil {
		max = f.limit(max)
	}
	if length > max {
		return nil, fmt.Errorf("%w: body of %d bytes is over the limit of %d", ErrFrame, length, max)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(f.r, body); err != nil {
		return nil, fmt.Errorf("%w: body cut short: %v", ErrFrame, err)
	}
	return body, nil
}

// line reads one header line without its CRLF (or LF), bounded in length.
func (f *frameReader) line() (string, error) {
	var b []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxHeaderLine {
			return "", fmt.Errorf("%w: header line over %d bytes", ErrFrame, maxHeaderLine)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return strings.TrimRight(string(b), "\r\n"), err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// appendFrame appends body framed to dst.
func appendFrame(dst, body []byte) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(body)), 10)
	dst = append(dst, "\r\n\r\n"...)
	return append(dst, body...)
}
