package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/tandem-dev/tandem/proto"
)

const tokenUsage = `usage: tandem token create NAME [--role member] [--expires 720h]
       tandem token list
       tandem token revoke NAME|ID

Manages people's tokens (owner only): each person gets a token of their own,
with a role: viewer (reads and watches), member (also prompts, answers and
manages sessions) or owner (everything). create prints the secret once; the
server keeps only its hash. They go through the server running on the data
dir (or --url), else through one started in this process on the data dir.
`

// tokenCommand is tandem token create|list|revoke.
func tokenCommand(args []string, env *cliEnv) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(env.stderr, tokenUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	sub, args := args[0], args[1:]
	var o clientOptions
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), tokenUsage+"\nflags:\n"); fs.PrintDefaults() }
	o.register(fs, env.getenv, "print the API's JSON body")
	role := fs.String("role", proto.RoleMember, "with create: viewer, member or owner")
	expires := fs.String("expires", "", "with create: how long the token lives, a Go duration such as 720h (default: until revoked)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return usageError(env, "token", err)
	}
	want := map[string]int{"create": 1, "list": 0, "revoke": 1}
	n, known := want[sub]
	switch {
	case !known:
		return usageError(env, "token", fmt.Errorf("unknown subcommand %q (create, list or revoke)", sub))
	case len(rest) != n:
		return usageError(env, "token", fmt.Errorf("token %s takes %d argument(s), got %d", sub, n, len(rest)))
	}
	ctx := context.Background()
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "token", err)
	}
	defer b.Close()
	switch sub {
	case "create":
		created, err := b.c.CreateToken(ctx, proto.CreateTokenRequest{Name: rest[0], Role: *role, ExpiresIn: *expires})
		if err != nil {
			return fail(env, "token", fmt.Errorf("create token: %w", explain(err)))
		}
		if o.json {
			return printJSON(env.stdout, created)
		}
		fmt.Fprintf(env.stderr, "token %s for %s (%s)%s; its secret, shown this once:\n", created.Token.ID, created.Token.Name, created.Token.Role, expiry(created.Token))
		fmt.Fprintln(env.stdout, created.Secret)
		return 0
	case "revoke":
		if err := b.c.RevokeToken(ctx, rest[0]); err != nil {
			return fail(env, "token", fmt.Errorf("revoke token %s: %w", rest[0], explain(err)))
		}
		fmt.Fprintf(env.stderr, "token %s revoked\n", rest[0])
		return 0
	}
	list, err := b.c.ListTokens(ctx)
	if err != nil {
		return fail(env, "token", fmt.Errorf("list tokens: %w", explain(err)))
	}
	if o.json {
		return printJSON(env.stdout, proto.TokenList{Tokens: list})
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tEXPIRES\tLAST USED")
	for _, t := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, t.CreatedAt.Local().Format(listTimeFormat), when(t.ExpiresAt), when(t.LastUsedAt))
	}
	return flushTable(tw)
}

func when(t *proto.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(listTimeFormat)
}

func expiry(t proto.Token) string {
	if t.ExpiresAt == nil {
		return ""
	}
	return ", expires " + strings.TrimSpace(when(t.ExpiresAt))
}
