package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
- Binary files, files over 10 MB, what the workspace's .gitignore files ignore and ".git" are skipped, unless path names them. Long lines are shortened around the match. At most 1000 matches are shown; narrow the pattern, path or include when the output is truncated.`
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
	var include *globPattern
	if a.Include != "" {
		g, err := compileGlob("include glob", filepath.ToSlash(a.Include))
		if err != nil {
			return errorf("%v", err)
		}
		include = &g
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
	fi, err := sp.root.Stat(osPath(search))
	if errors.Is(err, fs.ErrNotExist) {
		return errorf("path not found: %s", search)
	}
	if err != nil {
		return resolveErr(pathErr(search, err))
	}

	g := &grepper{ctx: ctx, re: re}
	w := &walker{ctx: ctx, sp: sp, ign: sp.ignoreRulesFor(search)}
	if !fi.IsDir() {
		// A file named outright is searched whatever include says.
		f, _, err := sp.openRead(search)
		if err != nil {
			return errorf("%v", err)
		}
		g.file(f, search)
		f.Close()
		if ctx.Err() != nil {
			return errorf("grep canceled: %v", ctx.Err())
		}
	} else {
		err = w.walk(search, func(e walkEntry) error {
			if e.isDir() {
				return nil
			}
			if include != nil && !includeMatch(*include, e.sub, e.name) {
				return nil
			}
			var f *os.File
			switch {
			case e.typ.IsRegular():
				f, err = e.parent.OpenFile(e.name, os.O_RDONLY|openNonblock, 0)
				if err != nil {
					return nil
				}
			case e.typ&fs.ModeSymlink != 0:
				// Follow a link only to a regular file inside the
				// workspace; directories are not followed, which also
				// avoids link cycles.
				target, err := sp.resolve(e.rel)
				if err != nil {
					return nil
				}
				if f, _, err = sp.openRead(target); err != nil {
					return nil
				}
			default:
				return nil // FIFOs and devices could block or never end
			}
			defer f.Close()
			if g.file(f, e.rel) {
				return fs.SkipAll
			}
			return nil
		})
		if ctx.Err() != nil {
			return errorf("grep canceled: %v", ctx.Err())
		}
		if err != nil {
			return resolveErr(err)
		}
	}
	g.stopped = w.stopped

	if g.matches == 0 {
		msg := "No matches found."
		if g.stopped {
			msg += fmt.Sprintf(" [search stopped after %d entries; narrow the path]", walkMaxEntries)
		}
		return Result{Content: msg + hiddenNote(w.ign)}
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

// includeMatch applies grep's include: a pattern without "/" is matched
// against the file name, one with "/" against the path below the search.
func includeMatch(g globPattern, sub, name string) bool {
	if !strings.Contains(g.pattern, "/") {
		return g.match(name)
	}
	return g.match(sub)
}

// grepper accumulates the output of one grep call.
type grepper struct {
	ctx     context.Context
	re      *regexp.Regexp
	out     strings.Builder
	matches int
	stopped bool // the walk saw only part of the tree
	full    bool // the output hit its bounds
}

// file searches one open file, shown as rel. It reports whether the output
// is full (or the call canceled), so the walk can stop.
func (g *grepper) file(f *os.File, rel string) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > grepMaxFileSize {
		return false
	}
	data, err := io.ReadAll(io.LimitReader(f, grepMaxFileSize))
	if err != nil || bytes.IndexByte(data[:min(len(data), sniffLen)], 0) >= 0 {
		return false
	}
	for n := 1; len(data) > 0; n++ {
		if n%1024 == 0 && g.ctx.Err() != nil {
			return true
		}
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
