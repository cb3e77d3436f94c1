package tools

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

const (
	gitDir        = ".git"
	gitignoreName = ".gitignore"
	// ignoreMaxFile bounds the part of a .gitignore file that is read; real
	// ones are a few kilobytes, and every entry of a walk is matched against
	// every pattern.
	ignoreMaxFile = 256 << 10
)

// ignoreRules decide what ls, glob and grep skip: what the workspace's
// .gitignore files ignore, and .git directories. They are a stack of the
// patterns of the .gitignore files from the root down to the directory being
// looked at; each pattern applies below the directory of its file (its
// domain, root-relative), and a later (deeper) pattern wins over an earlier
// one, as in git.
type ignoreRules struct {
	patterns []gitignore.Pattern
	// keepGit is set when the call names a path inside .git (or a glob
	// pattern mentions it): then .git is searched like anything else.
	keepGit bool
	// hidden counts the entries skipped, so the model can be told.
	hidden int
}

// ignoreRulesFor returns the rules for a look at the resolved directory dir:
// the .gitignore files of the root and of every directory down to dir's
// parent. When dir itself is ignored, the call named an ignored path on
// purpose: then only the .gitignore files inside it apply. dir's own
// .gitignore is loaded by the caller as it enters dir.
func (sp *space) ignoreRulesFor(dir string) *ignoreRules {
	r := &ignoreRules{}
	if dir == "." {
		return r
	}
	r.load(sp.root, gitignoreName, nil)
	parts := strings.Split(dir, "/")
	for i, p := range parts {
		if p == gitDir {
			r.keepGit = true
		}
		if r.ignored(parts[:i+1], true) {
			// Named on purpose: what is above it no longer applies.
			r.patterns = nil
			return r
		}
		if i < len(parts)-1 {
			r.load(sp.root, osPath(strings.Join(parts[:i+1], "/")+"/"+gitignoreName), parts[:i+1])
		}
	}
	return r
}

// load reads the .gitignore of the directory at parts (root-relative) as name
// through d (the workspace root, or that directory's own), and adds its
// patterns. It returns how many it added, for pop.
func (r *ignoreRules) load(d *os.Root, name string, parts []string) int {
	f, err := d.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	data, err := io.ReadAll(io.LimitReader(f, ignoreMaxFile))
	if err != nil {
		return 0
	}
	domain := append([]string(nil), parts...)
	n := 0
	for line := range bytes.Lines(data) {
		s := strings.TrimRight(string(line), "\r\n")
		if s == "" || strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		r.patterns = append(r.patterns, gitignore.ParsePattern(s, domain))
		n++
	}
	return n
}

// pop drops the last n patterns, when a walk leaves their directory.
func (r *ignoreRules) pop(n int) { r.patterns = r.patterns[:len(r.patterns)-n] }

// ignored reports whether the entry at the root-relative parts is skipped.
// The last pattern that matches decides, as in git.
func (r *ignoreRules) ignored(parts []string, isDir bool) bool {
	if !r.keepGit && parts[len(parts)-1] == gitDir {
		return true
	}
	for i := len(r.patterns) - 1; i >= 0; i-- {
		switch r.patterns[i].Match(parts, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

// skip is ignored, counting what it skips other than .git, which is in
// every repository and needs no mention.
func (r *ignoreRules) skip(parts []string, isDir bool) bool {
	if !r.ignored(parts, isDir) {
		return false
	}
	if parts[len(parts)-1] != gitDir {
		r.hidden++
	}
	return true
}

// hiddenNote tells the model that a search that found nothing skipped
// ignored paths, and how to search them.
func hiddenNote(r *ignoreRules) string {
	if r == nil || r.hidden == 0 {
		return ""
	}
	return fmt.Sprintf(" [%d paths ignored by .gitignore were skipped; give one as path to search it]", r.hidden)
}
