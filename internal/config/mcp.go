package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/tandem-dev/tandem/internal/rules"
	"github.com/tandem-dev/tandem/internal/sandbox"
)

var (
	stdioKeys = []string{"type", "command", "args", "env", "tools", "sandbox"}
	httpKeys  = []string{"type", "url", "headers", "tools"}
	mcpKeys   = []string{"type", "command", "args", "env", "url", "headers", "tools", "sandbox"}
)

// ParseMCPServers reads a session's own mcp_servers (a request body's
// value) with the rules of the configuration file. Errors name the key
// under path, e.g. mcp_servers.git.command.
func ParseMCPServers(path string, data []byte) (map[string]MCPServer, error) {
	c := &checker{}
	root, err := parseTree(data)
	if err != nil {
		c.add(0, path, "%v", err)
		return nil, c.errs
	}
	servers := checkMCPServers(c, root, path, "")
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return servers, nil
}

func checkMCPServers(c *checker, n *node, path, source string) map[string]MCPServer {
	out := make(map[string]MCPServer)
	for _, m := range c.entries(n, path, maxEntries) {
		key := keyPath(path, m.key)
		if err := CheckServerName(m.key); err != nil {
			c.add(m.keyOff, key, "%v", err)
			continue
		}
		if s, ok := checkMCPServer(c, m.val, key); ok {
			s.Source = source
			out[m.key] = s
		}
	}
	return out
}

func checkMCPServer(c *checker, n *node, path string) (MCPServer, bool) {
	var s MCPServer
	if n.kind != 'o' {
		c.add(n.off, path, "must be an object, got %s", n.kindName())
		return s, false
	}
	errs := len(c.errs)
	// The type says which keys belong; read it first.
	allowed := mcpKeys
	var typeNode *node
	for _, m := range n.members {
		if m.key == "type" {
			typeNode = m.val
			break
		}
	}
	if typeNode == nil {
		c.add(n.off, keyPath(path, "type"), "is required: stdio or http")
	} else if t, ok := c.str(typeNode, keyPath(path, "type"), maxNameLen); ok {
		switch t {
		case TransportStdio:
			allowed = stdioKeys
		case TransportHTTP:
			allowed = httpKeys
		default:
			c.add(typeNode.off, keyPath(path, "type"), "%s is not stdio or http", quote(t))
		}
		s.Type = t
	}
	for _, m := range n.members {
		if contains(mcpKeys, m.key) && !contains(allowed, m.key) {
			c.add(m.keyOff, keyPath(path, m.key), "is not used by a server of type %s", s.Type)
		}
	}
	fields, ok := c.object(n, path, mcpKeys...)
	if !ok {
		return s, false
	}
	switch s.Type {
	case TransportStdio:
		if v := fields["command"]; v == nil {
			c.add(n.off, keyPath(path, "command"), "is required for a stdio server")
		} else if cmd, ok := c.nonEmpty(v, keyPath(path, "command"), maxStringLen); ok {
			if err := checkCommand(cmd); err != nil {
				c.add(v.off, keyPath(path, "command"), "%v", err)
			}
			s.Command = cmd
		}
		if v := fields["args"]; v != nil {
			elems, _ := c.array(v, keyPath(path, "args"), maxEntries)
			s.Args = make([]string, 0, len(elems))
			for i, e := range elems {
				p := indexPath(keyPath(path, "args"), i)
				if a, ok := c.str(e, p, maxValueLen); ok {
					if err := checkTemplate(a); err != nil {
						c.add(e.off, p, "%v", err)
					}
					s.Args = append(s.Args, a)
				}
			}
		}
		if v := fields["env"]; v != nil {
			s.Env = checkStringMap(c, v, keyPath(path, "env"), func(k string) error {
				if !validEnvName(k) {
					return errors.New("is not an environment variable name (letters, digits and _, not starting with a digit)")
				}
				return nil
			})
		}
		if v := fields["sandbox"]; v != nil {
			// Unconfined unless asked: the owner configured the server
			// to run as it does (contract section 12).
			if mode, ok := c.str(v, keyPath(path, "sandbox"), maxNameLen); ok {
				if mode != sandbox.ModeWorkspace && mode != sandbox.ModeReadOnly {
					c.add(v.off, keyPath(path, "sandbox"), "%s is not workspace or read-only", quote(mode))
				}
				s.Sandbox = mode
			}
		}
	case TransportHTTP:
		if v := fields["url"]; v == nil {
			c.add(n.off, keyPath(path, "url"), "is required for an http server")
		} else if u, ok := c.nonEmpty(v, keyPath(path, "url"), maxStringLen); ok {
			if err := checkURL(u); err != nil {
				c.add(v.off, keyPath(path, "url"), "%v", err)
			}
			s.URL = u
		}
		if v := fields["headers"]; v != nil {
			s.Headers = checkStringMap(c, v, keyPath(path, "headers"), func(k string) error {
				if !validHeaderName(k) {
					return errors.New("is not an HTTP header name")
				}
				return nil
			})
			if c.workspace {
				for _, m := range v.members {
					if m.val.kind == 's' && strings.Contains(m.val.str, "${") {
						c.add(m.val.off, keyPath(keyPath(path, "headers"), m.key), "a workspace's file may not send environment variables to an http server: the project's file could send your tokens to any URL; define this server in your own configuration file (--config)")
					}
				}
			}
		}
	}
	if v := fields["tools"]; v != nil {
		elems, _ := c.array(v, keyPath(path, "tools"), maxEntries)
		s.Tools = make([]string, 0, len(elems))
		for i, e := range elems {
			p := indexPath(keyPath(path, "tools"), i)
			if pat, ok := c.str(e, p, rules.MaxPatternLen); ok {
				if _, err := rules.CompilePattern(pat); err != nil {
					c.add(e.off, p, "%v", err)
					continue
				}
				s.Tools = append(s.Tools, pat)
			}
		}
	}
	return s, len(c.errs) == errs
}

// checkStringMap reads an object of strings (env, headers) whose keys pass
// checkKey and whose values may hold ${NAME} references.
func checkStringMap(c *checker, n *node, path string, checkKey func(string) error) map[string]string {
	out := make(map[string]string)
	for _, m := range c.entries(n, path, maxEntries) {
		key := keyPath(path, m.key)
		if err := checkKey(m.key); err != nil {
			c.add(m.keyOff, key, "%v", err)
			continue
		}
		v, ok := c.str(m.val, key, maxValueLen)
		if !ok {
			continue
		}
		if strings.ContainsAny(v, "\r\n") {
			c.add(m.val.off, key, "must not contain a line break")
			continue
		}
		if err := checkTemplate(v); err != nil {
			c.add(m.val.off, key, "%v", err)
			continue
		}
		out[m.key] = v
	}
	return out
}

// CheckServerName reports whether name can name an MCP server: its tools are
// offered as mcp__NAME__TOOL, which a model API accepts only as letters,
// digits, _ and -, and which must split back into NAME and TOOL one way only.
func CheckServerName(name string) error {
	switch {
	case name == "":
		return errors.New("MCP server name must not be empty")
	case len(name) > maxServerLen:
		return fmt.Errorf("MCP server name is %d bytes long, more than %d", len(name), maxServerLen)
	case strings.Contains(name, "__"):
		return errors.New("MCP server name must not contain __ (tools are named mcp__NAME__TOOL)")
	}
	for i, r := range name {
		alnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if !alnum && r != '_' && r != '-' {
			return fmt.Errorf("MCP server name %s may hold only letters, digits, _ and -", quote(name))
		}
		if !alnum && (i == 0 || i == len(name)-1) {
			return fmt.Errorf("MCP server name %s must start and end with a letter or digit", quote(name))
		}
	}
	return nil
}

func checkProviderName(name string) error {
	switch {
	case name == "":
		return errors.New("provider name must not be empty")
	case len(name) > maxNameLen:
		return fmt.Errorf("provider name is %d bytes long, more than %d", len(name), maxNameLen)
	case name == "echo":
		return errors.New("echo is the built-in offline model and takes no configuration")
	}
	for i, r := range name {
		alnum := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if !alnum && (i == 0 || (r != '_' && r != '-' && r != '.')) {
			return fmt.Errorf("provider name %s may hold only letters, digits, _, - and . and must start with a letter or digit", quote(name))
		}
	}
	return nil
}

// checkCommand checks a stdio server's command. A command with spaces is
// almost always a command line pasted whole; it belongs in args.
func checkCommand(cmd string) error {
	if strings.TrimSpace(cmd) != cmd {
		return fmt.Errorf("%s has white space around it", quote(cmd))
	}
	if strings.ContainsAny(cmd, " \t\r\n") && !filepath.IsAbs(cmd) {
		return fmt.Errorf("%s is a program, not a command line: put its arguments in args", quote(cmd))
	}
	if strings.HasPrefix(cmd, "~") {
		return fmt.Errorf("%s: ~ is not expanded; give an absolute path", quote(cmd))
	}
	return nil
}

// checkURL accepts absolute http and https URLs without credentials (a
// secret in the file) or fragment.
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%s is not a URL", quote(s))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s must be an http:// or https:// URL", quote(s))
	case u.Host == "":
		return fmt.Errorf("%s has no host", quote(s))
	case u.User != nil:
		return errors.New("must not hold a user name or password; keys are never kept in the configuration file")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%s must not have a #fragment", quote(s))
	case strings.ContainsFunc(s, unicode.IsSpace):
		return fmt.Errorf("%s must not contain white space", quote(s))
	}
	return nil
}

func validEnvName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, r := range s {
		ok := r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9'
		if !ok {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)
		if !ok {
			return false
		}
	}
	return true
}

// checkTemplate checks the ${NAME} references in s.
func checkTemplate(s string) error {
	_, err := expand(s, func(string) (string, bool) { return "", true })
	return err
}

// Expand replaces each ${NAME} in s (an MCP server's argument, environment
// value or header value) with the environment variable NAME, looked up with
// getenv. A variable that is not set is an error naming it, so that a server
// is not started with an empty token. A $ not followed by { is kept as is.
func Expand(s string, getenv func(string) (string, bool)) (string, error) {
	return expand(s, getenv)
}

func expand(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New("${ without a closing }; write ${NAME} for the environment variable NAME")
		}
		name := s[i+2 : i+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} does not name an environment variable", truncate(name, 64))
		}
		v, ok := getenv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
