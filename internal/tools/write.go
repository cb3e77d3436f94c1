package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// writeMaxPreview bounds the existing file Summary reads to diff against the
// new content; past that the diff is not worth the memory.
const writeMaxPreview = 16 << 20

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
	sp, err := env.open()
	var rel string
	if err == nil {
		defer sp.Close()
		rel, err = sp.resolve(a.Path)
	}
	if err != nil {
		rel = a.Path
		d := map[string]any{"path": rel, "bytes": len(a.Content), "error": err.Error(), "diff": unifiedDiff(rel, "", a.Content)}
		return fmt.Sprintf("Write %s (%d bytes)", rel, len(a.Content)), d
	}
	d := map[string]any{"path": rel, "bytes": len(a.Content)}
	old, err := sp.readFile(rel, writeMaxPreview)
	var tooLarge *TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d["new_file"] = true
		d["diff"] = unifiedDiff(rel, "", a.Content)
		return fmt.Sprintf("Create %s (%d bytes)", rel, len(a.Content)), d
	case errors.As(err, &tooLarge):
		d["diff"] = fmt.Sprintf("(%s is %d bytes, too large to compare; all of it is replaced by the %d bytes of content)", rel, tooLarge.Size, len(a.Content))
	case err != nil:
		d["error"] = err.Error()
	default:
		d["diff"] = unifiedDiff(rel, string(old), a.Content)
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
	sp, err := env.open()
	if err != nil {
		return resolveErr(err)
	}
	defer sp.Close()
	rel, err := sp.resolve(a.Path)
	if err != nil {
		return resolveErr(err)
	}
	existed := false
	fi, err := sp.root.Stat(osPath(rel))
	switch {
	case err == nil && fi.IsDir():
		return errorf("%s is a directory; give a file path", rel)
	case err == nil && !fi.Mode().IsRegular():
		// Writing to a FIFO would block; to a device, do worse.
		return errorf("%s is not a regular file", rel)
	case err == nil:
		existed = true
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return resolveErr(pathErr(rel, err))
	}
	if err := ctx.Err(); err != nil {
		return errorf("write canceled before writing: %v", err)
	}
	if err := sp.writeFile(rel, []byte(a.Content)); err != nil {
		return errorf("%v", err)
	}
	if existed {
		return Result{Content: fmt.Sprintf("Overwrote %s (%d bytes).", rel, len(a.Content))}
	}
	return Result{Content: fmt.Sprintf("Created %s (%d bytes).", rel, len(a.Content))}
}
