// Package config reads Tandem's configuration files (contract section 1): a
// server-wide file and a per-workspace WORKSPACE/.tandem/config.json, both
// JSON with exactly the keys model, providers, models, mcp_servers and
// permissions. Reading is strict: an unknown key, a key given twice or a bad
// value is an *Error naming the file, the key as a JSON path
// (mcp_servers.git.command), its line and column, and why.
//
// The workspace file wins key by key over the server file:
//
//   - model: the workspace's, when it sets one.
//   - providers, models, mcp_servers: merged by name (by PROVIDER/MODEL for
//     models); an entry the workspace names replaces the server's entry of
//     that name whole, never field by field, so that a base_url from one
//     file is never paired with the api_key_env of another.
//   - permissions: the workspace's rules first, then the server's. The first
//     rule that matches decides, so a workspace rule overrides a server rule
//     for the calls it matches, and the server's rules still decide the rest.
//
// Flags and environment variables win over both files; Config.DefaultModel
// and Config.ResolveModel apply that order. No secret is ever in a file: a
// provider names the environment variable holding its key (api_key_env), and
// an MCP server's args, env values and header values may say ${NAME} to take
// a variable's value when the server starts (Expand).
//
// A workspace's file comes with the project, and the project may come from
// anyone (a cloned repository): it must not be able to send the user's keys
// elsewhere. So a workspace file may not name a key variable (api_key_env),
// may not give a base_url to a provider named openai, azure or anthropic
// (whose key is the server's OPENAI_API_KEY, AZURE_OPENAI_API_KEY or
// ANTHROPIC_API_KEY), and may not put a ${NAME} reference in an http MCP
// server's headers. Each is an error naming the file and the key
// (ParseWorkspace). What a workspace file may still do, and what its user
// must know before opening a project they do not trust, is start its own
// stdio MCP servers (programs of the project) and approve tool calls with
// allow rules.
package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tandem-dev/tandem/internal/models"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/rules"
	"github.com/tandem-dev/tandem/internal/sandbox"
)

// MaxFileSize bounds a configuration file.
const MaxFileSize = 1 << 20

// Limits on what one file may hold; far above any real configuration.
const (
	maxEntries   = 256  // providers, models, MCP servers, env, headers, args, tools
	maxNameLen   = 64   // provider names
	maxServerLen = 32   // MCP server names: mcp__NAME__TOOL must fit 64 bytes
	maxStringLen = 4096 // URLs, commands, model strings
	maxValueLen  = 16 << 10
)

// MCP server transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Provider is a named model provider. A model string "NAME/MODEL" uses it.
type Provider struct {
	// Type is openai (any OpenAI-compatible server), azure or anthropic.
	Type string `json:"type"`
	// BaseURL is the API's URL; "" for the type's default.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable that holds the API key.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Source is the file the entry came from.
	Source string `json:"-"`
}

// Model is what the configuration says about one model. Zero (or nil) means
// not said.
type Model struct {
	ContextWindow   int64 `json:"context_window,omitempty"`
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// Prices in USD per million tokens.
	InputPrice  *float64 `json:"input_price,omitempty"`
	OutputPrice *float64 `json:"output_price,omitempty"`
	// Source is the file the entry came from.
	Source string `json:"-"`
}

// MCPServer is an MCP server to start for a workspace (contract section 7).
type MCPServer struct {
	// Type is stdio or http.
	Type string `json:"type"`
	// Command, Args and Env start a stdio server. Command is a program name
	// looked up in PATH, an absolute path, or a path with a slash relative
	// to the workspace root (where the server runs). Env is added to the
	// server's environment.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach an http server (MCP streamable HTTP).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Tools are patterns (* matches any run of characters) over the
	// server's own tool names; nil offers every tool.
	Tools []string `json:"tools,omitempty"`
	// Sandbox, for a stdio server, confines it as the agent's commands
	// are ("workspace" or "read-only"); "" runs it unconfined.
	Sandbox string `json:"sandbox,omitempty"`
	// Source is the file the entry came from ("" for a session's own).
	Source string `json:"-"`
}

// Permission is a permission rule and the file it came from.
type Permission struct {
	rules.Rule
	Source string `json:"-"`
}

// File is one configuration file, read and checked on its own.
type File struct {
	// Path is the file's path as given.
	Path        string
	Model       string
	Providers   map[string]Provider
	Models      map[string]Model
	MCPServers  map[string]MCPServer
	Permissions []rules.Rule
	// Sandbox are the file's sandbox keys (contract section 12).
	Sandbox sandbox.Patch
	// workspace marks a workspace's file, which may only narrow Sandbox.
	workspace bool
	// WorkspaceRoots are the directories members may open workspaces in
	// (contract section 9): absolute, cleaned, the server's file only.
	WorkspaceRoots []string

	data []byte
	// refs are the places that name a provider, checked once every file
	// is merged.
	refs []providerRef
}

type providerRef struct {
	model string // the model string that names it
	key   string // JSON path
	off   int
}

// Config is the configuration a workspace runs with: the server file and
// the workspace file merged. The zero Config (and a nil *Config) is an empty
// configuration. A Config is not modified after Merge returns it.
type Config struct {
	Model       string               `json:"model,omitempty"`
	Providers   map[string]Provider  `json:"providers,omitempty"`
	Models      map[string]Model     `json:"models,omitempty"`
	MCPServers  map[string]MCPServer `json:"mcp_servers,omitempty"`
	Permissions []Permission         `json:"permissions,omitempty"`
	// Sandbox is what the agent's commands may touch, unless a session
	// says otherwise.
	Sandbox sandbox.Settings `json:"sandbox,omitempty"`
	// ModelSource is the file Model came from.
	ModelSource string `json:"-"`

	rules *rules.Set
	// catalog is the model catalog of Models (Catalog).
	catalog *models.Catalog
}

// Rules is the compiled permission list, workspace rules first.
func (c *Config) Rules() *rules.Set {
	if c == nil {
		return nil
	}
	return c.rules
}

// Parse reads data as the server's configuration file at path (named in
// errors). Errors are an Errors list of *Error.
func Parse(path string, data []byte) (*File, error) {
	return parse(path, data, false)
}

// ParseWorkspace reads data as a workspace's configuration file at path:
// Parse, and what could send the user's keys elsewhere refused (see the
// package documentation).
func ParseWorkspace(path string, data []byte) (*File, error) {
	return parse(path, data, true)
}

func parse(path string, data []byte, workspace bool) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, Errors{{File: path, Reason: fmt.Sprintf("file is %d bytes, more than %d", len(data), MaxFileSize)}}
	}
	c := &checker{file: path, data: data, workspace: workspace}
	root, err := parseTree(data)
	if err != nil {
		se := err.(*syntaxError)
		c.add(se.off, "", "%s", se.msg)
		return nil, c.errs
	}
	f := &File{Path: path, data: data, workspace: workspace}
	f.check(c, root)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return f, nil
}

var topKeys = []string{"model", "providers", "models", "mcp_servers", "permissions", "workspace_roots", "sandbox", "sandbox_network", "sandbox_read", "sandbox_write"}

func (f *File) check(c *checker, root *node) {
	top, ok := c.object(root, "", topKeys...)
	if !ok {
		return
	}
	if n := top["model"]; n != nil {
		if s, ok := c.nonEmpty(n, "model", maxStringLen); ok {
			if _, err := splitModel(s, true); err != nil {
				c.add(n.off, "model", "%v", err)
			} else {
				f.Model = s
				f.refs = append(f.refs, providerRef{model: s, key: "model", off: n.off})
			}
		}
	}
	if n := top["providers"]; n != nil {
		f.Providers = make(map[string]Provider)
		for _, m := range c.entries(n, "providers", maxEntries) {
			key := keyPath("providers", m.key)
			if err := checkProviderName(m.key); err != nil {
				c.add(m.keyOff, key, "%v", err)
				continue
			}
			if p, ok := checkProvider(c, m.key, m.val, key); ok {
				p.Source = f.Path
				f.Providers[m.key] = p
			}
		}
	}
	if n := top["models"]; n != nil {
		f.Models = make(map[string]Model)
		for _, m := range c.entries(n, "models", maxEntries) {
			key := keyPath("models", m.key)
			// "echo" names every echo model (its window sizes them all).
			if _, err := splitModel(m.key, true); err != nil {
				c.add(m.keyOff, key, "%v", err)
				continue
			}
			if md, ok := checkModel(c, m.val, key); ok {
				md.Source = f.Path
				f.Models[m.key] = md
				f.refs = append(f.refs, providerRef{model: m.key, key: key, off: m.keyOff})
			}
		}
	}
	if n := top["mcp_servers"]; n != nil {
		f.MCPServers = checkMCPServers(c, n, "mcp_servers", f.Path)
	}
	if n := top["permissions"]; n != nil {
		f.Permissions = checkPermissions(c, n, "permissions")
	}
	if n := top["workspace_roots"]; n != nil {
		f.WorkspaceRoots = checkRoots(c, n)
	}
	f.Sandbox = checkSandbox(c, top)
}

// checkRoots reads workspace_roots: absolute directories, which only the
// server's file may name, since whoever can write a workspace can write its
// file, and a root there would let members open anything.
func checkRoots(c *checker, n *node) []string {
	if c.workspace {
		c.add(n.off, "workspace_roots", "only the server's configuration file may set workspace_roots")
		return nil
	}
	elems, _ := c.array(n, "workspace_roots", maxEntries)
	roots := make([]string, 0, len(elems))
	for i, e := range elems {
		p := indexPath("workspace_roots", i)
		s, ok := c.nonEmpty(e, p, maxStringLen)
		if !ok {
			continue
		}
		if !filepath.IsAbs(s) {
			c.add(e.off, p, "%s is not an absolute path", quote(s))
			continue
		}
		roots = append(roots, filepath.Clean(s))
	}
	return roots
}

var providerKeys = []string{"type", "base_url", "api_key_env"}

func checkProvider(c *checker, name string, n *node, path string) (Provider, bool) {
	var p Provider
	if n.kind == 'o' {
		for _, m := range n.members {
			if m.key == "api_key" || m.key == "apiKey" || m.key == "key" {
				c.add(m.keyOff, keyPath(path, m.key), "keys are never kept in the configuration file; put the key in an environment variable and name it with api_key_env")
				return p, false
			}
		}
	}
	fields, ok := c.object(n, path, providerKeys...)
	if !ok {
		return p, false
	}
	errs := len(c.errs)
	if t := fields["type"]; t == nil {
		c.add(n.off, keyPath(path, "type"), "is required: openai, azure or anthropic")
	} else if s, ok := c.str(t, keyPath(path, "type"), maxNameLen); ok {
		switch s {
		case provider.TypeOpenAI, provider.TypeAzure, provider.TypeAnthropic:
			if isBuiltinProvider(name) && name != s {
				c.add(t.off, keyPath(path, "type"), "a provider named %s must have type %s (name it otherwise for a %s provider)", name, name, s)
			}
			p.Type = s
		default:
			c.add(t.off, keyPath(path, "type"), "%s is not openai, azure or anthropic", quote(s))
		}
	}
	if u := fields["base_url"]; u != nil {
		if s, ok := c.nonEmpty(u, keyPath(path, "base_url"), maxStringLen); ok {
			if err := checkURL(s); err != nil {
				c.add(u.off, keyPath(path, "base_url"), "%v", err)
			} else if c.workspace && isBuiltinProvider(name) {
				c.add(u.off, keyPath(path, "base_url"), "is not allowed in a workspace's file for provider %s, whose key is the server's %s: the project's file would send that key to its URL; set it in your own configuration file (--config), or name the provider otherwise (it then gets no key)", name, provider.KeyVariable(name))
			}
			p.BaseURL = s
		}
	}
	if e := fields["api_key_env"]; e != nil {
		if s, ok := c.nonEmpty(e, keyPath(path, "api_key_env"), maxStringLen); ok {
			if c.workspace {
				c.add(e.off, keyPath(path, "api_key_env"), "is not allowed in a workspace's file: the project's file could send any of your keys to any URL; define this provider in your own configuration file (--config)")
			} else if !validEnvName(s) {
				c.add(e.off, keyPath(path, "api_key_env"), "%s is not an environment variable name (letters, digits and _; the name of the variable holding the key, never the key itself)", quote(s))
			}
			p.APIKeyEnv = s
		}
	}
	return p, len(c.errs) == errs
}

var modelKeys = []string{"context_window", "max_output_tokens", "input_price", "output_price"}

// Bounds of a model's numbers: a window of 100 million tokens and a price of
// a million dollars per million tokens are past anything real.
const (
	maxTokens = 100_000_000
	maxPrice  = 1_000_000
)

func checkModel(c *checker, n *node, path string) (Model, bool) {
	var m Model
	fields, ok := c.object(n, path, modelKeys...)
	if !ok {
		return m, false
	}
	errs := len(c.errs)
	if v := fields["context_window"]; v != nil {
		m.ContextWindow, _ = c.integer(v, keyPath(path, "context_window"), 1, maxTokens)
	}
	if v := fields["max_output_tokens"]; v != nil {
		if t, ok := c.integer(v, keyPath(path, "max_output_tokens"), 1, maxTokens); ok {
			if m.ContextWindow > 0 && t > m.ContextWindow {
				c.add(v.off, keyPath(path, "max_output_tokens"), "%d is more than context_window (%d)", t, m.ContextWindow)
			}
			m.MaxOutputTokens = t
		}
	}
	for _, k := range []string{"input_price", "output_price"} {
		if v := fields[k]; v != nil {
			if f, ok := c.number(v, keyPath(path, k), 0, maxPrice); ok {
				if k == "input_price" {
					m.InputPrice = &f
				} else {
					m.OutputPrice = &f
				}
			}
		}
	}
	return m, len(c.errs) == errs
}

var permissionKeys = []string{"tool", "command", "path", "decision"}

func checkPermissions(c *checker, n *node, path string) []rules.Rule {
	elems, ok := c.array(n, path, rules.MaxRules)
	if !ok {
		return nil
	}
	out := make([]rules.Rule, 0, len(elems))
	for i, e := range elems {
		ipath := indexPath(path, i)
		fields, ok := c.object(e, ipath, permissionKeys...)
		if !ok {
			continue
		}
		errs := len(c.errs)
		var r rules.Rule
		for _, k := range permissionKeys {
			v := fields[k]
			if v == nil {
				if k == "tool" || k == "decision" {
					c.add(e.off, keyPath(ipath, k), "is required")
				}
				continue
			}
			s, ok := c.nonEmpty(v, keyPath(ipath, k), rules.MaxPatternLen)
			if !ok {
				continue
			}
			switch k {
			case "tool":
				r.Tool = s
			case "command":
				r.Command = s
			case "path":
				r.Path = s
			case "decision":
				r.Decision = s
			}
		}
		if len(c.errs) != errs {
			continue
		}
		if err := r.Check(); err != nil {
			field := ""
			if fe, ok := err.(*rules.FieldError); ok {
				field = fe.Field
				err = fe.Err
			}
			off := e.off
			if v := fields[field]; v != nil {
				off = v.off
			}
			c.add(off, keyPath(ipath, field), "%v", err)
			continue
		}
		out = append(out, r)
	}
	return out
}

// splitModel checks a model string PROVIDER/MODEL and returns PROVIDER.
// bare allows "echo" without a model name, as the default model may be.
func splitModel(s string, bare bool) (string, error) {
	if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n") {
		return "", fmt.Errorf("%s must not contain white space", quote(s))
	}
	prov, name, slash := strings.Cut(s, "/")
	switch {
	case len(s) > maxStringLen:
		return "", fmt.Errorf("is %d bytes long, more than %d", len(s), maxStringLen)
	case prov == "":
		return "", fmt.Errorf("%s has no provider; want PROVIDER/MODEL, e.g. openai/gpt-4.1", quote(s))
	case prov == provider.TypeEcho && (bare || slash):
		return prov, nil
	case name == "":
		return "", fmt.Errorf("%s has no model name; want PROVIDER/MODEL, e.g. openai/gpt-4.1", quote(s))
	}
	return prov, nil
}

// isBuiltinProvider reports whether name is a provider type a model string
// may use without a providers entry.
func isBuiltinProvider(name string) bool {
	switch name {
	case provider.TypeOpenAI, provider.TypeAzure, provider.TypeAnthropic, provider.TypeEcho:
		return true
	}
	return false
}

// Merge merges files in order, each winning key by key over the ones before
// it (the server file first, then the workspace's; nil files are skipped),
// and checks what no single file can: that every model string names a
// known provider. An error names the file and key that hold the reference.
func Merge(files ...*File) (*Config, error) {
	cfg := &Config{}
	var perms [][]Permission
	for _, f := range files {
		if f == nil {
			continue
		}
		if f.Model != "" {
			cfg.Model, cfg.ModelSource = f.Model, f.Path
		}
		cfg.Providers = mergeMap(cfg.Providers, f.Providers)
		cfg.Models = mergeMap(cfg.Models, f.Models)
		cfg.MCPServers = mergeMap(cfg.MCPServers, f.MCPServers)
		next := f.Sandbox.Apply(cfg.Sandbox)
		if f.workspace {
			// Anyone who can write the workspace can write its file:
			// it may only narrow what the server's file set.
			if keys := next.WideningKeys(cfg.Sandbox); len(keys) > 0 {
				return nil, Errors{{File: f.Path, Key: keys[0], Reason: fmt.Sprintf("a workspace's file may only narrow the sandbox the server's configuration sets (%s would widen it); an owner sets wider values in the server's configuration file or on a session", strings.Join(keys, ", "))}}
			}
		}
		cfg.Sandbox = next
		ps := make([]Permission, len(f.Permissions))
		for i, r := range f.Permissions {
			ps[i] = Permission{Rule: r, Source: f.Path}
		}
		perms = append(perms, ps)
	}
	// Later files' rules come first.
	for i := len(perms) - 1; i >= 0; i-- {
		cfg.Permissions = append(cfg.Permissions, perms[i]...)
	}
	var errs Errors
	for _, f := range files {
		if f == nil {
			continue
		}
		for _, ref := range f.refs {
			prov, _ := splitModel(ref.model, true)
			if _, ok := cfg.Providers[prov]; ok || isBuiltinProvider(prov) {
				continue
			}
			e := &Error{File: f.Path, Key: ref.key, Reason: fmt.Sprintf("%s names provider %s, which is neither openai, azure, anthropic nor echo, nor in providers", quote(ref.model), quote(prov))}
			if f.data != nil {
				e.Line, e.Col = lineCol(f.data, ref.off)
			}
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	list := make([]rules.Rule, len(cfg.Permissions))
	for i, p := range cfg.Permissions {
		list[i] = p.Rule
	}
	set, err := rules.Compile(list)
	if err != nil {
		// Each file's rules were checked when it was read; only the total
		// can still be too many.
		return nil, Errors{{Key: "permissions", Reason: err.Error()}}
	}
	cfg.rules = set
	cfg.catalog = catalogOf(cfg.Models)
	return cfg, nil
}

func mergeMap[V any](into, from map[string]V) map[string]V {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = make(map[string]V, len(from))
	}
	maps.Copy(into, from)
	return into
}

// KeyVariables names the environment variables the providers read their
// keys from (api_key_env): secrets the agent's commands never see.
func (c *Config) KeyVariables() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, p := range c.Providers {
		if p.APIKeyEnv != "" {
			out = append(out, p.APIKeyEnv)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MCPServerNames returns the configured MCP servers' names, sorted.
func (c *Config) MCPServerNames() []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.MCPServers))
}
