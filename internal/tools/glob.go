package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
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
- pattern: a glob matched against paths relative to path. "*" matches within one path segment, "**" matches any number of directories (including none), "?" one character, "[abc]" a class, "{a,b}" alternatives. Examples: "**/*.go", "src/**/*_test.{ts,tsx}", "cmd/*/main.go".
- path: directory to search, relative to the workspace root or absolute inside it; defaults to the root.
- Only files are listed (use ls for directories). ".git" directories are skipped unless the pattern names them. At most 1000 results are shown.`
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

	var matches []string
	w := &walker{ctx: ctx, sp: sp}
	for _, pat := range expandBraces(a.Pattern) {
		// Literal leading segments go into the directory to walk: it both
		// prunes the walk and lets an absolute pattern work.
		base := search
		if filepath.IsAbs(pat) {
			base = "/"
		}
		segs := splitPattern(pat)
		for len(segs) > 1 && !hasMeta(segs[0]) {
			// Not cleaned: "link/.." must follow the link first, as
			// resolve does.
			base = base + "/" + segs[0]
			segs = segs[1:]
		}
		for _, s := range segs {
			if _, err := path.Match(s, ""); err != nil {
				return errorf("invalid glob pattern %q: %v", a.Pattern, err)
			}
		}
		baseRel, err := sp.resolve(base)
		if err != nil {
			return resolveErr(err)
		}
		if fi, err := sp.root.Stat(osPath(baseRel)); err != nil || !fi.IsDir() {
			continue // a literal prefix that does not exist matches nothing
		}
		skipGit := !strings.Contains(pat, ".git")
		err = w.walk(baseRel, func(e walkEntry) error {
			name := strings.Split(e.sub, "/")
			if e.isDir() {
				if (skipGit && e.name == ".git") || !canDescend(segs, name) {
					return fs.SkipDir
				}
				return nil
			}
			if matchSegments(segs, name) {
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
	}

	slices.Sort(matches)
	matches = slices.Compact(matches) // brace alternatives may overlap
	if len(matches) == 0 {
		msg := "No files matched."
		if w.stopped {
			msg += fmt.Sprintf(" [search stopped after %d entries; narrow path or pattern]", walkMaxEntries)
		}
		return Result{Content: msg}
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

func splitPattern(p string) []string {
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." {
			continue
		}
		// "**/**" means the same as "**", and collapsing keeps matching linear.
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue
		}
		segs = append(segs, s)
	}
	return segs
}

func hasMeta(seg string) bool { return strings.ContainsAny(seg, `*?[\`) }

// matchSegments matches path segments against pattern segments, where "**"
// stands for any number of whole segments.
func matchSegments(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegments(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := path.Match(pat[0], name[0])
	return ok && matchSegments(pat[1:], name[1:])
}

// canDescend reports whether some path below the directory dir could still
// match pat, so that walks skip subtrees that cannot.
func canDescend(pat, dir []string) bool {
	if len(dir) == 0 {
		return len(pat) > 0
	}
	if len(pat) == 0 {
		return false
	}
	if pat[0] == "**" {
		return true
	}
	ok, _ := path.Match(pat[0], dir[0])
	return ok && canDescend(pat[1:], dir[1:])
}

// maxBraceExpansions bounds "{a,b}{c,d}..." so that a hostile pattern cannot
// multiply into millions of walks.
const maxBraceExpansions = 64

// expandBraces expands shell-style alternatives, "*.{go,mod}" into "*.go" and
// "*.mod", which path.Match does not understand but models habitually write.
func expandBraces(p string) []string {
	out := []string{p}
	for range maxBraceExpansions {
		var next []string
		changed := false
		for _, s := range out {
			alts, ok := expandFirstBrace(s)
			if !ok {
				next = append(next, s)
				continue
			}
			changed = true
			next = append(next, alts...)
		}
		if len(next) > maxBraceExpansions {
			return out
		}
		out = next
		if !changed {
			break
		}
	}
	return out
}

// expandFirstBrace expands the first balanced "{...}" group holding a comma.
func expandFirstBrace(s string) ([]string, bool) {
	for start := 0; start < len(s); start++ {
		if s[start] != '{' {
			continue
		}
		depth, commas := 0, []int{}
		for i := start; i < len(s); i++ {
			switch s[i] {
			case '{':
				depth++
			case ',':
				if depth == 1 {
					commas = append(commas, i)
				}
			case '}':
				depth--
				if depth == 0 {
					if len(commas) == 0 {
						i = len(s) // "{x}" is literal; look for a later group
						break
					}
					bounds := append(append([]int{start}, commas...), i)
					var alts []string
					for k := 0; k+1 < len(bounds); k++ {
						alts = append(alts, s[:start]+s[bounds[k]+1:bounds[k+1]]+s[i+1:])
					}
					return alts, true
				}
			}
		}
	}
	return nil, false
}
