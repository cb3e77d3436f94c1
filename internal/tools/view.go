package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	viewDefaultLimit = 2000
	// viewMaxLine bounds one displayed line: minified files can hold megabytes
	// on one line, which would otherwise take the whole output budget.
	viewMaxLine = 2000
	// sniffLen is how much of a file is inspected to call it binary, the same
	// heuristic git and grep use: a NUL byte early on.
	sniffLen = 8000
)

type viewTool struct{}

type viewArgs struct {
	Path   string `json:"path"`
	Offset optInt `json:"offset"`
	Limit  optInt `json:"limit"`
}

func (viewTool) Name() string { return "view" }

func (viewTool) Description() string {
	return `Read a text file in the workspace. Lines are numbered from 1 in the output, formatted as "<line number><TAB><line>"; the numbers are not part of the file.
- path: relative to the workspace root, or absolute inside it.
- offset: first line to show (1-based, default 1); limit: number of lines (default 2000). Use them to page through long files.
- Lines longer than 2000 bytes are cut, and output is capped at about 30 kB; a note at the end says where to continue.
- Binary files are refused. Use ls for directories and grep to search.
Read a file before editing it so old_string for edit matches exactly (without the line-number prefix).`
}

func (viewTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to read, relative to the workspace root or absolute inside it."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to read, 1-based. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read. Default 2000."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)
}

func (viewTool) Permission() string { return PermissionNone }

func (viewTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a viewArgs
	if err := decodeArgs(args, &a, "path"); err != nil {
		return invalidSummary("view", args, err)
	}
	p, err := env.displayPath(a.Path)
	d := map[string]any{"path": p}
	if err != nil {
		d["error"] = err.Error()
	}
	return "View " + p, d
}

func (viewTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a viewArgs
	if err := decodeArgs(args, &a, "path"); err != nil {
		return errorf("%v", err)
	}
	if a.Path == "" {
		return errorf("invalid arguments: path must not be empty")
	}
	offset, limit := int64(1), int64(viewDefaultLimit)
	if a.Offset.set {
		if a.Offset.v < 0 {
			return errorf("invalid arguments: offset must be 1 or more, got %d", a.Offset.v)
		}
		offset = max(a.Offset.v, 1)
	}
	if a.Limit.set {
		if a.Limit.v < 1 {
			return errorf("invalid arguments: limit must be 1 or more, got %d", a.Limit.v)
		}
		limit = a.Limit.v
	}

	sp, err := env.open()
	if err != nil {
		return resolveErr(err)
	}
	defer sp.Close()
	rel, err := sp.resolve(a.Path)
	if err != nil {
		return resolveErr(err)
	}
	f, _, err := sp.openRead(rel)
	if err != nil {
		return errorf("%v", err)
	}
	defer f.Close()

	// Reads look at the context, so that one enormous line (a file of one
	// line of gigabytes) does not keep a canceled call reading.
	r := bufio.NewReaderSize(ctxReader{ctx, f}, 64*1024)
	head, _ := r.Peek(sniffLen)
	if err := ctx.Err(); err != nil {
		return errorf("view canceled: %v", err)
	}
	if len(head) == 0 {
		return Result{Content: fmt.Sprintf("(%s is empty)", rel)}
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return errorf("%s looks like a binary file; view only reads text files", rel)
	}

	var out strings.Builder
	var n int64
	last := int64(0) // last line written to out
	for {
		if err := ctx.Err(); err != nil {
			return errorf("view canceled: %v", err)
		}
		line, full, err := readLine(r, viewMaxLine)
		if ctx.Err() != nil {
			return errorf("view canceled: %v", ctx.Err())
		}
		if full == 0 && err != nil {
			if !errors.Is(err, io.EOF) {
				return errorf("reading %s: %v", rel, err)
			}
			break
		}
		n++
		if n < offset {
			continue
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if full > len(line) {
			text = truncateUTF8(text, viewMaxLine) + fmt.Sprintf(" … [line truncated: %d bytes]", full)
		}
		entry := fmt.Sprintf("%6d\t%s\n", n, text)
		// Keep room for the closing note so the total stays within maxOutput.
		if out.Len()+len(entry) > maxOutput-200 {
			if last == 0 {
				// A single line cannot be shown whole; show what fits.
				out.WriteString(truncateUTF8(entry, maxOutput-200))
				out.WriteString("\n")
				last = n
			}
			fmt.Fprintf(&out, "[output truncated at about %d bytes: showed lines %d-%d; call view with offset=%d to continue]", maxOutput, offset, last, last+1)
			return Result{Content: out.String()}
		}
		out.WriteString(entry)
		last = n
		if n-offset+1 >= limit {
			if _, err := r.Peek(1); err == nil {
				fmt.Fprintf(&out, "[showed lines %d-%d; the file has more lines: call view with offset=%d to continue]", offset, last, last+1)
			}
			return Result{Content: strings.TrimSuffix(out.String(), "\n")}
		}
		if err != nil {
			break
		}
	}
	if last == 0 {
		return errorf("offset %d is past the end of %s, which has %d lines", offset, rel, n)
	}
	return Result{Content: strings.TrimSuffix(out.String(), "\n")}
}

// readLine reads the next line, keeping at most keep bytes of it so that a
// huge line costs no memory, and reports the line's full length. The newline
// (and a CR before it) is dropped. At the end of the input it returns
// full == 0 with io.EOF.
func readLine(r *bufio.Reader, keep int) (line []byte, full int, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		full += len(chunk)
		if room := keep + 2 - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if bytes.HasSuffix(chunk, []byte("\n")) {
			full--
			line = bytes.TrimSuffix(line, []byte("\n"))
			if full > 0 && len(line) == full && bytes.HasSuffix(line, []byte("\r")) {
				full--
				line = line[:len(line)-1]
			}
		}
		if len(line) > keep {
			line = line[:keep]
		}
		if err != nil && full > 0 {
			// Hand back the last, unterminated line now; the next call sees
			// io.EOF alone.
			return line, full, nil
		}
		return line, full, err
	}
}

// ctxReader fails reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
