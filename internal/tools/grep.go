package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	grepMaxMatches = 1000
	// grepMaxFileSize skips files that are almost surely data, not source;
	// reading them whole would cost memory for no useful match.
	grepMaxFileSize = 10 << 20
	// grepMaxLine bounds one shown line; the match is kept in view.
	grepMaxLine = 500
)

type grepTool struct{}

type grepArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Include string `json:"include"`
}

func (grepTool) Name() string { return "grep" }

func (grepTool) Description() string {
	return `Search file contents with a regular expression. Output is one line per match: "path:line:text", paths relative to the workspace root, line numbers from 1.
- pattern: Go (RE2) regular expression, matched per line. Use (?i) for case-insensitive; escape regex characters such as ( [ . * to match them literally.
- path: file or directory to search, relative to the workspace root or absolute inside it; defaults to the root.
- include: optional glob on file names, e.g. "*.go" or "*.{ts,tsx}" (a pattern with "/" is matched against the path below path, and may use "**").
- Binary files, files over 10 MB and ".git" directories are skipped. Long lines are shortened around the match. At most 1000 matches are shown; narrow the pattern, path or include when the output is truncated.`
}

func (grepTool) Schema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "description": "Regular expression (Go RE2 syntax) to search for."},
    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root or absolute inside it. Defaults to the root."},
    "include": {"type": "string", "description": "Only search files whose name matches this glob, e.g. \"*.go\" or \"*.{ts,tsx}\"."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`)
}

func (grepTool) Permission() string { return PermissionNone }

func (grepTool) Summary(env Env, args json.RawMessage) (string, map[string]any) {
	var a grepArgs
	if err := decodeArgs(args, &a, "pattern"); err != nil {
		return invalidSummary("grep", args, err)
	}
	p, err := env.displayPath(a.Path)
	d := map[string]any{"pattern": a.Pattern, "path": p}
	if a.Include != "" {
		d["include"] = a.Include
	}
	if err != nil {
		d["error"] = err.Error()
	}
	return fmt.Sprintf("Grep %s in %s", a.Pattern, p), d
}

func (grepTool) Run(ctx context.Context, env Env, args json.RawMessage) Result {
	var a grepArgs
	if err := decodeArgs(args, &a, "pattern"); err != nil {
		return errorf("%v", err)
	}
	if a.Pattern == "" {
		return errorf("invalid arguments: pattern must not be empty")
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return errorf("invalid regular expression %q: %v", a.Pattern, err)
	}
	var includes [][]string
	if a.Include != "" {
		for _, inc := range expandBraces(a.Include) {
			segs := splitPattern(inc)
			for _, s := range segs {
				if _, err := path.Match(s, ""); err != nil {
					return errorf("invalid include glob %q: %v", a.Include, err)
				}
			}
			includes = append(includes, segs)
		}
	}
	root, err := env.Resolve("")
	if err != nil {
		return resolveErr(err)
	}
	searchAbs, err := env.Resolve(a.Path)
	if err != nil {
		return resolveErr(err)
	}
	fi, err := os.Stat(searchAbs)
	if errors.Is(err, fs.ErrNotExist) {
		return errorf("path not found: %s", relTo(root, searchAbs))
	}
	if err != nil {
		return errorf("%v", err)
	}

	g := &grepper{re: re, root: root}
	if !fi.IsDir() {
		// A file named outright is searched whatever include says.
		if !fi.Mode().IsRegular() {
			return errorf("%s is not a regular file", relTo(root, searchAbs))
		}
		g.file(searchAbs, searchAbs)
	} else {
		err = filepath.WalkDir(searchAbs, func(p string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if g.visited++; g.visited > walkMaxEntries {
				g.stopped = true
				return filepath.SkipAll
			}
			if err != nil {
				return nil // unreadable entries are skipped, not fatal
			}
			if d.IsDir() {
				if d.Name() == ".git" && p != searchAbs {
					return filepath.SkipDir
				}
				return nil
			}
			if len(includes) > 0 && !includeMatch(includes, relTo(searchAbs, p)) {
				return nil
			}
			target := p
			switch {
			case d.Type().IsRegular():
			case d.Type()&fs.ModeSymlink != 0:
				// Follow a link only to a regular file inside the
				// workspace; directories are not followed, which also
				// avoids link cycles.
				t, err := env.Resolve(p)
				if err != nil {
					return nil
				}
				if tfi, err := os.Stat(t); err != nil || !tfi.Mode().IsRegular() {
					return nil
				}
				target = t
			default:
				return nil // FIFOs and devices could block or never end
			}
			if g.file(p, target) {
				return filepath.SkipAll
			}
			return nil
		})
		if err != nil && ctx.Err() != nil {
			return errorf("grep canceled: %v", ctx.Err())
		}
	}

	if g.matches == 0 {
		msg := "No matches found."
		if g.stopped {
			msg += fmt.Sprintf(" [search stopped after %d entries; narrow the path]", walkMaxEntries)
		}
		return Result{Content: msg}
	}
	out := strings.TrimSuffix(g.out.String(), "\n")
	switch {
	case g.full:
		out += fmt.Sprintf("\n[results truncated after %d matches; narrow the pattern, path or include]", g.matches)
	case g.stopped:
		out += fmt.Sprintf("\n[search stopped after %d entries; results are incomplete: narrow the path]", walkMaxEntries)
	}
	return Result{Content: capContent(out)}
}

func includeMatch(includes [][]string, rel string) bool {
	name := strings.Split(rel, "/")
	for _, inc := range includes {
		if len(inc) == 1 {
			if ok, _ := path.Match(inc[0], name[len(name)-1]); ok {
				return true
			}
			continue
		}
		if matchSegments(inc, name) {
			return true
		}
	}
	return false
}

// grepper accumulates the output of one grep call.
type grepper struct {
	re      *regexp.Regexp
	root    string
	out     strings.Builder
	matches int
	visited int
	stopped bool // the walk hit walkMaxEntries
	full    bool // the output hit its bounds
}

// file searches one file, shown as shown and read from target (they differ
// for a symlink). It reports whether the output is full.
func (g *grepper) file(shown, target string) bool {
	fi, err := os.Stat(target)
	if err != nil || fi.Size() > grepMaxFileSize {
		return false
	}
	data, err := os.ReadFile(target)
	if err != nil || bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
		return false
	}
	rel := relTo(g.root, shown)
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		loc := g.re.FindIndex(line)
		if loc == nil {
			continue
		}
		entry := fmt.Sprintf("%s:%d:%s\n", rel, n, excerpt(line, loc[0]))
		if g.matches >= grepMaxMatches || g.out.Len()+len(entry) > maxOutput-200 {
			g.full = true
			return true
		}
		g.out.WriteString(entry)
		g.matches++
	}
	return false
}

// excerpt shows a line whole when short, or a window around the match start,
// so a hit deep inside a minified line is still visible.
func excerpt(line []byte, at int) string {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	if len(s) <= grepMaxLine {
		return s
	}
	// at indexes line; after ToValidUTF8 offsets can shift slightly, which
	// only moves the window a little.
	start := max(0, min(at, len(s))-grepMaxLine/5)
	for start > 0 && start < len(s) && (s[start]&0xC0) == 0x80 {
		start--
	}
	w := truncateUTF8(s[start:], grepMaxLine)
	prefix, suffix := "", ""
	if start > 0 {
		prefix = "…"
	}
	if start+len(w) < len(s) {
		suffix = "… [line truncated]"
	}
	return prefix + w + suffix
}
