// Command tandem runs the Tandem server (several clients driving one AI coding
// agent together over HTTP and Server-Sent Events) and is a client of it:
// tandem run prompts the agent of the current directory, tandem attach
// watches a workspace's events.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/httpapi"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.HelperCommand {
		// The sandbox's helper, which the server starts for each confined
		// command: nothing else of the CLI runs in it.
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `usage: tandem <command> [flags]

commands:
  run         send a prompt to the agent of the current directory and stream the answer
  tui         the full-screen terminal client (also: tandem, on a terminal)
  attach      print a workspace's live events
  compact     summarize the current session's conversation to free its context window
  export      write the current session as a document another server can import
  import      make a new session from an exported document
  sessions    list the sessions of the current directory's workspace, with tokens and cost
  workspaces  list the server's workspaces (tandem workspaces forget ID|PATH forgets one)
  web         open the web app in a browser, signed in
  mcp         list the MCP servers of the current directory's workspace (tandem mcp list)
  config      check configuration files (tandem config check [FILE])
  token       manage people's tokens (tandem token create|list|revoke)
  serve       run the server
  acp         speak the Agent Client Protocol on stdio (an editor's agent)
  copilot     serve the GitHub Copilot SDK protocol (an SDK's CLI)
  version     print the version (also --version)

tandem help COMMAND (or tandem COMMAND -h) shows a command's flags.
`

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 && isTerminal(os.Stdin) && isTerminal(stdout) {
		return tuiCommand(nil, processEnv(getenv, stdout, stderr))
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], getenv, stdout, stderr)
	case "run":
		return runCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "attach":
		return attachCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "tui":
		return tuiCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "compact":
		return compactCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "export":
		return exportCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "import":
		return importCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "sessions":
		return sessionsCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "workspaces":
		return workspacesCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "web":
		return webCommand(args[1:], processEnv(getenv, stdout, stderr), browserOpener(getenv))
	case "mcp":
		return mcpCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "acp":
		return acpCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "copilot":
		return copilotCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "config":
		return configCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "token":
		return tokenCommand(args[1:], processEnv(getenv, stdout, stderr))
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "tandem", server.Version)
		return 0
	case "help":
		if len(args) > 1 && args[1] != "help" {
			// Asked for, the help is the output: it goes to stdout.
			return run([]string{args[1], "-h"}, getenv, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tandem: unknown command %q\n%s", args[0], usage)
	return 2
}

// serveOptions are the flags of tandem serve; each also reads an environment
// variable, and a flag given on the command line wins over it.
type serveOptions struct {
	addr    string
	dataDir string
	token   string
	model   string
	// config is --config: the server's configuration file; "" lets
	// config.ServerPath decide (TANDEM_CONFIG, then the default path).
	config      string
	createGrace time.Duration
	detachGrace time.Duration
	heartbeat   time.Duration
	logLevel    string
	// allowedOrigins are the browser origins allowed besides the server's own.
	allowedOrigins []string
	// storeURL, busURL and nodeID make the server a cluster node.
	storeURL string
	busURL   string
	nodeID   string
	leaseTTL time.Duration
	// debugAddr, when set, serves the runtime's profiles (see startDebug).
	debugAddr string
	// copilotAddr serves the Copilot SDK protocol beside HTTP (see copilot.go).
	copilotAddr string
	// rate is --rate (TANDEM_RATE), each token's requests per second;
	// rateSet says it was given, which limits the owner token too.
	rate    float64
	rateSet bool
}

func parseServe(args []string, getenv func(string) string, stderr io.Writer) (serveOptions, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	envDur := func(name string, def time.Duration) (time.Duration, error) {
		v := getenv(name)
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return d, nil
	}
	var o serveOptions
	var err error
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: tandem serve [flags]

Runs the server: the HTTP API under /v1 on --addr, with its data (SQLite
database, token file, server.json) in --data-dir. One server runs per data
dir; client commands find it through DATA_DIR/server.json. Once it accepts
connections it prints "tandem listening on http://HOST:PORT" on stdout.
SIGINT or SIGTERM stop it cleanly (exit 0).

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.addr, "addr", env("TANDEM_ADDR", "127.0.0.1:7433"), "listen address; port 0 picks a free port (TANDEM_ADDR)")
	fs.StringVar(&o.dataDir, "data-dir", env("TANDEM_DATA_DIR", defaultDataDir(getenv)), "data directory (TANDEM_DATA_DIR)")
	fs.StringVar(&o.token, "token", env("TANDEM_TOKEN", ""), "bearer token; generated into DATA_DIR/token when empty (TANDEM_TOKEN)")
	fs.StringVar(&o.model, "model", env("TANDEM_MODEL", ""), "default model, PROVIDER/MODEL or echo (TANDEM_MODEL); default: the configuration file's model, else echo")
	fs.StringVar(&o.config, "config", "", "configuration file (TANDEM_CONFIG); default: $XDG_CONFIG_HOME/tandem/config.json, else ~/.config/tandem/config.json (absent is fine)")
	fs.StringVar(&o.logLevel, "log-level", env("TANDEM_LOG_LEVEL", "info"), "debug, info, warn or error (TANDEM_LOG_LEVEL)")
	fs.StringVar(&o.storeURL, "store", env("TANDEM_STORE", ""), "cluster store, postgres://... (TANDEM_STORE); with --bus, makes this server a node of the cluster on that database")
	fs.StringVar(&o.busURL, "bus", env("TANDEM_BUS", ""), "cluster bus, nats://... (TANDEM_BUS)")
	fs.StringVar(&o.nodeID, "node-id", env("TANDEM_NODE_ID", ""), "this node's id in a cluster (TANDEM_NODE_ID); default: host name plus a random suffix")
	fs.StringVar(&o.debugAddr, "debug-addr", env("TANDEM_DEBUG_ADDR", ""), "serve Go runtime profiles and traces (net/http/pprof) on this loopback address, without a token; off when empty (TANDEM_DEBUG_ADDR)")
	fs.StringVar(&o.copilotAddr, "copilot-addr", env("TANDEM_COPILOT_ADDR", ""), "also serve the GitHub Copilot SDK protocol on this address, HOST:PORT; its clients connect with the server's token (TANDEM_COPILOT_ADDR)")
	rate := fs.String("rate", getenv("TANDEM_RATE"), "each token's requests per second, in bursts of 5 times as many; 0 is unlimited (TANDEM_RATE); default 20, the owner token unlimited unless given")
	origins := fs.String("allowed-origins", env("TANDEM_ALLOWED_ORIGINS", ""), "comma-separated browser origins (scheme://host[:port]) allowed to call the API besides the server's own (TANDEM_ALLOWED_ORIGINS)")
	durations := []struct {
		p    *time.Duration
		name string
		env  string
		def  time.Duration
		help string
	}{
		{&o.createGrace, "create-grace", "TANDEM_CREATE_GRACE", 30 * time.Second, "how long POST /v1/workspaces holds a workspace open"},
		{&o.detachGrace, "detach-grace", "TANDEM_DETACH_GRACE", 10 * time.Second, "how long a workspace stays open after its last stream"},
		{&o.heartbeat, "heartbeat", "TANDEM_HEARTBEAT", 15 * time.Second, "interval of the stream's ': ping' comments"},
		{&o.leaseTTL, "lease-ttl", "TANDEM_LEASE_TTL", 5 * time.Second, "in a cluster, how long a node holds a workspace without renewing (a dead owner is replaced after it)"},
	}
	for _, d := range durations {
		def, derr := envDur(d.env, d.def)
		if derr != nil && err == nil {
			err = derr
		}
		fs.DurationVar(d.p, d.name, def, d.help+" ("+d.env+")")
	}
	if err != nil {
		return o, err
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, d := range durations {
		if *d.p <= 0 {
			return o, fmt.Errorf("--%s must be positive", d.name)
		}
	}
	if *rate != "" {
		r, err := strconv.ParseFloat(*rate, 64)
		if err != nil || r < 0 || math.IsInf(r, 0) || math.IsNaN(r) {
			return o, fmt.Errorf("--rate must be a number of requests per second, 0 or more, got %q", *rate)
		}
		o.rate, o.rateSet = r, true
	}
	if (o.storeURL == "") != (o.busURL == "") {
		return o, errors.New("a cluster needs both --store (TANDEM_STORE) and --bus (TANDEM_BUS)")
	}
	for _, origin := range strings.Split(*origins, ",") {
		if origin = strings.TrimSpace(origin); origin == "" {
			continue
		}
		if _, err := httpapi.CheckOrigin(origin); err != nil {
			return o, fmt.Errorf("--allowed-origins: %w", err)
		}
		o.allowedOrigins = append(o.allowedOrigins, origin)
	}
	return o, nil
}

// sandboxHelper is this binary, which starts the agent's commands
// confined (its hidden sandbox-exec command); "" when it cannot be found,
// and then no command runs but under sandbox "off".
func sandboxHelper(stderr io.Writer) string {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "tandem serve: finding this binary for the sandbox:", err)
		return ""
	}
	return exe
}

// sandboxLine is tandem serve's line about the sandbox at start.
func sandboxLine(st proto.SandboxStatus) string {
	if st.Available {
		return fmt.Sprintf("tandem sandbox: the agent's commands run confined (%s)", st.Mechanism)
	}
	return fmt.Sprintf(`tandem sandbox: unavailable (%s): bash commands under sandbox "workspace" or "read-only" will not run; an owner can set sandbox: "off" to run them unconfined`, st.Reason)
}

func defaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "tandem")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "share", "tandem")
}

// printSignIn writes to w a link to the web app of the server at base that
// signs its opener in: it carries a one-time code (valid a minute), never
// the token, which a terminal's scrollback would keep.
func printSignIn(ctx context.Context, w io.Writer, base, token string) {
	c := client.New(base, token)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sc, err := c.SignInCode(ctx)
	if err != nil {
		fmt.Fprintf(w, "tandem: no sign-in link for the web app: %v\n", explain(err))
		return
	}
	fmt.Fprintf(w, "tandem: sign in to the web app: %s\n        (works once, within a minute; `tandem web` opens a new one)\n", signInURL(base, sc.Code))
}

// isLoopback reports whether addr only listens on loopback. An empty host
// means every interface, which is not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("bad --addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// errModel is a --model (TANDEM_MODEL) no provider can serve: a usage
// error, where a bad configuration file is not.
var errModel = errors.New("--model (TANDEM_MODEL)")

// loadConfig reads the server's configuration file and checks it with the
// default model: an unknown key, a bad value or a model of no provider
// stops the server, naming the file, the key and why.
func loadConfig(o serveOptions, getenv func(string) string) (*config.File, error) {
	file, err := config.LoadServer(o.config, getenv)
	if err != nil {
		return nil, err
	}
	// What no single file can say (a model of an unknown provider).
	cfg, err := config.Merge(file)
	if err != nil {
		return nil, err
	}
	// A model the server cannot build is refused now, not at each run.
	if o.model != "" {
		if err := cfg.CheckModel(o.model); err != nil {
			return nil, fmt.Errorf("%w: %w", errModel, err)
		}
	}
	return file, nil
}

// configError prints why the configuration stops the command and returns
// its exit code: 2 for a bad --model, 1 for a bad file.
func configError(stderr io.Writer, cmd string, err error) int {
	if errors.Is(err, errModel) {
		fmt.Fprintf(stderr, "tandem %s: %v\n", cmd, err)
		return 2
	}
	fmt.Fprintf(stderr, "tandem %s: invalid configuration:\n%v\n", cmd, err)
	return 1
}

func serve(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseServe(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "tandem serve:", err)
		return 2
	}
	file, err := loadConfig(o, getenv)
	if err != nil {
		return configError(stderr, "serve", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(stderr, "tandem serve: bad log level:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	tuneGC(getenv, logger)
	raiseFileLimit(logger)

	loopback, err := isLoopback(o.addr)
	if err != nil {
		fmt.Fprintln(stderr, "tandem serve:", err)
		return 2
	}
	if !loopback && o.token == "" {
		fmt.Fprintf(stderr, "tandem serve: refusing to listen on non-loopback address %s without an explicit --token (or TANDEM_TOKEN)\n", o.addr)
		return 2
	}
	if o.copilotAddr != "" {
		// The Copilot port is one more way in: held to the same rule.
		loopback, err := isLoopback(o.copilotAddr)
		if err != nil {
			fmt.Fprintln(stderr, "tandem serve: --copilot-addr:", err)
			return 2
		}
		if !loopback && o.token == "" {
			fmt.Fprintf(stderr, "tandem serve: refusing to serve the Copilot protocol on non-loopback address %s without an explicit --token (or TANDEM_TOKEN)\n", o.copilotAddr)
			return 2
		}
	}
	// The data dir is taken before anything is read from it or written to
	// it: a second server must stop here, before it touches the token.
	dir, err := server.OpenDataDir(o.dataDir)
	if err != nil {
		fmt.Fprintln(stderr, "tandem serve:", err)
		return 1
	}
	token := o.token
	if token == "" {
		var path string
		token, path, err = server.LoadOrCreateToken(dir.Path())
		if err != nil {
			dir.Close()
			fmt.Fprintln(stderr, "tandem serve:", err)
			return 1
		}
		fmt.Fprintf(stderr, "tandem: bearer token in %s\n", path)
	}

	if o.debugAddr != "" {
		stopDebug, err := startDebug(o.debugAddr, logger)
		if err != nil {
			dir.Close()
			fmt.Fprintln(stderr, "tandem serve:", err)
			return 2
		}
		defer stopDebug()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.New(ctx, server.Config{
		Dir:            dir,
		Token:          token,
		DefaultModel:   o.model,
		Config:         file,
		CreateGrace:    o.createGrace,
		DetachGrace:    o.detachGrace,
		Heartbeat:      o.heartbeat,
		AllowedOrigins: o.allowedOrigins,
		Logger:         logger,
		StoreURL:       o.storeURL,
		BusURL:         o.busURL,
		NodeID:         o.nodeID,
		LeaseTTL:       o.leaseTTL,
		Rate:           o.rate,
		RateSet:        o.rateSet,
		SandboxHelper:  sandboxHelper(stderr),
	})
	if err != nil {
		fmt.Fprintln(stderr, "tandem serve:", err)
		return 1
	}
	ln, err := srv.Listen(o.addr)
	if err != nil {
		if isAddrInUse(err) {
			err = fmt.Errorf("%w\n%s", err, whoListens(o.addr, getenv))
		}
		fmt.Fprintln(stderr, "tandem serve:", err)
		_ = srv.Shutdown(context.Background())
		return 1
	}
	fmt.Fprintf(stdout, "tandem listening on http://%s\n", ln.Addr())
	fmt.Fprintln(stdout, sandboxLine(srv.SandboxStatus()))
	if o.copilotAddr != "" {
		stopCopilot, err := serveCopilot(ctx, o.copilotAddr, ln.Addr(), getenv, stdout, logger)
		if err != nil {
			fmt.Fprintln(stderr, "tandem serve:", err)
			_ = srv.Shutdown(context.Background())
			return 1
		}
		defer stopCopilot()
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if isTerminal(stderr) {
		// A person at a terminal: one link signs them in to the web app.
		printSignIn(ctx, stderr, "http://"+loopbackAddr(ln.Addr()), token)
	}
	select {
	case err = <-served:
		logger.Error("server stopped", "err", err)
		_ = srv.Shutdown(context.Background())
		return 1
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		logger.Error("shutdown", "err", err)
		code = 1
	}
	if err := <-served; err != nil {
		logger.Error("serve", "err", err)
	}
	return code
}

// isAddrInUse reports whether a listen failed because the port is taken.
func isAddrInUse(err error) bool {
	if errors.Is(err, syscall.EADDRINUSE) {
		return true
	}
	msg := strings.ToLower(err.Error())
	// Windows says WSAEADDRINUSE in its own words.
	return strings.Contains(msg, "address already in use") || strings.Contains(msg, "only one usage of each socket address")
}

// whoListens says which process to look for when addr is taken: a tandem
// server of the default data dir if it is the one, else how to find out.
func whoListens(addr string, getenv func(string) string) string {
	_, port, _ := net.SplitHostPort(addr)
	dir := defaultDataDir(getenv)
	if info, ok, err := server.RunningServer(dir, 0); err == nil && ok {
		if u, err := url.Parse(info.URL); err == nil && u.Port() == port {
			return fmt.Sprintf("tandem pid %d (data dir %s) listens there, as its server.json says: stop it, or pick another --addr (port 0 picks a free one)", info.PID, dir)
		}
	}
	return fmt.Sprintf("another process listens on port %s. A tandem server names its pid and URL in its data dir's server.json (%s for the default data dir); `lsof -i :%s` names any process. Stop it, or pick another --addr (port 0 picks a free one).",
		port, filepath.Join(dir, "server.json"), port)
}
