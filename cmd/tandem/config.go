package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/proto"
)

const configUsage = `usage: tandem config check [flags] [FILE]

Checks configuration files as tandem serve reads them: the server's file
(--config, TANDEM_CONFIG, else $XDG_CONFIG_HOME/tandem/config.json or
~/.config/tandem/config.json, when there is one), then the workspace file
FILE (default: .tandem/config.json of the current directory, when there is
one), which wins key by key. Every problem is printed with its file, line,
key and why; the exit status is 1 if there is any.

flags:
`

// configCommand is tandem config check.
func configCommand(args []string, env *cliEnv) int {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), configUsage)
		fs.PrintDefaults()
	}
	serverFlag := fs.String("config", "", "the server's configuration file (TANDEM_CONFIG)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return usageError(env, "config", err)
	}
	if len(rest) == 0 || rest[0] != "check" {
		fs.Usage()
		return exitUsage
	}
	rest = rest[1:]
	if len(rest) > 1 {
		return usageError(env, "config", fmt.Errorf("unexpected argument %q", rest[1]))
	}

	var server, ws string
	serverPath, explicit := config.ServerPath(*serverFlag, env.getenv)
	if explicit || exists(serverPath) {
		server = serverPath
	}
	if len(rest) == 1 {
		ws = rest[0]
	} else {
		dir, err := currentDir(env)
		if err != nil {
			return fail(env, "config", err)
		}
		if p := filepath.Join(dir, config.WorkspaceFile); exists(p) {
			ws = p
		}
	}
	var paths, workspaces []string
	if server != "" {
		paths = append(paths, server)
	}
	if ws != "" {
		paths = append(paths, ws)
		workspaces = append(workspaces, ws)
	}
	if len(paths) == 0 {
		fmt.Fprintf(env.stderr, "tandem config: no configuration file to check: none at %s nor %s\n", serverPath, config.WorkspaceFile)
		return exitOK
	}
	cfg, err := config.Check(server, workspaces...)
	if err != nil {
		var es config.Errors
		if errors.As(err, &es) {
			for _, e := range es {
				fmt.Fprintln(env.stderr, e)
			}
		} else {
			fmt.Fprintln(env.stderr, "tandem config:", err)
		}
		return exitError
	}
	printSummary(env, paths, cfg)
	return exitOK
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// printSummary says what the files configure.
func printSummary(env *cliEnv, paths []string, cfg *config.Config) {
	fmt.Fprintf(env.stdout, "ok: %s\n", strings.Join(paths, ", "))
	if cfg.Model != "" {
		fmt.Fprintf(env.stdout, "model: %s (%s)\n", cfg.Model, cfg.ModelSource)
	}
	if len(cfg.Providers) > 0 {
		var names []string
		for _, name := range sortedKeys(cfg.Providers) {
			names = append(names, fmt.Sprintf("%s (%s)", name, cfg.Providers[name].Type))
		}
		fmt.Fprintf(env.stdout, "providers: %s\n", strings.Join(names, ", "))
	}
	if len(cfg.Models) > 0 {
		fmt.Fprintf(env.stdout, "models: %s\n", strings.Join(sortedKeys(cfg.Models), ", "))
	}
	if len(cfg.MCPServers) > 0 {
		var names []string
		for _, name := range cfg.MCPServerNames() {
			names = append(names, fmt.Sprintf("%s (%s)", name, cfg.MCPServers[name].Type))
		}
		fmt.Fprintf(env.stdout, "mcp servers: %s\n", strings.Join(names, ", "))
	}
	if n := len(cfg.Permissions); n > 0 {
		fmt.Fprintf(env.stdout, "permission rules: %d\n", n)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// mcpCommand is tandem mcp list: the MCP servers of the current
// directory's workspace (or --workspace) with their states and tools.
func mcpCommand(args []string, env *cliEnv) int {
	var o clientOptions
	var wsID string
	fs := newListFlags("mcp list", "Lists the MCP servers of the current directory's workspace (or --workspace):\nthose of its configuration (stopped until a session that uses them runs)\nand those of its sessions, with their states and tools.", env)
	o.register(fs, env.getenv, "print the API's JSON body instead of a table")
	fs.StringVar(&wsID, "workspace", "", "workspace ID (default: the current directory's)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return usageError(env, "mcp", err)
	}
	if len(rest) == 0 || rest[0] != "list" {
		fs.Usage()
		return exitUsage
	}
	if len(rest) > 1 {
		return usageError(env, "mcp", fmt.Errorf("unexpected argument %q", rest[1]))
	}
	ctx := context.Background()
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "mcp", err)
	}
	defer b.Close()
	if wsID == "" {
		dir, err := currentDir(env)
		if err != nil {
			return fail(env, "mcp", err)
		}
		ws, ok, err := findWorkspace(ctx, b.c, dir)
		if err != nil {
			return fail(env, "mcp", err)
		}
		if !ok {
			if !o.json {
				fmt.Fprintf(env.stderr, "tandem: no workspace for %s yet (tandem run makes one; tandem config check shows what its files configure)\n", dir)
			}
			return printServers(env, o.json, nil)
		}
		wsID = ws.ID
	}
	list, err := b.c.MCPServers(ctx, wsID)
	if client.IsNotFound(err) {
		return fail(env, "mcp", fmt.Errorf("no workspace %s (see tandem workspaces)", wsID))
	}
	if err != nil {
		return fail(env, "mcp", fmt.Errorf("list MCP servers: %w", explain(err)))
	}
	return printServers(env, o.json, list)
}

func printServers(env *cliEnv, asJSON bool, list []proto.MCPServerStatus) int {
	if list == nil {
		list = []proto.MCPServerStatus{}
	}
	if asJSON {
		return printJSON(env.stdout, proto.MCPServerList{Servers: list})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSESSION\tSTATUS\tTOOLS\tERROR")
	for _, s := range list {
		session := s.SessionID
		if session == "" {
			session = "-"
		}
		tools := make([]string, len(s.Tools))
		for i, t := range s.Tools {
			_, name, _ := strings.Cut(strings.TrimPrefix(t, "mcp__"), "__")
			tools[i] = name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, session, s.Status, shorten(strings.Join(tools, ",")), shorten(s.Error))
	}
	return flushTable(tw)
}
