// Package apierr is the API's errors: the error type every
// layer returns and the HTTP layer maps to the contract's status codes in one place.
package apierr

import (
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/proto"
)

// Error is a failure the client can act on. Code is one of the contract's error
// codes (proto.Code*); Message is safe to show to the client.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the contract code of err, or proto.CodeInternal when err
// carries none (an unexpected failure whose details stay in the log).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return proto.CodeInternal
}

// ErrorMessage returns the client-facing message of err.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Invalid is shorthand for an invalid_argument error.
func Invalid(format string, args ...any) *Error {
	return Errorf(proto.CodeInvalidArgument, format, args...)
}

// CheckUUID checks a required id given in a body or query, naming the field.
func CheckUUID(field, v string) error {
	if v == "" {
		return Invalid("%s is required", field)
	}
	if _, err := uuid.Parse(v); err != nil {
		return Invalid("%s must be a UUID, got %q", field, v)
	}
	return nil
}

// CheckLen refuses a client's string over its limit in bytes with
// body_too_large, naming the field.
func CheckLen(field, s string, limit int) error {
	if len(s) > limit {
		return Errorf(proto.CodeBodyTooLarge, "%s is %d bytes; at most %d are allowed", field, len(s), limit)
	}
	return nil
}
