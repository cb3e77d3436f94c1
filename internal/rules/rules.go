// Package rules decides tool calls by permission rules (contract section 7):
// an ordered list of patterns over a call's tool name, bash command and
// workspace-relative path, where the first rule that matches a call decides
// it, before the session's permission mode is consulted.
//
// Patterns use one wildcard: `*` matches any run of characters, `/` included;
// every other character matches itself. Two refinements keep a rule from
// deciding more than its author meant, because a bash command is a small
// program and not a single word:
//
//   - An allow rule's command pattern never lets a `*` span a shell operator
//     (; & | < > ( ) ` or a line break). "git status*" approves
//     "git status --short" but not "git status; rm -rf ~" nor
//     "git status > notes.txt"; those fall through to later rules and to the
//     permission mode. An operator written in the pattern itself matches
//     itself as usual.
//   - A deny or ask rule's command pattern matches the whole command or any of
//     the simple commands in it (split at those operators), so "rm *" also
//     denies "cd /tmp && rm -rf x". This is a guard against the obvious, not a
//     sandbox: a command can always hide what it runs (bash -c, find -delete).
//
// Commands are matched with surrounding white space trimmed; paths are
// matched cleaned (path.Clean, slash-separated).
package rules

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Decisions a rule can make.
const (
	Allow = "allow"
	Ask   = "ask"
	Deny  = "deny"
)

// MaxRules bounds a rule list.
const MaxRules = 1000

// Rule is one permission rule as the configuration file states it. Command
// and Path are empty when the rule does not constrain them; a rule that
// constrains one only matches calls that have that argument.
type Rule struct {
	Tool     string `json:"tool"`
	Command  string `json:"command,omitempty"`
	Path     string `json:"path,omitempty"`
	Decision string `json:"decision"`
}

// Call is what a rule is matched against.
type Call struct {
	// Tool is the name the model called: "bash", "edit", "mcp__git__status".
	Tool string
	// Command is the bash command, when HasCommand.
	Command    string
	HasCommand bool
	// Path is the path the call touches, relative to the workspace root
	// (symlinks resolved, as the tool itself will use it), when HasPath.
	Path    string
	HasPath bool
}

// CallOf builds the Call of a tool call from its JSON arguments: a string
// "command" is its command, a string "path" its path, which rel makes
// workspace-relative (the path the tool will really use, symlinks resolved;
// ok false when it is outside the workspace, and then only deny and ask
// rules can match it). A nil rel keeps the path as given. Arguments that
// are not a JSON object give a Call with neither.
func CallOf(tool string, args json.RawMessage, rel func(string) (string, bool)) Call {
	c := Call{Tool: tool}
	var a struct {
		Command *string `json:"command"`
		Path    *string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil {
		return c
	}
	if a.Command != nil {
		c.Command, c.HasCommand = *a.Command, true
	}
	if a.Path != nil {
		c.Path, c.HasPath = *a.Path, true
		if rel != nil {
			if r, ok := rel(*a.Path); ok {
				c.Path = r
			} else {
				// Outside: keep a form no allow rule accepts.
				c.Path = "../" + strings.TrimPrefix(*a.Path, "/")
			}
		}
	}
	return c
}

// Match is the rule that decided a call.
type Match struct {
	// Decision is Allow, Ask or Deny.
	Decision string
	// Index is the rule's position in the list given to Compile.
	Index int
	// Rule is the rule as given.
	Rule Rule
}

// Set is a compiled rule list. The nil *Set has no rules. A Set is
// immutable and safe for concurrent use.
type Set struct {
	rules []compiled
}

type compiled struct {
	rule    Rule
	tool    Pattern
	command Pattern // zero when the rule has no command
	path    Pattern // zero when the rule has no path
}

// Compile checks and compiles rules in order. An error names the rule
// (permissions[I]) and the field at fault.
func Compile(rs []Rule) (*Set, error) {
	if len(rs) > MaxRules {
		return nil, fmt.Errorf("permissions: %d rules, more than %d", len(rs), MaxRules)
	}
	s := &Set{rules: make([]compiled, 0, len(rs))}
	for i, r := range rs {
		c, err := compileRule(r)
		if err != nil {
			return nil, fmt.Errorf("permissions[%d].%w", i, err)
		}
		s.rules = append(s.rules, c)
	}
	return s, nil
}

// FieldError is a rule that cannot be compiled, and the field at fault.
type FieldError struct {
	// Field is the JSON name of the field: tool, command, path or decision.
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Check reports whether the rule compiles; an error is a *FieldError.
func (r Rule) Check() error {
	_, err := compileRule(r)
	return err
}

func compileRule(r Rule) (compiled, error) {
	c := compiled{rule: r}
	switch r.Decision {
	case Allow, Ask, Deny:
	default:
		return c, &FieldError{"decision", fmt.Errorf("%q is not allow, ask or deny", r.Decision)}
	}
	var err error
	if c.tool, err = CompilePattern(r.Tool); err != nil {
		return c, &FieldError{"tool", err}
	}
	if r.Command != "" {
		if r.Decision == Allow {
			c.command, err = compileCommandAllow(r.Command)
		} else {
			c.command, err = CompilePattern(r.Command)
		}
		if err != nil {
			return c, &FieldError{"command", err}
		}
	}
	if r.Path != "" {
		if c.path, err = CompilePattern(r.Path); err != nil {
			return c, &FieldError{"path", err}
		}
	}
	return c, nil
}

// Then returns the rules of s followed by those of next: s's decide first.
// Either may be nil.
func (s *Set) Then(next *Set) *Set {
	switch {
	case s.Len() == 0:
		return next
	case next.Len() == 0:
		return s
	}
	return &Set{rules: append(append(make([]compiled, 0, s.Len()+next.Len()), s.rules...), next.rules...)}
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Decide returns the first rule that matches call; ok is false when none
// does and the permission mode decides.
func (s *Set) Decide(call Call) (m Match, ok bool) {
	if s == nil || len(s.rules) == 0 {
		return Match{}, false
	}
	var command string
	var parts []string
	if call.HasCommand {
		command = strings.TrimSpace(call.Command)
	}
	var cleanPath string
	if call.HasPath {
		cleanPath = cleanRel(call.Path)
	}
	for i, r := range s.rules {
		if !r.tool.Match(call.Tool) {
			continue
		}
		if r.rule.Command != "" {
			if !call.HasCommand {
				continue
			}
			if r.rule.Decision == Allow {
				if !r.command.Match(command) {
					continue
				}
			} else {
				if parts == nil {
					parts = simpleCommands(command)
				}
				if !r.command.Match(command) && !matchAny(r.command, parts) {
					continue
				}
			}
		}
		if r.rule.Path != "" {
			if !call.HasPath {
				continue
			}
			// A path that leaves the workspace is never approved by a rule;
			// the tool itself refuses it, and a deny or ask rule may still
			// name it.
			if r.rule.Decision == Allow && escapes(cleanPath) {
				continue
			}
			if !r.path.Match(cleanPath) {
				continue
			}
		}
		return Match{Decision: r.rule.Decision, Index: i, Rule: r.rule}, true
	}
	return Match{}, false
}

func matchAny(p Pattern, parts []string) bool {
	for _, s := range parts {
		if p.Match(s) {
			return true
		}
	}
	return false
}

// simpleCommands splits a command at shell operators, ignoring quotes: a
// quoted operator splits too, which can only make a deny rule match more.
// Leading grouping and negation characters are dropped from each part.
func simpleCommands(command string) []string {
	fields := strings.FieldsFunc(command, func(r rune) bool {
		return strings.ContainsRune(shellOperators, r)
	})
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		f = strings.TrimLeft(strings.TrimSpace(f), "{}! \t")
		f = strings.TrimSpace(f)
		if f != "" {
			parts = append(parts, f)
		}
	}
	return parts
}

// cleanRel cleans a workspace-relative path the way rules see it.
func cleanRel(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

func escapes(clean string) bool {
	return strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../")
}
