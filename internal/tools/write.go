package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeMaxPreview bounds how much of an existing file Summary reads to build
// its diff; past that the preview is not worth the memory.
const writeMaxPreview = 1 << 20

type writeTool struct{}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (writeTool) Name() string { return "write" }

func (writeTool) Description() string {
	return `Create a file or overwrite it entirely with content. Parent directories are created as needed.
- path: relative to the workspace root, or absolute inside it.
- This replaces the whole file; to change part of an existing file prefer edit, which is safer and cheaper. View an existing file before overwriting it.`
}

func (writeTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to write, relative to the workspace root or absolute inside it."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`)
}

func (writeTool) Permission() string { return PermissionWrite }

func (writeTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a writeArgs
	if err := decodeArgs(args, &a, "path", "content"); err != nil {
		return invalidSummary("write", args, err)
	}
	rel, err := env.displayPath(a.Path)
	d := map[string]any{"path": rel, "bytes": len(a.Content)}
	if err != nil {
		d["error"] = err.Error()
		d["diff"] = unifiedDiff(rel, "", a.Content)
		return fmt.Sprintf("Write %s (%d bytes)", rel, len(a.Content)), d
	}
	abs, _ := env.Resolve(a.Path)
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d["new_file"] = true
		d["diff"] = unifiedDiff(rel, "", a.Content)
		return fmt.Sprintf("Create %s (%d bytes)", rel, len(a.Content)), d
	case err == nil && fi.Mode().IsRegular() && fi.Size() <= writeMaxPreview:
		if old, err := os.ReadFile(abs); err == nil {
			d["diff"] = unifiedDiff(rel, string(old), a.Content)
		}
	case err != nil:
		d["error"] = err.Error()
	}
	d["new_file"] = false
	return fmt.Sprintf("Overwrite %s (%d bytes)", rel, len(a.Content)), d
}

func (writeTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a writeArgs
	if err := decodeArgs(args, &a, "path", "content"); err != nil {
		return errorf("%v", err)
	}
	if a.Path == "" {
		return errorf("invalid arguments: path must not be empty")
	}
	abs, err := env.Resolve(a.Path)
	if err != nil {
		return resolveErr(err)
	}
	rel := env.rel(abs)
	existed := false
	fi, err := os.Stat(abs)
	switch {
	case err == nil && fi.IsDir():
		return errorf("%s is a directory; give a file path", rel)
	case err == nil && !fi.Mode().IsRegular():
		// Writing to a FIFO would block; to a device, do worse.
		return errorf("%s is not a regular file", rel)
	case err == nil:
		existed = true
	case !errors.Is(err, fs.ErrNotExist):
		return errorf("%v", err)
	}
	if err := ctx.Err(); err != nil {
		return errorf("write canceled before writing: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return errorf("creating parent directories of %s: %v", rel, err)
	}
	// os.WriteFile keeps an existing file's mode: the 0644 applies only on
	// creation, so an executable script stays executable.
	if err := os.WriteFile(abs, []byte(a.Content), 0o644); err != nil {
		return errorf("writing %s: %v", rel, err)
	}
	if existed {
		return Result{Content: fmt.Sprintf("Overwrote %s (%d bytes).", rel, len(a.Content))}
	}
	return Result{Content: fmt.Sprintf("Created %s (%d bytes).", rel, len(a.Content))}
}
