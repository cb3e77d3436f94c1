// Package sandbox confines the agent's commands (contract section 12): a
// bash call, everything it starts, and the stdio MCP servers that ask for
// it reach the workspace, a directory of their own and the system's
// read-only directories, not the server, its data dir or the rest of the
// machine.
//
// Settings are the values a session's commands run under, and Widens the
// one decision of who may change them (an owner widens, anyone narrows).
// A Launcher starts commands under a Spec: on Linux the tandem binary
// itself, re-executed as a helper (Main) that confines itself with
// Landlock, seccomp and namespaces, then executes the command; elsewhere,
// and where the kernel lacks what it needs, a confined command does not
// run at all.
package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Modes of the sandbox setting.
const (
	// ModeWorkspace reads and writes the workspace (the default).
	ModeWorkspace = "workspace"
	// ModeReadOnly is ModeWorkspace with the workspace read-only.
	ModeReadOnly = "read-only"
	// ModeOff runs commands unconfined.
	ModeOff = "off"
)

// Modes lists the modes, narrowest first.
var Modes = []string{ModeReadOnly, ModeWorkspace, ModeOff}

// Bounds of the path lists, so that one setting cannot make every command
// start slowly or a body carry an unbounded policy.
const (
	MaxPaths   = 64
	MaxPathLen = 4096
)

// Settings are what a session's commands may touch beyond the default
// policy. The zero Settings are the defaults: ModeWorkspace, no network,
// no extra paths.
type Settings struct {
	// Mode is ModeWorkspace, ModeReadOnly or ModeOff ("" is ModeWorkspace).
	Mode string `json:"sandbox,omitempty"`
	// Network lets commands open TCP connections, listen, and reach Unix
	// sockets outside the workspace.
	Network bool `json:"sandbox_network,omitempty"`
	// Read and Write are absolute paths commands may also read, or read
	// and write.
	Read  []string `json:"sandbox_read,omitempty"`
	Write []string `json:"sandbox_write,omitempty"`
}

// Normal returns s with its mode spelled out and its paths cleaned,
// sorted and without duplicates, so equal settings compare equal.
func (s Settings) Normal() Settings {
	if s.Mode == "" {
		s.Mode = ModeWorkspace
	}
	s.Read = normalPaths(s.Read)
	s.Write = normalPaths(s.Write)
	return s
}

func normalPaths(in []string) []string {
	if len(in) == 0 {
		return []string{}
	}
	out := make([]string, len(in))
	for i, p := range in {
		out[i] = filepath.Clean(p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Validate checks s; field names the key in errors (a session body's or a
// file's).
func (s Settings) Validate() error {
	if s.Mode != "" && !slices.Contains(Modes, s.Mode) {
		return fmt.Errorf("sandbox must be one of %s, got %q", strings.Join(Modes, ", "), s.Mode)
	}
	if err := ValidPaths("sandbox_read", s.Read); err != nil {
		return err
	}
	return ValidPaths("sandbox_write", s.Write)
}

// ValidPaths checks a path list: bounded, each absolute, without NUL.
func ValidPaths(key string, paths []string) error {
	if len(paths) > MaxPaths {
		return fmt.Errorf("%s has %d paths; at most %d are allowed", key, len(paths), MaxPaths)
	}
	for i, p := range paths {
		switch {
		case len(p) > MaxPathLen:
			return fmt.Errorf("%s[%d] is %d bytes long, more than %d", key, i, len(p), MaxPathLen)
		case strings.ContainsRune(p, 0):
			return fmt.Errorf("%s[%d] must not contain a NUL character", key, i)
		case !filepath.IsAbs(p):
			return fmt.Errorf("%s[%d] must be an absolute path, got %q", key, i, p)
		}
	}
	return nil
}

// rank orders the modes by what they allow.
func rank(mode string) int {
	switch mode {
	case ModeReadOnly:
		return 0
	case ModeOff:
		return 2
	}
	return 1 // workspace, and "" which is workspace
}

// Widens reports whether s allows anything old does not: a wider mode
// (read-only to workspace, either to off), the network turned on, or a
// path to read or write that old's lists do not already cover. Widening
// is an owner's (contract section 9); narrowing is anyone's.
func (s Settings) Widens(old Settings) bool {
	if rank(s.Mode) > rank(old.Mode) {
		return true
	}
	if s.Network && !old.Network {
		return true
	}
	for _, p := range s.Write {
		if !covered(p, old.Write) {
			return true
		}
	}
	for _, p := range s.Read {
		if !covered(p, old.Read) && !covered(p, old.Write) {
			return true
		}
	}
	return false
}

// WideningKeys names the keys of s that widen old, in the order of the
// contract; none when s does not widen old.
func (s Settings) WideningKeys(old Settings) []string {
	var keys []string
	if rank(s.Mode) > rank(old.Mode) {
		keys = append(keys, "sandbox")
	}
	if s.Network && !old.Network {
		keys = append(keys, "sandbox_network")
	}
	if (Settings{Read: s.Read}).Widens(Settings{Read: old.Read, Write: old.Write}) {
		keys = append(keys, "sandbox_read")
	}
	if (Settings{Write: s.Write}).Widens(Settings{Write: old.Write}) {
		keys = append(keys, "sandbox_write")
	}
	return keys
}

// covered reports whether p is one of list or inside one of them.
func covered(p string, list []string) bool {
	p = filepath.Clean(p)
	for _, q := range list {
		q = filepath.Clean(q)
		if p == q || strings.HasPrefix(p, strings.TrimSuffix(q, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// Patch is a change of some settings: the fields given (non-nil) replace
// the current values.
type Patch struct {
	Mode    *string   `json:"sandbox,omitempty"`
	Network *bool     `json:"sandbox_network,omitempty"`
	Read    *[]string `json:"sandbox_read,omitempty"`
	Write   *[]string `json:"sandbox_write,omitempty"`
}

// Empty reports whether p changes nothing.
func (p Patch) Empty() bool {
	return p.Mode == nil && p.Network == nil && p.Read == nil && p.Write == nil
}

// Validate checks the values p gives.
func (p Patch) Validate() error {
	var s Settings
	if p.Mode != nil {
		if *p.Mode == "" {
			return fmt.Errorf("sandbox must be one of %s, got \"\"", strings.Join(Modes, ", "))
		}
		s.Mode = *p.Mode
	}
	if p.Read != nil {
		s.Read = *p.Read
	}
	if p.Write != nil {
		s.Write = *p.Write
	}
	return s.Validate()
}

// Apply returns s with p's fields.
func (p Patch) Apply(s Settings) Settings {
	if p.Mode != nil {
		s.Mode = *p.Mode
	}
	if p.Network != nil {
		s.Network = *p.Network
	}
	if p.Read != nil {
		s.Read = slices.Clone(*p.Read)
	}
	if p.Write != nil {
		s.Write = slices.Clone(*p.Write)
	}
	return s
}
