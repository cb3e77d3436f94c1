package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

type editTool struct{}

type editArgs struct {
	Path      string `json:"path"`
	OldString string `json:"old_string"`
	NewString string `json:"new_string"`
}

func (editTool) Name() string { return "edit" }

func (editTool) Description() string {
	return `Edit a text file by replacing exactly one occurrence of old_string with new_string.
- old_string must match the file exactly, including whitespace and indentation, and must occur exactly once; include enough surrounding lines to make it unique. Do not include the line-number prefix that view shows.
- If old_string is not found or occurs more than once, nothing is changed and the error says how many times it occurs.
- To create a new file, give a path that does not exist and an empty old_string (or use write).
- To replace a whole file, use write. View the file first so your old_string is current.`
}

func (editTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to edit, relative to the workspace root or absolute inside it."},
    "old_string": {"type": "string", "description": "Exact text to replace; must occur exactly once in the file. Empty to create a new file."},
    "new_string": {"type": "string", "description": "Text to put in its place."}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`)
}

func (editTool) Permission() string { return PermissionWrite }

func (editTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a editArgs
	if err := decodeArgs(args, &a, "path", "old_string", "new_string"); err != nil {
		return invalidSummary("edit", args, err)
	}
	rel := a.Path
	d := map[string]any{"path": rel}
	plan, err := func() (editPlan, error) {
		sp, err := env.open()
		if err != nil {
			return editPlan{}, err
		}
		defer sp.Close()
		if rel, err = sp.resolve(a.Path); err != nil {
			return editPlan{}, err
		}
		d["path"] = rel
		return planEdit(sp, rel, a)
	}()
	if err != nil {
		// Still show what the model wants to change; the run will fail the
		// same way and tell the model why.
		d["error"] = err.Error()
		d["diff"] = fragmentDiff(rel, a.OldString, a.NewString)
		return "Edit " + rel, d
	}
	d["diff"] = unifiedDiff(rel, plan.before, plan.after)
	if plan.create {
		d["new_file"] = true
		return "Create " + rel, d
	}
	return "Edit " + rel, d
}

func (editTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a editArgs
	if err := decodeArgs(args, &a, "path", "old_string", "new_string"); err != nil {
		return errorf("%v", err)
	}
	if a.Path == "" {
		return errorf("invalid arguments: path must not be empty")
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
	plan, err := planEdit(sp, rel, a)
	if err != nil {
		return errorf("%v", err)
	}
	if err := ctx.Err(); err != nil {
		return errorf("edit canceled before writing: %v", err)
	}
	if err := sp.writeFile(rel, []byte(plan.after)); err != nil {
		return errorf("%v", err)
	}
	if plan.create {
		return Result{Content: fmt.Sprintf("Created %s (%d bytes).", rel, len(plan.after))}
	}
	return Result{Content: fmt.Sprintf("Edited %s: replaced 1 occurrence at line %d.", rel, plan.line)}
}

// editMaxFile bounds the file edit reads whole; a larger one is better
// changed with a command than held in memory twice.
const editMaxFile = 10 << 20

// editPlan is the outcome of an edit computed without writing anything, so
// that Summary can preview exactly what Run will do.
type editPlan struct {
	before, after string
	create        bool
	line          int // 1-based line where the replacement starts
}

func planEdit(sp *space, rel string, a editArgs) (editPlan, error) {
	data, err := sp.readFile(rel, editMaxFile)
	if errors.Is(err, fs.ErrNotExist) {
		if a.OldString != "" {
			return editPlan{}, fmt.Errorf("file not found: %s (to create a file, use an empty old_string or the write tool)", rel)
		}
		return editPlan{after: a.NewString, create: true, line: 1}, nil
	}
	if err != nil {
		return editPlan{}, err
	}
	content := string(data)
	if a.OldString == "" {
		if content != "" {
			return editPlan{}, fmt.Errorf("old_string is empty but %s already exists and is not empty; give the exact text to replace, or use write to overwrite the file", rel)
		}
		return editPlan{before: content, after: a.NewString, line: 1}, nil
	}
	if a.OldString == a.NewString {
		return editPlan{}, fmt.Errorf("old_string and new_string are identical; nothing to change")
	}
	old, repl := a.OldString, a.NewString
	n := strings.Count(content, old)
	if n == 0 && strings.Contains(content, "\r\n") && !strings.Contains(old, "\r") {
		// view shows CRLF files without their CRs, so the model's
		// old_string has bare newlines; match it in the file's own style.
		crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
		if c := strings.Count(content, crlf(old)); c > 0 {
			old, repl, n = crlf(old), crlf(repl), c
		}
	}
	switch {
	case n == 0:
		return editPlan{}, fmt.Errorf("old_string was not found in %s; nothing changed. It must match exactly, including whitespace and indentation; view the file to check", rel)
	case n > 1:
		return editPlan{}, fmt.Errorf("old_string appears %d times in %s; nothing changed. Include more surrounding context so that it matches exactly one place", n, rel)
	}
	i := strings.Index(content, old)
	return editPlan{
		before: content,
		after:  content[:i] + repl + content[i+len(old):],
		line:   strings.Count(content[:i], "\n") + 1,
	}, nil
}
