package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// statusOf is the one place where the contract's error codes meet HTTP statuses.
func statusOf(code string) int {
	switch code {
	case proto.CodeInvalidJSON, proto.CodeInvalidArgument, proto.CodeInvalidConfig:
		return http.StatusBadRequest
	case proto.CodeUnauthorized:
		return http.StatusUnauthorized
	case proto.CodeForbiddenOrigin, proto.CodeForbiddenHost, proto.CodeForbidden:
		return http.StatusForbidden
	case proto.CodeRateLimited:
		return http.StatusTooManyRequests
	case proto.CodeWorkspaceNotFound, proto.CodeSessionNotFound, proto.CodeRequestNotFound, proto.CodeNotFound,
		proto.CodeMessageNotFound, proto.CodeCheckpointNotFound:
		return http.StatusNotFound
	case proto.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case proto.CodeAlreadyExists, proto.CodeAlreadyResolved, proto.CodeToolConflict,
		proto.CodeWorkspaceNotOpen, proto.CodeWorkspaceClosing, proto.CodeSessionBusy, proto.CodeRewindConflict:
		return http.StatusConflict
	case proto.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case proto.CodeShuttingDown, proto.CodeStorageUnavailable, proto.CodeWorkspaceUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// codeOf returns the contract code of err and the message the client sees.
// Domain errors carry both; a failure of the storage (a full disk, a
// database locked past its timeout), wherever it happened, is
// storage_unavailable; anything else is internal, its detail kept for the
// log.
func codeOf(err error) (code, message string) {
	var te *apierr.Error
	switch {
	case errors.As(err, &te):
		return te.Code, te.Message
	case errors.Is(err, store.ErrUnavailable):
		return proto.CodeStorageUnavailable, "the store refuses writes for now (disk full or database locked); nothing was changed, try again later"
	}
	return apierr.ErrorCode(err), apierr.ErrorMessage(err)
}

// writeError answers with the contract's error body. Unexpected errors and
// storage failures are logged with their detail and answered with a
// generic message.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, message := codeOf(err)
	status := statusOf(code)
	if code == proto.CodeForbidden {
		a.denied(r, err)
	}
	switch {
	case status == http.StatusInternalServerError:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case code == proto.CodeStorageUnavailable:
		a.log.Warn("request failed: storage unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, proto.ErrorBody{Error: proto.ErrorDetail{Code: code, Message: message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errBodyTimeout is decode's error for a body that did not arrive in time.
var errBodyTimeout = errors.New("request body did not arrive in time")

// decode reads a JSON body strictly into v: unknown fields, wrong types and
// trailing data are errors naming what is wrong. An empty body counts as {}
// because routes with optional bodies (cancel, delete) must accept it.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return apierr.Errorf(proto.CodeBodyTooLarge, "body is larger than %d bytes", tooLarge.Limit)
		}
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return errBodyTimeout
		}
		return apierr.Errorf(proto.CodeInvalidJSON, "read body: %v", err)
	}
	// JSON's own white space only (RFC 8259): bytes.TrimSpace would take
	// \f, \v, U+0085 or U+00A0 off too, which a JSON parser refuses, and
	// what one reader takes as a body another would refuse.
	body = bytes.Trim(body, " \t\r\n")
	if len(body) == 0 {
		body = []byte("{}")
	}
	if !valueStart(body[0]) || !valueEnd(body[len(body)-1]) {
		return apierr.Errorf(proto.CodeInvalidJSON, "body has something other than JSON white space around its value")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// Whatever follows the value is refused, a stray '}' or ']' too (which
	// dec.More does not see).
	if dec.InputOffset() != int64(len(body)) {
		return apierr.Errorf(proto.CodeInvalidJSON, "body has data after the JSON value")
	}
	return nil
}

// valueStart and valueEnd report whether b can begin or end a JSON value,
// so that a stray byte around the value is invalid_json whatever the
// value holds (the decoder would name an unknown field first).
func valueStart(b byte) bool {
	return strings.IndexByte(`{["-0123456789tfn`, b) >= 0
}

func valueEnd(b byte) bool {
	return strings.IndexByte(`}]"0123456789el`, b) >= 0
}

func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return apierr.Errorf(proto.CodeInvalidJSON, "body is not valid JSON: %v", err)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return apierr.Invalid("body must be a JSON object, got %s", typ.Value)
		}
		return apierr.Invalid("field %q must be %s, got %s", typ.Field, jsonType(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return apierr.Invalid("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return apierr.Invalid("invalid body: %v", err)
}

// jsonType names Go kinds the way a JSON client thinks of them.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	}
	return fmt.Sprintf("of type %s", kind)
}

// recoverer turns a panic into a 500 with the error body and keeps the server up.
func (a *API) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler {
				panic(rec)
			}
			a.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(rec), slog.String("stack", stack()))
			a.writeError(w, r, fmt.Errorf("panic: %v", rec))
		}()
		next.ServeHTTP(w, r)
	})
}
