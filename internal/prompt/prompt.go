// Package prompt builds the system prompt Tandem sends to the model: a default
// made of named sections, which a session's system_message can extend, replace
// or edit section by section (contract, section 4).
package prompt

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/proto"
)

// Env is what the environment section tells the model. Empty fields are left
// out rather than guessed, so Build stays deterministic for a given input.
type Env struct {
	// WorkspacePath is the workspace root the tools resolve paths against.
	WorkspacePath string
	// OS is the operating system the tools run on, e.g. runtime.GOOS.
	OS string
	// Date is "today"; it is printed in its own location, so the caller
	// decides whose day it is.
	Date time.Time
	// Tools names the tools offered in this request, after the session's
	// allow and deny lists, so the model knows which of the tools the prompt
	// describes it may actually call.
	Tools []string
	// ProjectInstructions are the workspace's AGENTS.md (or CLAUDE.md),
	// read when the run started (ReadInstructions); empty: no section.
	ProjectInstructions Instructions
}

// Section ids, as clients name them in system_message.sections.
const (
	Identity        = "identity"
	Tone            = "tone"
	ToolUsage       = "tool_usage"
	CodeChangeRules = "code_change_rules"
	Environment     = "environment"
	Guidelines      = "guidelines"
	// ProjectInstructions is the project's AGENTS.md or CLAUDE.md. It
	// comes before safety, so that a repository's text cannot have the
	// last word over it.
	ProjectInstructions = "project_instructions"
	Safety              = "safety"
)

// order is the source of truth for section order; Sections is an exported
// copy so that a caller who mutates it cannot change what Build produces.
var order = [...]string{Identity, Tone, ToolUsage, CodeChangeRules, Environment, Guidelines, ProjectInstructions, Safety}

// Sections lists the section ids in prompt order. Treat it as read-only; Build
// and Validate do not depend on it.
var Sections = order[:]

// Modes and actions of proto.SystemMessage.
const (
	ModeAppend    = "append"
	ModeReplace   = "replace"
	ModeCustomize = "customize"

	ActionReplace = "replace"
	ActionRemove  = "remove"
	ActionAppend  = "append"
	ActionPrepend = "prepend"
)

var (
	modes   = []string{ModeAppend, ModeReplace, ModeCustomize}
	actions = []string{ActionReplace, ActionRemove, ActionAppend, ActionPrepend}
)

// sep separates sections and appended content: a blank line keeps markdown
// headings and paragraphs apart whatever the pieces end with.
const sep = "\n\n"

// Build returns the one system message for a session. m may be nil (the
// default prompt).
//
// m is expected to have passed Validate. Build still never fails, because a
// session stored by an older server must keep a usable prompt: an unknown
// mode is treated as append, and unknown sections or actions are ignored.
// Empty pieces are skipped rather than joined, so an empty content never
// leaves a stray blank line; replace mode is the exception and returns its
// content byte for byte, even when empty.
func Build(m *proto.SystemMessage, env Env) string {
	if m == nil {
		return join(defaultSections(env)...)
	}
	switch m.Mode {
	case ModeReplace:
		return m.Content
	case ModeCustomize:
		secs := defaultSections(env)
		out := make([]string, 0, len(secs)+1)
		for i, id := range order {
			text := secs[i]
			if o, ok := m.Sections[id]; ok {
				switch o.Action {
				case ActionReplace:
					text = o.Content
				case ActionRemove:
					text = ""
				case ActionAppend:
					text = join(text, o.Content)
				case ActionPrepend:
					text = join(o.Content, text)
				}
			}
			out = append(out, text)
		}
		return join(append(out, m.Content)...)
	default:
		return join(append(defaultSections(env), m.Content)...)
	}
}

// Validate returns a descriptive error for an unknown mode, section or action
// (an invalid_argument apierr.Error, which the HTTP layer answers with 400).
// nil is valid: it means the default prompt. Sections are only meaningful in
// customize mode; elsewhere they are rejected rather than silently ignored,
// since a client sending them clearly expects them to take effect.
func Validate(m *proto.SystemMessage) error {
	if m == nil {
		return nil
	}
	if !slices.Contains(modes, m.Mode) {
		return apierr.Invalid("system_message.mode must be one of %s, got %q", strings.Join(modes, ", "), m.Mode)
	}
	// Sorted so that the same bad request always gets the same message.
	ids := make([]string, 0, len(m.Sections))
	for id := range m.Sections {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !slices.Contains(order[:], id) {
			return apierr.Invalid("system_message.sections: unknown section %q (known: %s)", id, strings.Join(order[:], ", "))
		}
		if a := m.Sections[id].Action; !slices.Contains(actions, a) {
			return apierr.Invalid("system_message.sections.%s.action must be one of %s, got %q", id, strings.Join(actions, ", "), a)
		}
	}
	if len(m.Sections) > 0 && m.Mode != ModeCustomize {
		return apierr.Invalid("system_message.sections need mode %q, got %q", ModeCustomize, m.Mode)
	}
	return nil
}

// defaultSections returns the default text of each section, in order.
func defaultSections(env Env) []string {
	return []string{identityText, toneText, toolUsageText, codeChangeRulesText, environmentText(env), guidelinesText, projectInstructionsText(env.ProjectInstructions), safetyText}
}

// join concatenates the non-empty pieces with sep.
func join(pieces ...string) string {
	var b strings.Builder
	// Sized up front: every model step builds a prompt of several KB, and
	// growing the builder as it goes allocated twice that.
	n := 0
	for _, p := range pieces {
		n += len(p) + len(sep)
	}
	b.Grow(n)
	for _, p := range pieces {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p)
	}
	return b.String()
}

// environmentText renders the only section that depends on the request.
func environmentText(env Env) string {
	var b strings.Builder
	b.WriteString("# Environment")
	if env.WorkspacePath != "" {
		fmt.Fprintf(&b, "\n- Workspace root: %s", oneLine(env.WorkspacePath))
	}
	if env.OS != "" {
		fmt.Fprintf(&b, "\n- Operating system: %s", oneLine(env.OS))
	}
	if !env.Date.IsZero() {
		fmt.Fprintf(&b, "\n- Today's date: %s", env.Date.Format(time.DateOnly))
	}
	if len(env.Tools) > 0 {
		names := make([]string, len(env.Tools))
		for i, t := range env.Tools {
			names[i] = oneLine(t)
		}
		fmt.Fprintf(&b, "\n- Tools available now: %s", strings.Join(names, ", "))
	}
	if b.Len() == len("# Environment") {
		return ""
	}
	return b.String()
}

// oneLine keeps a value on its bullet: a newline in a directory name must not
// be able to start a line of its own in the system prompt.
// Every run builds its system prompt, so the common case (no line break)
// returns s without building anything.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", " ")
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
