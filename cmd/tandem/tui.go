package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/tui"
)

// tuiOptions are the flags of tandem tui.
type tuiOptions struct {
	clientOptions
	session    string
	newSession bool
	model      string
}

func parseTUI(args []string, env *cliEnv) (tuiOptions, error) {
	var o tuiOptions
	fs := flag.NewFlagSet("tui", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: tandem tui [flags]

The full-screen terminal client: the current directory's workspace, in its
last session, with every client's prompts and answers live. /help inside
lists the keys and commands. With --url (or TANDEM_URL) it connects only
there, waiting while that server is down; otherwise, with no server running,
it starts one in this process on the usual address, for others to attach to.

flags:
`)
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "unused: the TUI has no JSON output")
	fs.StringVar(&o.session, "session", "", "open this session instead of the last one")
	fs.BoolVar(&o.newSession, "new", false, "start a new session")
	fs.StringVar(&o.model, "model", "", "PROVIDER/MODEL for the session (a new one is created with it; an existing one is switched to it)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return o, err
	}
	if len(rest) > 0 {
		return o, fmt.Errorf("unexpected argument %q", rest[0])
	}
	if o.session != "" && o.newSession {
		return o, errors.New("--session and --new exclude each other")
	}
	return o, nil
}

// tuiCommand is tandem tui.
func tuiCommand(args []string, env *cliEnv) int {
	o, err := parseTUI(args, env)
	if err != nil {
		return usageError(env, "tui", err)
	}
	dir, err := currentDir(env)
	if err != nil {
		return fail(env, "tui", err)
	}
	// The screen is the TUI's: what the connection or an in-process server
	// would print meanwhile is kept and shown once it is gone.
	var held lockedBuffer
	quiet := *env
	quiet.stderr = &held
	defer func() { _, _ = io.WriteString(env.stderr, held.String()) }()

	ctx := context.Background()
	var b *backend
	if o.url != "" {
		// Only ever there: the TUI waits and reconnects while it is down.
		u, err := normalizeURL(o.url)
		if err != nil {
			return fail(env, "tui", err)
		}
		token, err := o.resolveToken()
		if err != nil {
			return fail(env, "tui", err)
		}
		b = &backend{c: client.New(u, token), url: u}
	} else {
		// The usual address: tandem serve's, so others find it there.
		o.listen = hostPort(defaultURL)
		if a := env.getenv("TANDEM_ADDR"); a != "" && loopbackURL("http://"+a) {
			o.listen = a
		}
		if b, err = o.connect(ctx, &quiet, true); err != nil {
			return fail(env, "tui", err)
		}
	}
	defer b.Close()
	note := ""
	if b.inProcess {
		note = "hosting " + strings.TrimPrefix(b.url, "http://")
	}
	err = tui.Run(ctx, tui.Options{Client: b.c, Dir: dir, SessionID: o.session, NewSession: o.newSession,
		Model: o.model, Hosting: b.inProcess, Note: note, Input: env.stdin, Output: env.stdout})
	if err != nil {
		return fail(env, "tui", explain(err))
	}
	return exitOK
}

func hostPort(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// lockedBuffer collects what goroutines write while the TUI owns the screen.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

// String is what was written.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
