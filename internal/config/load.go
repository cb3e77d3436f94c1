package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/tandem-dev/tandem/internal/provider"
)

// WorkspaceFile is where a workspace's configuration lives, relative to its root.
const WorkspaceFile = ".tandem/config.json"

// ServerPath returns the server-wide file's path: flagValue (--config) when
// given, else TANDEM_CONFIG, else $XDG_CONFIG_HOME/tandem/config.json, else
// ~/.config/tandem/config.json. explicit says the user named the file, so
// that its absence is an error rather than an empty configuration.
func ServerPath(flagValue string, getenv func(string) string) (path string, explicit bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if v := getenv("TANDEM_CONFIG"); v != "" {
		return v, true
	}
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "tandem", "config.json"), false
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".config", "tandem", "config.json"), false
}

// LoadServer reads the server-wide file ServerPath names. An absent file is
// an empty configuration (nil File) unless the user named it.
func LoadServer(flagValue string, getenv func(string) string) (*File, error) {
	path, explicit := ServerPath(flagValue, getenv)
	f, err := Load(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return nil, nil
	}
	return f, err
}

// Load reads and checks the file at path. A file that cannot be read is an
// Errors naming it that also unwraps to the cause: test for a missing file
// with errors.Is(err, fs.ErrNotExist).
func Load(path string) (*File, error) {
	return load(path, false)
}

func load(path string, workspace bool) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	defer f.Close()
	return read(path, f, workspace)
}

// LoadWorkspace reads WORKSPACE/.tandem/config.json as ParseWorkspace does.
// It never leaves the workspace: the file and .tandem may be symlinks only
// to places inside it, because the file is in the project, and the project
// may come from anyone. An absent file is a nil File and no error.
func LoadWorkspace(root string) (*File, error) {
	path := filepath.Join(root, WorkspaceFile)
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, openError(root, err)
	}
	defer r.Close()
	f, err := r.OpenFile(WorkspaceFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, openError(path, err)
	}
	defer f.Close()
	return read(path, f, true)
}

// read reads a configuration file from f, which must be a regular file (a
// FIFO would block forever, a device would never end).
func read(path string, f *os.File, workspace bool) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, openError(path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, Errors{{File: path, Reason: "not a regular file"}}
	}
	if st.Size() > MaxFileSize {
		return nil, Errors{{File: path, Reason: fmt.Sprintf("file is %d bytes, more than %d", st.Size(), MaxFileSize)}}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, openError(path, err)
	}
	return parse(path, data, workspace)
}

// openError reports a file that cannot be read, keeping fs.ErrNotExist
// testable and the reason short (the path is already said once).
func openError(path string, err error) error {
	reason := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		reason = pe.Err.Error()
	}
	if errors.Is(err, fs.ErrNotExist) {
		reason = "no such file"
	}
	return &notReadable{Errors{{File: path, Reason: "cannot read: " + reason}}, err}
}

// notReadable is an Errors that also unwraps to the underlying failure.
type notReadable struct {
	Errors
	err error
}

func (e *notReadable) Unwrap() []error { return []error{e.Errors, e.err} }

// ForWorkspace returns the configuration of the workspace at root: server
// merged with the workspace's file. The file is read on each call, so that
// an edit takes effect on the next prompt; it is small and the read is cheap.
func ForWorkspace(server *File, root string) (*Config, error) {
	ws, err := LoadWorkspace(root)
	if err != nil {
		return nil, err
	}
	return Merge(server, ws)
}

// Check validates files as the server would use them: each read and
// checked, then merged in order (later ones winning). It is `tandem config
// check`: server is the server's file ("" for none), workspaces the
// workspace files after it (read as ParseWorkspace does). Every path given
// must exist.
func Check(server string, workspaces ...string) (*Config, error) {
	files := make([]*File, 0, 1+len(workspaces))
	var errs Errors
	paths := append([]string{server}, workspaces...)
	for i, p := range paths {
		if i == 0 && p == "" {
			continue
		}
		f, err := load(p, i > 0)
		if err != nil {
			var es Errors
			if errors.As(err, &es) {
				errs = append(errs, es...)
				continue
			}
			return nil, err
		}
		files = append(files, f)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return Merge(files...)
}

// DefaultModel is the server's default model: override (the --model flag or
// TANDEM_MODEL, which cmd/tandem resolves, flag first) when not empty, else
// the configuration's model, else echo.
func (c *Config) DefaultModel(override string) string {
	switch {
	case override != "":
		return override
	case c != nil && c.Model != "":
		return c.Model
	}
	return provider.TypeEcho
}

// modelSpec returns what the configuration says about model (as written
// in a session, e.g. "openai/gpt-4.1").
func (c *Config) modelSpec(model string) (Model, bool) {
	if c == nil {
		return Model{}, false
	}
	m, ok := c.Models[model]
	return m, ok
}

// ResolveModel turns a model string into the provider to ask and the model
// name to ask it for. PROVIDER is a providers entry or a built-in type.
//
// Environment variables win over the file: for the providers named like
// the built-in types (openai, azure, anthropic), the variables those read
// (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, AZURE_OPENAI_ENDPOINT...; see
// provider.FromEnv) override base_url. The key is the variable api_key_env
// names when the entry has one (an error when it is not set), else the
// type's standard variable for a built-in name, else none (a local server).
func (c *Config) ResolveModel(model string, getenv func(string) string) (provider.Config, string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	prov, name, _ := strings.Cut(strings.TrimSpace(model), "/")
	var p Provider
	var ok bool
	if c != nil {
		p, ok = c.Providers[prov]
	}
	if !ok {
		typ, name, err := provider.Resolve(model)
		if err != nil {
			return provider.Config{}, "", err
		}
		return provider.FromEnv(typ, getenv), name, nil
	}
	if name == "" {
		return provider.Config{}, "", fmt.Errorf("model %q: missing the model name after %q (want PROVIDER/MODEL)", model, prov+"/")
	}
	var cfg provider.Config
	if prov == p.Type {
		cfg = provider.FromEnv(p.Type, getenv)
	} else {
		cfg = provider.Config{Type: p.Type}
		if p.Type == provider.TypeAzure {
			cfg.AzureAPIVersion = provider.FromEnv(provider.TypeAzure, getenv).AzureAPIVersion
		}
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = p.BaseURL
	}
	if p.APIKeyEnv != "" {
		key := strings.TrimSpace(getenv(p.APIKeyEnv))
		if key == "" {
			return provider.Config{}, "", fmt.Errorf("provider %s (%s): environment variable %s (its api_key_env) is not set", prov, p.Source, p.APIKeyEnv)
		}
		cfg.APIKey = key
	}
	return cfg, name, nil
}

// CheckModel reports whether model is a model string this configuration
// can name: PROVIDER/MODEL with PROVIDER a providers entry or a built-in
// type (echo alone too). It does not look for keys: a session may name a
// model whose key is set later.
func (c *Config) CheckModel(model string) error {
	prov, name, _ := strings.Cut(strings.TrimSpace(model), "/")
	if c != nil {
		if _, ok := c.Providers[prov]; ok {
			if name == "" {
				return fmt.Errorf("model %s: missing the model name after %s (want PROVIDER/MODEL)", quote(model), quote(prov+"/"))
			}
			return nil
		}
	}
	if _, _, err := provider.Resolve(model); err != nil {
		if c != nil && len(c.Providers) > 0 {
			return fmt.Errorf("%w; the configuration's providers: %s", err, strings.Join(slices.Sorted(maps.Keys(c.Providers)), ", "))
		}
		return err
	}
	return nil
}
