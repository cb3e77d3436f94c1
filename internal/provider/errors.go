package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Error codes a model failure maps to; they are the contract's run error codes.
const (
	CodeAuth        = "model_auth"         // 401, 403: bad or missing key
	CodeRateLimited = "model_rate_limited" // 429
	CodeUnavailable = "model_unavailable"  // 5xx, connection refused, broken or truncated stream
	CodeBadRequest  = "model_bad_request"  // 400, 404, 422: unknown model, bad parameters...
	CodeError       = "model_error"        // anything else
)

// Error is a model failure mapped to the contract's codes. The agent loop
// retries Retryable errors and reports the others as the run's error.
type Error struct {
	Code      string // one of the Code* constants
	Message   string // human readable, never contains the API key
	Status    int    // HTTP status when there was one
	Retryable bool   // 429, 5xx and connection errors
}

// Error implements error.
func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var pe *Error
	if errors.As(err, &pe) {
		return pe, true
	}
	return nil, false
}

// StatusError maps an HTTP status from a model API to an *Error. message is
// what the API said (it may be empty); the status text fills in for it.
func StatusError(status int, message string) *Error {
	message = strings.TrimSpace(message)
	if message == "" {
		message = http.StatusText(status)
	}
	if message == "" {
		message = "unexpected response"
	}
	e := &Error{Status: status, Message: message}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Code = CodeAuth
	case status == http.StatusTooManyRequests:
		e.Code, e.Retryable = CodeRateLimited, true
	case status >= 500:
		e.Code, e.Retryable = CodeUnavailable, true
	case status == http.StatusBadRequest || status == http.StatusNotFound ||
		status == http.StatusUnprocessableEntity || status == http.StatusRequestEntityTooLarge:
		e.Code = CodeBadRequest
	case status == http.StatusRequestTimeout || status == http.StatusConflict:
		// Timeouts and conflicts on the model's side clear up on their own.
		e.Code, e.Retryable = CodeUnavailable, true
	default:
		e.Code = CodeError
	}
	return e
}

// TruncatedError is the error for a stream that ended without the model
// saying it was done: the connection was cut, so trying again may work.
func TruncatedError(what string) *Error {
	return &Error{
		Code:      CodeUnavailable,
		Message:   what + ": the stream ended before the model finished its answer",
		Retryable: true,
	}
}

// TransportError maps an error that has no HTTP status (a refused connection,
// a reset or cut stream, a malformed chunk) to an *Error. prefix names the
// provider for the message. It is not meant for context cancellation: callers
// check ctx.Err() first so that a cancel stays a cancel.
func TransportError(prefix string, err error) *Error {
	msg := prefix + ": " + err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = prefix + ": the connection broke mid-stream (" + err.Error() + ")"
	}
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, net.ErrClosed), errors.As(err, &netErr), errors.As(err, &urlErr),
		errors.Is(err, context.DeadlineExceeded),
		strings.Contains(err.Error(), "connection reset"),
		strings.Contains(err.Error(), "unexpected EOF"):
		return &Error{Code: CodeUnavailable, Message: msg, Retryable: true}
	default:
		return &Error{Code: CodeError, Message: msg}
	}
}

// Redact removes secret from e's message, in case an API or a proxy echoed
// it back (OpenAI quotes part of a wrong key, some proxies the whole header).
// It returns e for chaining.
func (e *Error) Redact(secrets ...string) *Error {
	for _, s := range secrets {
		if len(s) >= 4 {
			e.Message = strings.ReplaceAll(e.Message, s, "[redacted]")
		}
	}
	return e
}

// CanceledError wraps ctx.Err() with the provider's name, so callers can
// tell a cancel (errors.Is(err, context.Canceled)) from a model failure.
func CanceledError(ctx context.Context, prefix string) error {
	return fmt.Errorf("%s: %w", prefix, ctx.Err())
}
