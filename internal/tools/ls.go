package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// lsMaxEntries bounds a listing; a directory of generated files can hold
// hundreds of thousands of entries, none of which the model needs one by one.
const lsMaxEntries = 1000

type lsTool struct{}

type lsArgs struct {
	Path string `json:"path"`
}

func (lsTool) Name() string { return "ls" }

func (lsTool) Description() string {
	return `List one directory of the workspace (not recursive). Entries are sorted by name, one per line; directories end with "/", symbolic links are shown as "name -> target".
- path: directory relative to the workspace root, or absolute inside it; defaults to the root.
- What the workspace's .gitignore files ignore, and ".git", are not listed (a note says how many); give such a directory as path to list it.
- At most 1000 entries are shown. To find files by name across directories use glob; to search contents use grep.`
}

func (lsTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list, relative to the workspace root or absolute inside it. Defaults to the root."}
  },
  "additionalProperties": false
}`)
}

func (lsTool) Permission() string { return PermissionNone }

func (lsTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a lsArgs
	if err := decodeArgs(args, &a); err != nil {
		return invalidSummary("ls", args, err)
	}
	p, err := env.displayPath(a.Path)
	d := map[string]any{"path": p}
	if err != nil {
		d["error"] = err.Error()
	}
	return "List " + p, d
}

func (lsTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a lsArgs
	if err := decodeArgs(args, &a); err != nil {
		return errorf("%v", err)
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
	// Opened, then checked: what is listed is what was checked.
	d, err := sp.root.OpenFile(osPath(rel), os.O_RDONLY|openNonblock, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errorf("directory not found: %s", rel)
	case err != nil:
		return resolveErr(pathErr(rel, err))
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil {
		return resolveErr(pathErr(rel, err))
	} else if !fi.IsDir() {
		return errorf("%s is a file, not a directory; use view to read it", rel)
	}
	ign := sp.ignoreRulesFor(rel)
	var parts []string
	if rel != "." {
		parts = strings.Split(rel, "/")
	}
	ign.load(sp.root, osPath(joinRel(rel, gitignoreName)), parts)
	// os.ReadDir would read and sort every entry; reading in batches keeps a
	// huge directory from costing unbounded memory.
	var names []string
	var total int
	for {
		if err := ctx.Err(); err != nil {
			return errorf("ls canceled: %v", err)
		}
		batch, err := d.ReadDir(readDirBatch)
		for _, e := range batch {
			if ign.skip(append(parts[:len(parts):len(parts)], e.Name()), e.IsDir()) {
				continue
			}
			total++
			if len(names) < 50*lsMaxEntries {
				names = append(names, entryName(sp, rel, e))
			}
		}
		if err != nil {
			break
		}
	}
	hidden := ""
	if ign.hidden > 0 {
		hidden = fmt.Sprintf("[%d entries ignored by .gitignore not shown; give one as path to list it]", ign.hidden)
	}
	if total == 0 {
		if hidden != "" {
			return Result{Content: fmt.Sprintf("(no entries shown in %s)\n%s", rel, hidden)}
		}
		return Result{Content: fmt.Sprintf("(%s is empty)", rel)}
	}
	sortByName(names)
	shown := names[:min(len(names), lsMaxEntries)]
	out := strings.Join(shown, "\n")
	if total > len(shown) {
		out += fmt.Sprintf("\n[listing truncated: showed %d of %d entries; use glob with a pattern to narrow it]", len(shown), total)
	}
	if hidden != "" {
		out += "\n" + hidden
	}
	return Result{Content: capContent(out)}
}

// entryName renders one directory entry. A symlink's target is shown rather
// than followed: following it could reveal things outside the workspace.
func entryName(sp *space, dir string, e fs.DirEntry) string {
	name := e.Name()
	switch {
	case e.IsDir():
		return name + "/"
	case e.Type()&fs.ModeSymlink != 0:
		if t, err := sp.root.Readlink(osPath(joinRel(dir, name))); err == nil {
			return name + " -> " + t
		}
	}
	return name
}

// sortByName sorts entries by name, ignoring the "/" or " -> target" suffix
// so that the order is the plain name order.
func sortByName(entries []string) {
	key := func(s string) string {
		s, _, _ = strings.Cut(s, " -> ")
		return strings.TrimSuffix(s, "/")
	}
	slices.SortFunc(entries, func(a, b string) int { return strings.Compare(key(a), key(b)) })
}
