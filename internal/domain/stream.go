package domain

import (
	"context"
	"time"
)

// Streams opens a workspace's event stream (section 6).
type Streams interface {
	// Subscribe checks req and returns the stream to serve; nothing is
	// claimed until the stream is served. The errors are the contract's
	// (an unknown workspace or session, a bad client id).
	Subscribe(ctx context.Context, workspaceID string, req StreamRequest) (Stream, error)
}

// StreamRequest is what a client asks of a stream.
type StreamRequest struct {
	ClientID string
	// SessionID, when set, joins the client to the session.
	SessionID string
	// LastEventID is where a resumed stream goes on from, when Resume.
	LastEventID int64
	Resume      bool
	// Name is the person the client acts for, as client.attached and the
	// workspace's attached list name it (section 9).
	Name string
}

// Stream is one client's stream of a workspace.
type Stream interface {
	// Serve claims the workspace for the stream's life and writes its
	// events to sink until ctx ends or the stream is evicted or
	// disconnected. A claim refused is returned before anything is
	// written. An idle stream waits in Serve for as long as its client
	// stays, so an implementation keeps the frames under that wait small.
	Serve(ctx context.Context, sink Sink) error
}

// Sink is where a stream writes: the transport's connection.
type Sink interface {
	// Open starts the stream (an HTTP response sends its status and
	// headers); it is called once, before the first Write.
	Open() error
	Write(p []byte) (int, error)
	// Flush pushes what was written to the client.
	Flush() error
	// SetWriteDeadline bounds the writes and the flush that follow; a
	// sink that cannot bound them returns nil.
	SetWriteDeadline(t time.Time) error
}
