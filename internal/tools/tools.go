// Package tools implements the agent's built-in tools: reading (view, ls, glob,
// grep), writing (edit, write) and running shell commands (bash), all confined
// to one workspace directory. The file tools reach files only through an
// os.Root opened on the workspace for each call, so no path leaves it, even
// while another process swaps directories for symlinks; every walk and read
// looks at the call's context, so a cancel stops any of them promptly.
//
// Every tool reports failures as an error Result rather than a Go error or a
// panic, because the caller hands the result straight back to the model, which
// is expected to read the message and try again differently.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Env is what a tool call may touch.
type Env struct {
	// Root is the workspace root, an absolute path. Every path a tool reads
	// or writes is Root or below it; the model names them relative to Root
	// or absolute (in either Root's spelling or its symlink-resolved one).
	Root string
	// Sandbox confines bash's commands (contract section 12). nil runs
	// them unconfined: only for callers that run no command for an agent
	// (the server always sets it; its "off" is a Sandbox too).
	Sandbox Sandbox
}

// Sandbox starts the commands of a call confined.
type Sandbox interface {
	// Start starts name with args in dir confined, with extraEnv added to
	// its environment (which has none of the server's secrets), stdin
	// from the null device and stdout and stderr to out, as the leader of
	// a process group of its own; the caller waits for it. An error means
	// the command did not start: it cannot be confined here (the error
	// says why and which setting would run it) or could not be started.
	Start(dir string, extraEnv []string, out *os.File, name string, args ...string) (*exec.Cmd, error)
	// Setting is the sandbox setting commands run under ("workspace",
	// "read-only", "off"), which tool.finished reports.
	Setting() string
	// Explain returns a note for the output of a command that failed when
	// the sandbox may be why (the network is off, say) and says which
	// setting changes it; "" when it has nothing to say.
	Explain(output string) string
}

// Result is what goes back to the model.
type Result struct {
	// Content is the text the model sees; it is always valid UTF-8 and bounded
	// in size, so that one call cannot blow up the next model request.
	Content string
	// IsError marks a failed call (bad arguments, a path outside the
	// workspace, a non-zero exit status, a timeout, ...).
	IsError bool
	// Sandbox is the sandbox setting a command ran under ("" when the
	// tool runs none).
	Sandbox string
}

// Tool is one built-in tool.
type Tool interface {
	// Name is the name the model calls the tool by.
	Name() string
	// Description is written for a model to follow: what the tool does, when
	// to use it, and its limits.
	Description() string
	// Schema is the JSON Schema object of the arguments.
	Schema() json.RawMessage
	// Permission is the permission kind a call needs: "" (none), "shell"
	// (bash) or "write" (edit, write).
	Permission() string
	// Summary describes a call for a permission prompt shown to a human: a
	// one-line summary and details (for example the command, or the path and
	// a diff preview). It never fails; unusable arguments are described as
	// such so that the human still sees what the model asked for.
	Summary(env Env, args json.RawMessage) (summary string, details map[string]any)
	// Run executes the call. It never panics on bad input and returns promptly
	// once ctx is done.
	Run(ctx context.Context, env Env, args json.RawMessage) Result
}

// Permission kinds, as named by the contract (section 7).
const (
	PermissionNone  = ""
	PermissionShell = "shell"
	PermissionWrite = "write"
	// PermissionRead is asked by a reading tool only when a rule says ask.
	PermissionRead = "read"
)

// Builtins returns the seven built-in tools in a stable order. A fresh slice is
// returned each time so that callers may reorder or filter it freely.
func Builtins() []Tool {
	return []Tool{viewTool{}, lsTool{}, globTool{}, grepTool{}, editTool{}, writeTool{}, bashTool{}}
}

// maxOutput bounds the content of any one result, notes included. Roughly
// 30 kB is a few thousand tokens: enough to be useful, small enough to leave
// room in the model's context for many calls. It stays well under the 64 KiB
// at which the agent cuts any tool result (contract section 7), so a
// built-in tool's own note, which says what was cut and how to read on, is
// the one the model sees.
const maxOutput = 30_000

func errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// decodeArgs unmarshals the model's arguments. Required keys are checked
// separately from unmarshalling because a missing string and an empty one
// decode identically, and the model deserves to be told which key it forgot.
func decodeArgs(raw json.RawMessage, v any, required ...string) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return fmt.Errorf("invalid arguments: expected a JSON object (%v)", err)
	}
	for _, k := range required {
		if f, ok := fields[k]; !ok || string(bytes.TrimSpace(f)) == "null" {
			return fmt.Errorf("invalid arguments: missing required argument %q", k)
		}
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

// optInt is an optional integer argument. Models sometimes send 10.0 or "10"
// for an integer; accepting those costs nothing and saves a retry.
type optInt struct {
	set bool
	v   int64
}

// UnmarshalJSON accepts a JSON number or a numeric string holding an integer.
func (o *optInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*o = optInt{}
		return nil
	}
	s = strings.Trim(s, `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("expected an integer, got %s", b)
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("expected an integer, got %s", b)
	}
	*o = optInt{set: true, v: int64(f)}
	return nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune, because
// the result ends up in JSON and a split rune would be mangled there.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// capContent bounds a finished result text, saying so when it had to cut, so
// the model knows to narrow its request instead of trusting partial output.
func capContent(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxOutput {
		return s
	}
	cut := truncateUTF8(s, maxOutput)
	if i := strings.LastIndexByte(cut, '\n'); i > maxOutput/2 {
		cut = cut[:i+1]
	}
	return fmt.Sprintf("%s\n[output truncated: showed %d of %d bytes; narrow the request (path, pattern) to see the rest]", strings.TrimRight(cut, "\n"), len(cut), len(s))
}

// oneLine shortens s for a one-line summary: first line only, bounded length.
func oneLine(s string, n int) string {
	first, _, more := strings.Cut(s, "\n")
	if len(first) > n {
		return truncateUTF8(first, n) + "…"
	}
	if more {
		return first + " …"
	}
	return first
}

// invalidSummary describes a call whose arguments could not be decoded, so the
// human is still shown what the model asked for.
func invalidSummary(name string, args json.RawMessage, err error) (string, map[string]any) {
	return fmt.Sprintf("%s (invalid arguments)", name), map[string]any{
		"arguments": truncateUTF8(string(args), 4000),
		"error":     err.Error(),
	}
}
