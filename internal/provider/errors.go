package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error codes a model failure maps to; they are the contract's run error codes.
const (
	CodeAuth        = "model_auth"         // 401, 403: bad or missing key
	CodeRateLimited = "model_rate_limited" // 429
	CodeUnavailable = "model_unavailable"  // 5xx, connection refused, broken or truncated stream
	CodeBadRequest  = "model_bad_request"  // 400, 404, 422: unknown model, bad parameters...
	CodeError       = "model_error"        // anything else
	// CodeContextExceeded is a request larger than the model's context
	// window (OpenAI's context_length_exceeded, Anthropic's "prompt is too
	// long"). Retrying it as it is cannot work; the agent compacts the
	// conversation and tries once more.
	CodeContextExceeded = "model_context_exceeded"
)

// MaxRetryAfter caps the wait an API may ask for before a retry (contract
// section 1): a run is not parked for minutes on one header.
const MaxRetryAfter = 60 * time.Second

// Error is a model failure mapped to the contract's codes. The agent loop
// retries Retryable errors and reports the others as the run's error.
type Error struct {
	Code      string // one of the Code* constants
	Message   string // human readable, never contains the API key
	Status    int    // HTTP status when there was one
	Retryable bool   // 429, 5xx and connection errors
	// RetryAfter is how long the API asked to be left alone before a retry
	// (see RetryAfter), at most MaxRetryAfter; 0 when it did not say.
	RetryAfter time.Duration
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
	case (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnprocessableEntity) && overContext("", message):
		e.Code = CodeContextExceeded
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

// APIError maps a model API's error answer: its HTTP status and headers,
// and the error code and message of its body (apiCode may be ""; OpenAI
// sends "context_length_exceeded" there). It is StatusError plus what the
// headers and the code add: the wait a 429 or 5xx asks for, and a request
// over the context window that the status alone does not tell from any
// other bad request.
func APIError(status int, header http.Header, apiCode, message string) *Error {
	e := StatusError(status, message)
	if e.Code == CodeBadRequest && overContext(apiCode, "") {
		e.Code = CodeContextExceeded
	}
	if e.Retryable {
		e.RetryAfter = RetryAfter(header, time.Now())
	}
	return e
}

// contextPhrases are what APIs say, lowercased, when a request is over the
// model's context window: OpenAI, Azure, vLLM, DeepSeek, Mistral and
// OpenRouter ("maximum context length is N tokens"), Anthropic ("prompt is
// too long: N tokens > M maximum", "input length and max_tokens exceed
// context limit"), llama.cpp ("exceeds the available context size"), Groq
// ("reduce the length of the messages"), Gemini's OpenAI endpoint ("input
// token count ... exceeds the maximum number of tokens allowed").
var contextPhrases = []string{
	"context_length_exceeded",
	"maximum context length",
	"prompt is too long",
	"exceed context limit",
	"exceeds the context window",
	"exceeds the available context size",
	"reduce the length of the messages",
	"exceeds the maximum number of tokens allowed",
}

// overContext reports whether an API error code or message says the
// request was over the context window. It is only asked about answers that
// refused the request as such (400, 413, 422): a 429's "too many tokens
// per minute" is a rate limit.
func overContext(code, message string) bool {
	switch strings.ToLower(code) {
	case "context_length_exceeded", "context_window_exceeded":
		return true
	}
	m := strings.ToLower(message)
	for _, p := range contextPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// RetryAfter reads from a model API's answer how long it asks the client to
// wait before trying again, capped at MaxRetryAfter; 0 when it does not
// say. In order of precedence:
//   - retry-after-ms (OpenAI, Azure): milliseconds;
//   - Retry-After: seconds or an HTTP-date (RFC 9110);
//   - the reset time of an exhausted rate limit: OpenAI's
//     x-ratelimit-reset-{requests,tokens} (durations such as "6m0s" or
//     "20ms") and Anthropic's anthropic-ratelimit-*-reset (RFC 3339 times),
//     each taken only when its x-ratelimit-remaining-* or
//     anthropic-ratelimit-*-remaining header says 0; the latest wins.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	capped := func(d time.Duration) time.Duration { return max(0, min(d, MaxRetryAfter)) }
	// number parses a count of unit, refusing what is not a plain
	// non-negative number and capping before converting, so a huge value
	// cannot overflow a Duration.
	number := func(v string, unit time.Duration) (time.Duration, bool) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f != f { // f != f: NaN
			return 0, false
		}
		if f >= float64(MaxRetryAfter)/float64(unit) {
			return MaxRetryAfter, true
		}
		return time.Duration(f * float64(unit)), true
	}
	if d, ok := number(strings.TrimSpace(h.Get("Retry-After-Ms")), time.Millisecond); ok {
		return d
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if d, ok := number(v, time.Second); ok {
			return d
		}
		if at, err := http.ParseTime(v); err == nil {
			return capped(at.Sub(now))
		}
	}
	var wait time.Duration
	for _, limit := range []string{"requests", "tokens"} {
		if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+limit)) != "0" {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + limit))); err == nil {
			wait = max(wait, d)
		}
	}
	for _, limit := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
		if strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+limit+"-Remaining")) != "0" {
			continue
		}
		if at, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get("Anthropic-Ratelimit-"+limit+"-Reset"))); err == nil {
			wait = max(wait, at.Sub(now))
		}
	}
	return capped(wait)
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
