package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

const globMaxResults = 1000

type globTool struct{}

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (globTool) Name() string { return "glob" }

func (globTool) Description() string {
	return `Find files by name pattern. Returns matching file paths relative to the workspace root, sorted, one per line.
- pattern: a glob matched against paths relative to path. "*" matches within one path segment, "**" matches any number of directories (including none), "?" one character, "[abc]" a class, "{a,b}" alternatives, "\" escapes. Examples: "**/*.go", "src/**/*_test.{ts,tsx}", "cmd/*/main.go".
- path: directory to search, relative to the workspace root or absolute inside it; defaults to the root.
- Only files are listed (use ls for directories). What the workspace's .gitignore files ignore, and ".git", are skipped unless path (or the pattern's leading directories) names them. At most 1000 results are shown.`
}

func (globTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Glob pattern, e.g. \"**/*.go\"; \"**\" matches any number of directories."},
    "path": {"type": "string", "description": "Directory to search in, relative to the workspace root or absolute inside it. Defaults to the root."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)
}

func (globTool) Permission() string { return PermissionNone }

func (globTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a globArgs
	if err := decodeArgs(args, &a, "pattern"); err != nil {
		return invalidSummary("glob", args, err)
	}
	p, err := env.displayPath(a.Path)
	d := map[string]any{"pattern": a.Pattern, "path": p}
	if err != nil {
		d["error"] = err.Error()
	}
	return fmt.Sprintf("Glob %s in %s", a.Pattern, p), d
}

func (globTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a globArgs
	if err := decodeArgs(args, &a, "pattern"); err != nil {
		return errorf("%v", err)
	}
	if a.Pattern == "" {
		return errorf("invalid arguments: pattern must not be empty")
	}
	sp, err := env.open()
	if err != nil {
		return resolveErr(err)
	}
	defer sp.Close()
	search, err := sp.resolve(a.Path)
	if err != nil {
		return resolveErr(err)
	}
	if fi, err := sp.root.Stat(osPath(search)); err != nil || !fi.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return errorf("not a directory: %s", search)
		}
		return resolveErr(pathErr(search, err))
	}

	pat := filepath.ToSlash(a.Pattern)
	if filepath.IsAbs(filepath.FromSlash(pat)) {
		// An absolute pattern names its directory itself.
		rest, ok := "", false
		for _, base := range []string{sp.dir, sp.given} {
			if rest, ok = cutAbsPrefix(pat, filepath.ToSlash(base)); ok {
				break
			}
		}
		if !ok {
			return resolveErr(outside(a.Pattern))
		}
		search, pat = ".", rest
	}
	// Leading literal segments go into the directory to walk: that prunes
	// the walk, and a ".." in them is resolved (and confined) like a path.
	prefix, rest := literalPrefix(pat)
	g, err := compileGlob("glob pattern", rest)
	if err != nil {
		return errorf("%v", err)
	}
	base := search
	if prefix != "" {
		// Not cleaned: "link/.." must follow the link first, as resolve
		// does.
		if base, err = sp.resolve(joinRel(search, prefix)); err != nil {
			return resolveErr(err)
		}
	}
	if fi, err := sp.root.Stat(osPath(base)); err != nil || !fi.IsDir() {
		return Result{Content: "No files matched."} // a literal prefix that does not exist
	}

	var matches []string
	w := &walker{ctx: ctx, sp: sp, ign: sp.ignoreRulesFor(base)}
	if strings.Contains(rest, gitDir) {
		w.ign.keepGit = true
	}
	err = w.walk(base, func(e walkEntry) error {
		if e.isDir() {
			if !g.mayContain(e.sub) {
				return fs.SkipDir
			}
			return nil
		}
		if g.match(e.sub) {
			matches = append(matches, e.rel)
		}
		return nil
	})
	if ctx.Err() != nil {
		return errorf("glob canceled: %v", ctx.Err())
	}
	if err != nil {
		return resolveErr(err)
	}

	slices.Sort(matches)
	if len(matches) == 0 {
		msg := "No files matched."
		if w.stopped {
			msg += fmt.Sprintf(" [search stopped after %d entries; narrow path or pattern]", walkMaxEntries)
		}
		return Result{Content: msg + hiddenNote(w.ign)}
	}
	shown := matches[:min(len(matches), globMaxResults)]
	out := strings.Join(shown, "\n")
	if len(matches) > len(shown) {
		out += fmt.Sprintf("\n[results truncated: showed %d of %d matches; narrow the pattern or path]", len(shown), len(matches))
	}
	if w.stopped {
		out += fmt.Sprintf("\n[search stopped after %d entries; results are incomplete: narrow the path or pattern]", walkMaxEntries)
	}
	return Result{Content: capContent(out)}
}
