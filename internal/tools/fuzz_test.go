package tools

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzResolve: whatever the path, resolution never names anything outside
// the workspace, and reading through it never returns a file from outside.
// The workspace holds links of every kind: in, out, absolute, relative,
// dangling and looping. Seeds are in testdata/fuzz/FuzzResolve.
func FuzzResolve(f *testing.F) {
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	out, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(out, "secret"), []byte("OUTSIDE"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(root, "a", "b", "f"), []byte("inside"), 0o644))
	rel, err := filepath.Rel(root, out)
	must(err)
	for name, target := range map[string]string{
		"in": "a/b", "abs-in": filepath.Join(root, "a"), "out": out, "rel-out": rel,
		"up": "..", "dangling": filepath.Join(out, "new"), "loop": "loop", "a/b/back": "../..",
		"a/b/secret": filepath.Join(rel, "secret"),
	} {
		must(os.Symlink(target, filepath.Join(root, name)))
	}
	env := Env{Root: root}
	for _, p := range []string{"", ".", "a/b/f", "in/f", "abs-in/b/f", "out/secret", "rel-out/secret", "up/x",
		"dangling", "loop/x", "a/b/back/a", "a/b/secret", "../" + filepath.Base(root) + "/a", root + "/a/../a/b/f",
		"/etc/passwd", "a/../../x", "a\x00b", "a//b/./f", "in/../../x"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := env.Rel(p)
		if err != nil {
			return
		}
		if r != "." && (strings.HasPrefix(r, "/") || strings.Contains("/"+r+"/", "/../") || strings.Contains("/"+r+"/", "//")) {
			t.Fatalf("Rel(%q) = %q: not a clean path below the root", p, r)
		}
		abs, err := env.Resolve(p)
		if err != nil {
			t.Fatalf("Rel(%q) worked but Resolve failed: %v", p, err)
		}
		if abs != root && !strings.HasPrefix(abs, root+"/") {
			t.Fatalf("Resolve(%q) = %q: outside %s", p, abs, root)
		}
		// What exists of it, links resolved by the kernel, is inside too.
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != root && !strings.HasPrefix(real, root+"/") {
			t.Fatalf("Resolve(%q) = %q, which is really %q: outside %s", p, abs, real, root)
		}
		if _, data, err := env.ReadFile(p, 1<<10); err == nil && string(data) == "OUTSIDE" {
			t.Fatalf("ReadFile(%q) read a file outside the workspace", p)
		}
	})
}

// FuzzGlobMatch: a match costs bounded time whatever the pattern, a walk
// never prunes a directory a match is under, and on patterns of the common
// syntax the result agrees with a reference built on regexp (RE2, linear
// time). Seeds are in testdata/fuzz/FuzzGlobMatch.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"**/*.go", "a/b/c.go"}, {"*.go", "a/b.go"}, {"a/**", "a/b/c"}, {"**/a/**/a/**/b", "a/a/a/a/b"},
		{"{a,b}/*.{c,h}", "b/x.h"}, {"[!a]?", "bc"}, {"a/[b-d]/e", "a/c/e"}, {`a\*b`, "a*b"},
		{strings.Repeat("**/a/", 12) + "**/b", strings.Repeat("a/", 40) + "b"},
		{"{a,{b,c}}/**/x", "c/y/x"}, {"**", "anything/at/all"}, {"a/**/", "a/b/"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		g, err := compileGlob("pattern", pattern)
		if err != nil {
			return
		}
		start := time.Now()
		matched := g.match(path)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("matching %q against %q took %v", pattern, path, d)
		}
		if matched {
			parts := strings.Split(path, "/")
			for i := 1; i < len(parts); i++ {
				if dir := strings.Join(parts[:i], "/"); !g.mayContain(dir) {
					t.Fatalf("%q matches %q, but a walk would skip %q", pattern, path, dir)
				}
			}
		}
		if re, ok := globRegexp(pattern); ok && validPath(path) && utf8.ValidString(path) {
			if want := re.MatchString(path); want != matched {
				t.Fatalf("%q against %q: matched %v, reference %v (%s)", pattern, path, matched, want, re)
			}
		}
	})
}

// validPath is a path a walk produces: relative, with non-empty segments.
func validPath(p string) bool {
	if p == "" {
		return false
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}

// globRegexp translates a pattern of the common syntax into a regexp: "**"
// only as a whole segment not at the end, "*", "?", non-empty classes of
// plain characters, and "{...}" of plain text. It reports false for
// anything else, which the reference does not cover.
func globRegexp(p string) (*regexp.Regexp, bool) {
	if !utf8.ValidString(p) {
		return nil, false
	}
	var b strings.Builder
	b.WriteString("^")
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		if s == "**" {
			if last {
				return nil, false
			}
			b.WriteString(`(?:[^/]+/)*`)
			continue
		}
		if s == "" || strings.Contains(s, "**") {
			return nil, false
		}
		for j := 0; j < len(s); j++ {
			switch c := s[j]; c {
			case '*':
				b.WriteString(`[^/]*`)
			case '?':
				b.WriteString(`[^/]`)
			case '[':
				end := strings.IndexByte(s[j:], ']')
				if end < 2 {
					return nil, false
				}
				class := s[j+1 : j+end]
				neg := false
				if class[0] == '!' || class[0] == '^' {
					neg, class = true, class[1:]
				}
				if class == "" || strings.ContainsAny(class, `\[-]^!`) {
					return nil, false
				}
				b.WriteString("[")
				if neg {
					b.WriteString("^/")
				}
				b.WriteString(regexp.QuoteMeta(class))
				b.WriteString("]")
				j += end
			case '{':
				end := strings.IndexByte(s[j:], '}')
				if end < 0 {
					return nil, false
				}
				alts := s[j+1 : j+end]
				if strings.ContainsAny(alts, `*?[]{}\`) {
					return nil, false
				}
				b.WriteString("(?:")
				for k, a := range strings.Split(alts, ",") {
					if k > 0 {
						b.WriteString("|")
					}
					b.WriteString(regexp.QuoteMeta(a))
				}
				b.WriteString(")")
				j += end
			case '}', ']', '\\', ',':
				return nil, false
			default:
				_, n := utf8.DecodeRuneInString(s[j:])
				b.WriteString(regexp.QuoteMeta(s[j : j+n]))
				j += n - 1
			}
		}
		if !last {
			b.WriteString("/")
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return re, err == nil
}
