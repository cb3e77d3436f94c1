package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// listTimeFormat is how the tables show times: local and to the second, what
// a person scanning a list needs.
const listTimeFormat = "2006-01-02 15:04:05"

// sessionsCommand is tandem sessions: the sessions of the current
// directory's workspace (or --workspace), most recently updated first.
func sessionsCommand(args []string, env *cliEnv) int {
	var o clientOptions
	var wsID string
	fs := newListFlags("sessions", "Lists the sessions of the current directory's workspace (or --workspace),\nmost recently updated first: CONTEXT is the size of the session's next model\nrequest (of the model's context window, when known), TOKENS the tokens its\nruns read and wrote, COST their cost when the model's prices are known.", env)
	o.register(fs, env.getenv, "print the API's JSON body instead of a table")
	fs.StringVar(&wsID, "workspace", "", "workspace ID (default: the current directory's)")
	if err := parseNoArgs(fs, args); err != nil {
		return usageError(env, "sessions", err)
	}
	ctx := context.Background()
	// A server is started in-process when none runs, as tandem run does, so
	// the sessions those runs left can be listed the same way.
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "sessions", err)
	}
	defer b.Close()
	if wsID == "" {
		dir, err := currentDir(env)
		if err != nil {
			return fail(env, "sessions", err)
		}
		ws, ok, err := findWorkspace(ctx, b.c, dir)
		if err != nil {
			return fail(env, "sessions", err)
		}
		if !ok {
			if !o.json {
				fmt.Fprintf(env.stderr, "tandem: no workspace for %s yet (tandem run makes one)\n", dir)
			}
			return printSessions(env.stdout, o.json, nil)
		}
		wsID = ws.ID
	}
	list, err := b.c.ListSessions(ctx, wsID)
	if client.IsNotFound(err) {
		return fail(env, "sessions", fmt.Errorf("no workspace %s (see tandem workspaces)", wsID))
	}
	if err != nil {
		return fail(env, "sessions", fmt.Errorf("list sessions: %w", explain(err)))
	}
	return printSessions(env.stdout, o.json, list)
}

func printSessions(w io.Writer, asJSON bool, list []proto.Session) int {
	if list == nil {
		list = []proto.Session{}
	}
	if asJSON {
		return printJSON(w, proto.SessionList{Sessions: list})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tUPDATED\tMESSAGES\tCONTEXT\tTOKENS\tCOST")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.ID, shorten(s.Title), s.UpdatedAt.Local().Format(listTimeFormat), s.MessageCount,
			contextSize(s.Context), count(s.Usage.InputTokens+s.Usage.OutputTokens), sessionCost(s.Usage))
	}
	return flushTable(tw)
}

// contextSize is how full the session's context is: the size of its next
// request, and the model's window when known.
func contextSize(c proto.SessionContext) string {
	if c.Window == nil || *c.Window <= 0 {
		return count(c.Tokens)
	}
	return fmt.Sprintf("%s/%s (%d%%)", count(c.Tokens), count(*c.Window), c.Tokens*100 / *c.Window)
}

// sessionCost is the session's cost so far, "-" when no price is known.
func sessionCost(u proto.Usage) string {
	if u.CostUSD == nil {
		return "-"
	}
	return cost(*u.CostUSD)
}

// workspacesCommand is tandem workspaces: every workspace the server knows.
func workspacesCommand(args []string, env *cliEnv) int {
	if len(args) > 0 && args[0] == "forget" {
		return forgetCommand(args[1:], env)
	}
	var o clientOptions
	fs := newListFlags("workspaces", "Lists every workspace the server knows, open or closed.", env)
	o.register(fs, env.getenv, "print the API's JSON body instead of a table")
	if err := parseNoArgs(fs, args); err != nil {
		return usageError(env, "workspaces", err)
	}
	ctx := context.Background()
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "workspaces", err)
	}
	defer b.Close()
	list, err := b.c.ListWorkspaces(ctx)
	if err != nil {
		return fail(env, "workspaces", fmt.Errorf("list workspaces: %w", explain(err)))
	}
	if list == nil {
		list = []proto.Workspace{}
	}
	if o.json {
		return printJSON(env.stdout, proto.WorkspaceList{Workspaces: list})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPATH\tSTATE\tCLIENTS")
	for _, ws := range list {
		state := "closed"
		switch {
		case ws.Missing:
			state = "missing" // its directory is gone
		case ws.Open:
			state = "open"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", ws.ID, ws.Path, state, ws.Clients)
	}
	return flushTable(tw)
}

// forgetCommand is tandem workspaces forget ID|PATH: the server forgets
// the workspace (typically one whose directory is gone) and all it keeps
// of it. The directory, if any, is left alone.
func forgetCommand(args []string, env *cliEnv) int {
	const name = "workspaces forget"
	var o clientOptions
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tandem %s [flags] ID|PATH\n\n%s\n\nflags:\n", name,
			"Makes the server forget a workspace (owner only): its sessions, messages and checkpoints\n"+
				"are removed; its directory is not touched. Give its id or its path, as tandem workspaces lists it.")
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "print nothing on success (there is no JSON body)")
	rest, err := parseArgs(fs, args)
	if err == nil && len(rest) != 1 {
		err = fmt.Errorf("give one workspace id or path")
	}
	if err != nil {
		return usageError(env, name, err)
	}
	ctx := context.Background()
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, name, err)
	}
	defer b.Close()
	ws, err := workspaceByIDOrPath(ctx, b.c, rest[0])
	if err != nil {
		return fail(env, name, err)
	}
	if err := b.c.ForgetWorkspace(ctx, ws.ID); err != nil {
		return fail(env, name, fmt.Errorf("forget workspace %s: %w", ws.ID, explain(err)))
	}
	if !o.json {
		fmt.Fprintf(env.stdout, "forgot workspace %s (%s)\n", ws.ID, ws.Path)
	}
	return exitOK
}

// workspaceByIDOrPath finds the workspace arg names: its id, else its
// path (made absolute; it may no longer exist).
func workspaceByIDOrPath(ctx context.Context, c *client.Client, arg string) (proto.Workspace, error) {
	list, err := c.ListWorkspaces(ctx)
	if err != nil {
		return proto.Workspace{}, fmt.Errorf("list workspaces: %w", explain(err))
	}
	for _, ws := range list {
		if ws.ID == arg {
			return ws, nil
		}
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return proto.Workspace{}, fmt.Errorf("path %s: %w", arg, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		resolved = abs
	}
	for _, ws := range list {
		if ws.Path == resolved || ws.Path == abs {
			return ws, nil
		}
	}
	return proto.Workspace{}, fmt.Errorf("no workspace %s (see tandem workspaces)", arg)
}

func newListFlags(name, what string, env *cliEnv) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tandem %s [flags]\n\n%s\n\nflags:\n", name, what)
		fs.PrintDefaults()
	}
	return fs
}

func parseNoArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q", rest[0])
	}
	return nil
}

// printJSON writes v as the API would, indented for people who read it.
func printJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitError
	}
	return exitOK
}

func flushTable(tw *tabwriter.Writer) int {
	if err := tw.Flush(); err != nil {
		return exitError
	}
	return exitOK
}
