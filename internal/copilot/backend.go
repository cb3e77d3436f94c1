package copilot

import "github.com/tandem-dev/tandem/internal/bridge"

// ErrNotFound is bridge.ErrNotFound: the workspace, session or request a
// Backend was asked about does not exist.
var ErrNotFound = bridge.ErrNotFound

// ErrToolConflict is bridge.ErrToolConflict: a client tool's name is
// already offered by another client of the session.
var ErrToolConflict = bridge.ErrToolConflict

// Backend is what the bridge needs of Tandem for one connection: the
// layer it shares with every protocol bridge (package bridge).
type Backend = bridge.Backend

// Stream is a live subscription to a session's events.
type Stream = bridge.Stream
