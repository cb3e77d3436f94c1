package copilot

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReaderReadsFramesInOrder(t *testing.T) {
	var in []byte
	in = appendFrame(in, []byte(`{"a":1}`))
	in = append(in, "Content-Type: application/json\r\n"...)
	in = appendFrame(in, []byte(`{"b":2}`))
	in = append(in, "content-length: 2\n\n{}"...) // LF only, any case
	fr := newFrameReader(bytes.NewReader(in), 0)
	for _, want := range []string{`{"a":1}`, `{"b":2}`, `{}`} {
		got, err := fr.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if string(got) != want {
			t.Fatalf("Read = %q, want %q", got, want)
		}
	}
	if _, err := fr.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("Read at the end = %v, want io.EOF", err)
	}
}

func TestFrameReaderRejectsBadFrames(t *testing.T) {
	for name, in := range map[string]string{
		"no length":       "X-Other: 1\r\n\r\n{}",
		"negative length": "Content-Length: -1\r\n\r\n",
		"junk length":     "Content-Length: ten\r\n\r\n",
		"over the limit":  "Content-Length: 1025\r\n\r\n",
		"huge header":     strings.Repeat("a", 5000) + "\r\n\r\n",
		"many headers":    strings.Repeat("X: y\r\n", 100) + "\r\n",
		"no colon":        "hello\r\n\r\n",
		"cut body":        "Content-Length: 10\r\n\r\n{}",
		"cut header":      "Content-Length: 10",
	} {
		t.Run(name, func(t *testing.T) {
			fr := newFrameReader(strings.NewReader(in), 1024)
			_, err := fr.Read()
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("Read(%q) = %v, want ErrFrame", in, err)
			}
		})
	}
}

// FuzzFrameReader checks that no input makes the reader panic, return a
// body over its limit, or return more bytes than it was given.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 99999999999999999999\r\n\r\n"))
	f.Add([]byte("Content-Length: 3\r\nContent-Length: 1\r\n\r\nabc"))
	f.Add([]byte("\r\n\r\nContent-Length: 0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 4096
		fr := newFrameReader(bytes.NewReader(in), limit)
		total := 0
		for range 100 {
			body, err := fr.Read()
			if err != nil {
				return
			}
			if len(body) > limit {
				t.Fatalf("body of %d bytes over the limit", len(body))
			}
			total += len(body)
			if total > len(in) {
				t.Fatalf("read %d body bytes from %d input bytes", total, len(in))
			}
		}
	})
}
