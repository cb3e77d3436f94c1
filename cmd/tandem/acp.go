package main

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/tandem-dev/tandem/internal/acp"
	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/internal/bridge/httpbridge"
	"github.com/tandem-dev/tandem/internal/bridge/localbridge"
	"github.com/tandem-dev/tandem/internal/server"
)

const acpUsage = `usage: tandem acp [flags]

Speaks the Agent Client Protocol (ACP) on stdin and stdout, so that an editor
(Zed, a JetBrains IDE, Neovim, Emacs) drives Tandem's agent: the editor
starts "tandem acp" as its agent. Its sessions are ordinary Tandem sessions,
shared live with the web app, tandem tui and every other client. It uses the
server at --url (TANDEM_URL), else the one running on the data dir, else one
it runs in this process; it acts as the person of its token. Nothing but
protocol messages goes to stdout; diagnostics go to stderr.

flags:
`

// acpCommand is tandem acp.
func acpCommand(args []string, env *cliEnv) int {
	var o clientOptions
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), acpUsage)
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "(ignored: ACP is JSON already)")
	logLevel := fs.String("log-level", "warn", "what goes to stderr: debug, info, warn or error")
	if _, err := parseArgs(fs, args); err != nil {
		return usageError(env, "acp", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError(env, "acp", fmt.Errorf("--log-level: %w", err))
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := env.untilSignal()
	defer stop()

	// The editor owns this process: whatever goes wrong before the
	// protocol starts is said on stderr, where editors show it.
	be, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "acp", err)
	}
	defer be.Close()
	var connect bridge.Connect
	if be.srv != nil {
		// The server is this process's: no loopback HTTP.
		services, audit := be.srv.Local()
		connect = localbridge.Connect(localbridge.Config{Services: services, Audit: audit})
	} else {
		token, err := o.resolveToken()
		if err != nil {
			return fail(env, "acp", err)
		}
		connect = httpbridge.Connect(be.url, token)
	}
	srv := acp.NewServer(acp.Config{Connect: connect, Version: server.Version, Logger: logger})
	if err := srv.Serve(ctx, env.stdin, env.stdout); err != nil && ctx.Err() == nil {
		return fail(env, "acp", err)
	}
	return exitOK
}
