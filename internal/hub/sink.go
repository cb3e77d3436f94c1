package hub

import "time"

// Sink is the connection a stream is written to. The hub knows no
// transport: package httpapi/sse adapts an HTTP response (Server-Sent
// Events), and a test can collect the bytes in memory. The hub formats
// each event's frame once, for every stream; a Sink only carries bytes.
type Sink interface {
	// Open starts the stream (an HTTP response sends its status and
	// headers); it is called once, before the first Write.
	Open() error
	Write(p []byte) (int, error)
	// Flush pushes what was written to the client.
	Flush() error
	// SetWriteDeadline bounds the writes and the flush that follow; a
	// sink that cannot bound them returns nil and relies on its
	// transport's own timeouts.
	SetWriteDeadline(t time.Time) error
}
