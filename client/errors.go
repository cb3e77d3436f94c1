package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/tandem-dev/tandem/proto"
)

// APIError is an error answer of the server. Code is one of the contract's
// snake_case codes (proto.Code*), or empty when the answer did not carry the
// contract's error body (a proxy's page, for instance).
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("tandem: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("tandem: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// IsCode reports whether err is, or wraps, an *APIError with that code. An
// empty code matches nothing, not the code-less errors of non-contract answers.
func IsCode(err error, code string) bool {
	var e *APIError
	return code != "" && errors.As(err, &e) && e.Code == code
}

// IsNotFound reports whether err is a 404 of any code: a path id that is not
// a UUID answers not_found rather than session_not_found, and a caller
// usually treats both alike.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Errors an EventStream ends with.
var (
	// ErrStreamClosed is returned by Next after Close.
	ErrStreamClosed = errors.New("tandem: event stream closed")
	// ErrWorkspaceDeleted ends a stream whose workspace was deleted: the
	// stream does not reconnect, since opening a stream reopens a workspace
	// and would undo the delete.
	ErrWorkspaceDeleted = errors.New("tandem: workspace deleted")
	// ErrStreamReset is returned by WaitRun when the stream was reset before
	// the run completed: its run.completed may have been missed, so the
	// caller must look over REST (AgentStatus, SessionEvents).
	ErrStreamReset = errors.New("tandem: event stream reset")
)

// snippetLen bounds how much of a non-contract error body goes into an error.
const snippetLen = 200

// readAPIError turns a non-2xx answer into an *APIError.
func readAPIError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body proto.ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		return &APIError{Status: resp.StatusCode, Code: body.Error.Code, Message: body.Error.Message}
	}
	msg := http.StatusText(resp.StatusCode)
	if s := snippet(raw); s != "" {
		msg += ": " + s
	}
	return &APIError{Status: resp.StatusCode, Message: msg}
}

// snippet is the start of a body, on one line, for an error message.
func snippet(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) <= snippetLen {
		return s
	}
	s = s[:snippetLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
