package main

// The client commands (run, attach, sessions, workspaces) share what this
// file holds: their common flags, how they find a server and its token, and
// how they tell whether they talk to a person.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// defaultURL is where tandem serve listens by default.
const defaultURL = "http://127.0.0.1:7433"

const (
	// healthTimeout bounds the first probe: a server that accepts the
	// connection but never answers must not hang the command.
	healthTimeout = 5 * time.Second
	// shutdownTimeout bounds the stop of an in-process server, as tandem
	// serve does on SIGINT.
	shutdownTimeout = 5 * time.Second
	// startWait bounds the wait for a server that holds the data dir but
	// does not listen yet (it is starting).
	startWait = 5 * time.Second
)

// exit codes of the client commands.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitCanceled = 130 // what shells report for a process ended by SIGINT
)

// cliEnv is the outside world of a client command. main fills it from the
// process; tests replace parts of it (a scripted stdin that counts as a
// terminal, a signal channel they own) to drive the interactive paths.
type cliEnv struct {
	getenv    func(string) string
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	stdinTTY  bool
	stdoutTTY bool
	stderrTTY bool
	// signals delivers SIGINT/SIGTERM until stop is called.
	signals func() (ch <-chan os.Signal, stop func())
	getwd   func() (string, error)
}

// processEnv is the cliEnv of the running process.
func processEnv(getenv func(string) string, stdout, stderr io.Writer) *cliEnv {
	return &cliEnv{
		getenv:    getenv,
		stdin:     os.Stdin,
		stdout:    stdout,
		stderr:    stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(stdout),
		stderrTTY: isTerminal(stderr) && getenv("TERM") != "dumb",
		signals: func() (<-chan os.Signal, func()) {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
			return ch, func() { signal.Stop(ch) }
		},
		getwd: os.Getwd,
	}
}

// isTerminal reports whether w is a terminal. golang.org/x/term is not a
// dependency, so this asks the file mode; /dev/null is a character device
// too, and is what a process started without stdin gets, so it is excluded
// by identity.
// untilSignal returns a context that ends at SIGINT or SIGTERM, or when
// stop is called; stop also stops the signals' delivery and waits for the
// goroutine that watches them.
func (env *cliEnv) untilSignal() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs, stopSigs := env.signals()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		stopSigs()
		<-done
	}
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

// clientOptions are the flags every client command has.
type clientOptions struct {
	url     string
	token   string
	dataDir string
	json    bool
	// listen is where a server started in-process listens, and where one
	// is looked for first ("": any free loopback port, after defaultURL);
	// when it is taken, any free port is used instead.
	listen string
}

func (o *clientOptions) register(fs *flag.FlagSet, getenv func(string) string, jsonHelp string) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&o.url, "url", getenv("TANDEM_URL"), "server URL (TANDEM_URL); default: the server running on the data dir (DATA_DIR/server.json), else "+defaultURL)
	fs.StringVar(&o.token, "token", getenv("TANDEM_TOKEN"), "bearer token (TANDEM_TOKEN); default: the one in DATA_DIR/token")
	fs.StringVar(&o.dataDir, "data-dir", env("TANDEM_DATA_DIR", defaultDataDir(getenv)), "data directory holding the token file, and the data of a server started in-process (TANDEM_DATA_DIR)")
	fs.BoolVar(&o.json, "json", false, jsonHelp)
}

// parseArgs parses flags wherever they appear among the arguments, so that
// `tandem run "fix it" --yes` works as people type it; everything after "--"
// is an argument.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, reportedError{err}
		}
		left := fs.Args()
		consumed := args[:len(args)-len(left)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// backend is a client of a server, and the server itself when the command
// had to start one in this process.
type backend struct {
	c   *client.Client
	url string
	// inProcess is set when the server runs in this process, srv then.
	inProcess bool
	srv       *server.Server
	stop      func()
}

// Close releases the client's connections and stops an in-process server.
func (b *backend) Close() {
	b.c.CloseIdleConnections()
	if b.stop != nil {
		b.stop()
	}
}

// connect finds the server at o.url. When nobody listens there and the URL is
// a loopback one, it starts a server in this process on the data dir, if
// autostart allows it: that is what lets a first `tandem run "hello"` work on
// a machine where no server was ever started.
func (o clientOptions) connect(ctx context.Context, env *cliEnv, autostart bool) (*backend, error) {
	if o.url == "" {
		// The server running on the data dir says where it listens.
		info, ok, err := server.RunningServer(o.dataDir, startWait)
		if err != nil {
			return nil, err
		}
		if ok {
			return o.connectTo(ctx, info)
		}
		o.url = defaultURL
		if o.listen != "" {
			o.url = "http://" + o.listen
		}
	}
	u, err := normalizeURL(o.url)
	if err != nil {
		return nil, err
	}
	o.url = u
	probe := client.New(o.url, "")
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	_, err = probe.Health(hctx)
	cancel()
	probe.CloseIdleConnections()
	if err == nil {
		token, err := o.resolveToken()
		if err != nil {
			return nil, err
		}
		return &backend{c: client.New(o.url, token), url: o.url}, nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("cannot reach a tandem server at %s: %w", o.url, err)
	}
	if !autostart || !loopbackURL(o.url) {
		return nil, fmt.Errorf("no tandem server at %s (start one with `tandem serve`, or point --url/TANDEM_URL at one): %w", o.url, err)
	}
	return o.startInProcess(ctx, env)
}

// connectTo connects to the server a data dir's server.json names: that
// server holds the data dir, so no other can be started on it.
func (o clientOptions) connectTo(ctx context.Context, info server.ServerInfo) (*backend, error) {
	probe := client.New(info.URL, "")
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	_, err := probe.Health(hctx)
	cancel()
	probe.CloseIdleConnections()
	if err != nil {
		return nil, fmt.Errorf("the tandem server of data dir %s (pid %d, from its server.json) does not answer at %s: %w", o.dataDir, info.PID, info.URL, err)
	}
	token, err := o.resolveToken()
	if err != nil {
		return nil, err
	}
	return &backend{c: client.New(info.URL, token), url: info.URL}, nil
}

// resolveToken is the token to send: the flag or TANDEM_TOKEN, else the file
// a local tandem serve generated.
func (o clientOptions) resolveToken() (string, error) {
	if o.token != "" {
		return o.token, nil
	}
	path := filepath.Join(o.dataDir, "token")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no token: pass --token or set TANDEM_TOKEN (there is no token file at %s)", path)
	}
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty: pass --token or set TANDEM_TOKEN", path)
	}
	return token, nil
}

// startInProcess runs a server in this process with tandem serve's defaults
// and environment, on a free loopback port.
func (o clientOptions) startInProcess(ctx context.Context, env *cliEnv) (*backend, error) {
	so, err := parseServe([]string{"--data-dir", o.dataDir}, env.getenv, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("in-process server: %w", err)
	}
	file, err := loadConfig(so, env.getenv)
	if err != nil {
		return nil, fmt.Errorf("in-process server: invalid configuration:\n%w", err)
	}
	// Take the data dir first: if a server holds it, say which and stop,
	// before the token file is touched.
	dir, err := server.OpenDataDir(so.dataDir)
	if err != nil {
		return nil, err
	}
	token := o.token
	if token == "" {
		if token, _, err = server.LoadOrCreateToken(dir.Path()); err != nil {
			dir.Close()
			return nil, fmt.Errorf("in-process server: %w", err)
		}
	}
	// The server shares the terminal with the answer: only what goes wrong
	// is worth printing, unless the user asked for more.
	level := slog.LevelError
	if v := env.getenv("TANDEM_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("TANDEM_LOG_LEVEL: %w", err)
		}
	}
	// The server outlives a Ctrl-C of the command: it must still carry
	// the cancel and shut down cleanly, so it does not take ctx's end.
	srv, err := server.New(context.WithoutCancel(ctx), server.Config{
		Dir:            dir,
		Token:          token,
		DefaultModel:   so.model,
		Config:         file,
		CreateGrace:    so.createGrace,
		DetachGrace:    so.detachGrace,
		Heartbeat:      so.heartbeat,
		AllowedOrigins: so.allowedOrigins,
		Logger:         slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level})),
		SandboxHelper:  sandboxHelper(env.stderr),
	})
	if err != nil {
		return nil, fmt.Errorf("in-process server: %w", err)
	}
	addr := "127.0.0.1:0"
	if o.listen != "" {
		addr = o.listen
	}
	ln, err := srv.Listen(addr)
	if err != nil && o.listen != "" {
		ln, err = srv.Listen("127.0.0.1:0")
	}
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, fmt.Errorf("in-process server: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	u := "http://" + ln.Addr().String()
	fmt.Fprintf(env.stderr, "tandem: no server at %s; running one in this process (data in %s)\n", o.url, so.dataDir)
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			fmt.Fprintln(env.stderr, "tandem: stop in-process server:", err)
		}
		if err := <-served; err != nil {
			fmt.Fprintln(env.stderr, "tandem: in-process server:", err)
		}
	}
	return &backend{c: client.New(u, token), url: u, inProcess: true, srv: srv, stop: stop}, nil
}

// normalizeURL accepts a server URL as people type it: without a scheme
// (127.0.0.1:7433), with the API's base path (http://host/v1) or a trailing
// slash. It says what is wrong with anything else.
func normalizeURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--url %q is not a server URL: want http://HOST:PORT, e.g. %s", raw, defaultURL)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--url %q: the scheme must be http or https, e.g. %s", raw, defaultURL)
	}
	// The client adds /v1 itself; a prefix before it (a reverse proxy's) stays.
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	u.RawPath = ""
	return u.String(), nil
}

// loopbackURL reports whether u points at this machine, the only place where
// starting a server in its stead makes sense.
func loopbackURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	host := p.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// explain adds what to do to the errors a user can fix.
func explain(err error) error {
	switch {
	case client.IsCode(err, proto.CodeUnauthorized):
		return fmt.Errorf("%w (the server refused the token: pass --token or set TANDEM_TOKEN)", err)
	case client.IsCode(err, proto.CodeShuttingDown):
		return fmt.Errorf("%w (the server is stopping)", err)
	}
	return err
}

// currentDir is the directory a command works on: the workspace's path.
func currentDir(env *cliEnv) (string, error) {
	dir, err := env.getwd()
	if err != nil {
		return "", fmt.Errorf("current directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("current directory: %w", err)
	}
	return abs, nil
}

// findWorkspace looks up the workspace of dir without registering one, so
// that listing never creates anything.
func findWorkspace(ctx context.Context, c *client.Client, dir string) (proto.Workspace, bool, error) {
	list, err := c.ListWorkspaces(ctx)
	if err != nil {
		return proto.Workspace{}, false, fmt.Errorf("list workspaces: %w", explain(err))
	}
	// The server keeps the path with symlinks resolved.
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		resolved = dir
	}
	for _, ws := range list {
		if ws.Path == resolved || ws.Path == dir {
			return ws, true, nil
		}
	}
	return proto.Workspace{}, false, nil
}

// fail prints a command's error and returns the exit code for it.
func fail(env *cliEnv, cmd string, err error) int {
	fmt.Fprintf(env.stderr, "tandem %s: %v\n", cmd, err)
	return exitError
}

// reportedError is a command-line error the flag package already printed,
// with the usage.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }
func (e reportedError) Unwrap() error { return e.err }

// usageError reports a bad command line: flag.ErrHelp exits 0 after the
// flag package printed the help.
func usageError(env *cliEnv, cmd string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if !errors.As(err, new(reportedError)) {
		fmt.Fprintf(env.stderr, "tandem %s: %v\n", cmd, err)
	}
	return exitUsage
}
