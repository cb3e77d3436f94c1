package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-dev/tandem/internal/bridge"
	"github.com/tandem-dev/tandem/internal/bridge/httpbridge"
	"github.com/tandem-dev/tandem/internal/bridge/localbridge"
	"github.com/tandem-dev/tandem/internal/copilot"
	"github.com/tandem-dev/tandem/internal/server"
)

// copilotOptions are the command line the Copilot SDKs give their CLI, and
// the few flags of Tandem's own that make sense here.
type copilotOptions struct {
	stdio        bool
	port         int
	logLevel     string
	authTokenEnv string
	url          string
	dataDir      string
	token        string
}

// parseCopilotArgs reads the SDK's flags. Flags the SDK may add in later
// versions are ignored rather than refused: the SDK starts its CLI with
// whatever it knows, and a refusal would only make the app fail to start.
func parseCopilotArgs(args []string, env *cliEnv) (copilotOptions, error) {
	o := copilotOptions{}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		next := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch strings.TrimLeft(name, "-") {
		case "stdio":
			o.stdio = true
		case "port":
			var v string
			if v, err = next(); err == nil {
				o.port, err = strconv.Atoi(v)
				if err != nil || o.port < 0 || o.port > 65535 {
					err = fmt.Errorf("--port %q is not a port number", v)
				}
			}
		case "log-level":
			o.logLevel, err = next()
		case "auth-token-env":
			o.authTokenEnv, err = next()
		case "session-idle-timeout":
			_, err = next()
		case "url":
			o.url, err = next()
		case "data-dir":
			o.dataDir, err = next()
		case "token":
			o.token, err = next()
		case "h", "help":
			return o, errHelp
		default:
			// --headless, --no-auto-update, --no-auto-login, --remote and
			// anything newer: nothing to do.
		}
		if err != nil {
			return o, err
		}
	}
	if o.url == "" {
		o.url = env.getenv("TANDEM_URL")
	}
	if o.token == "" {
		o.token = env.getenv("TANDEM_TOKEN")
	}
	if o.dataDir == "" {
		o.dataDir = copilotDataDir(env.getenv)
	}
	return o, nil
}

var errHelp = errors.New("help")

const copilotUsage = `usage: tandem copilot [flags]

Serves the GitHub Copilot CLI's SDK protocol, so that apps written with a
Copilot SDK drive Tandem: point the SDK's CLI path (COPILOT_CLI_PATH) at a
script that runs "tandem copilot", which takes the flags the SDK passes. The
sessions live in the Tandem server running on the data dir, or in one this
command runs.

flags:
  --stdio               serve over stdin and stdout
  --port N              serve over TCP on 127.0.0.1:N (0 or none: a free port),
                        announced as "CLI server listening on port N"
  --auth-token-env VAR  the variable holding the token for COPILOT_API_URL
  --log-level LEVEL     none, error, warning, info, debug or all
  --url URL             the Tandem server to use (TANDEM_URL)
  --token TOKEN         its bearer token (TANDEM_TOKEN)
  --data-dir DIR        TANDEM_DATA_DIR, else $COPILOT_HOME/tandem when the SDK
                        sets COPILOT_HOME, else the usual data dir
  Other flags the SDK passes (--headless, --no-auto-update, --no-auto-login,
  --session-idle-timeout, --remote) are accepted and change nothing.

When COPILOT_API_URL names the SDK's model API (OpenAI Chat Completions),
sessions ask it for their models, by the SDK's names.
`

// copilotDataDir is where the sessions of SDK clients live: the SDK gives
// its CLI a home (COPILOT_HOME) that every client of one app shares, so the
// clients it starts one after the other find each other's sessions there.
func copilotDataDir(getenv func(string) string) string {
	if v := getenv("TANDEM_DATA_DIR"); v != "" {
		return v
	}
	if v := getenv("COPILOT_HOME"); v != "" {
		return filepath.Join(v, "tandem")
	}
	return defaultDataDir(getenv)
}

// copilotDetachGrace is the detach grace of a server this command runs: an
// SDK client that drops its connection and resumes with a new one offers the
// same tools again, which the server lets go only once the old client is gone.
const copilotDetachGrace = "1s"

func copilotCommand(args []string, env *cliEnv) int {
	getenv := env.getenv
	env.getenv = func(k string) string {
		if v := getenv(k); v != "" || k != "TANDEM_DETACH_GRACE" {
			return v
		}
		return copilotDetachGrace
	}
	o, err := parseCopilotArgs(args, env)
	if errors.Is(err, errHelp) {
		fmt.Fprint(env.stdout, copilotUsage)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "tandem copilot: %v\n%s", err, copilotUsage)
		return exitUsage
	}
	level := slog.LevelWarn
	switch o.logLevel {
	case "debug", "all":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error", "none":
		level = slog.LevelError
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := env.untilSignal()
	defer stop()

	be, err := copilotBackend(ctx, o, env)
	if err != nil {
		return fail(env, "copilot", err)
	}
	defer be.Close()
	cwd, err := currentDir(env)
	if err != nil {
		return fail(env, "copilot", err)
	}
	token, err := clientOptions{token: o.token, dataDir: o.dataDir}.resolveToken()
	if err != nil {
		return fail(env, "copilot", err)
	}
	gw, err := copilotGateway(o, env, logger)
	if err != nil {
		return fail(env, "copilot", err)
	}
	if gw != nil {
		defer gw.Close()
	}
	connect := httpbridge.Connect(be.url, token)
	if be.srv != nil {
		// The server is this process's: the bridge calls its domain, with
		// no loopback HTTP.
		services, audit := be.srv.Local()
		connect = localbridge.Connect(localbridge.Config{Services: services, Audit: audit})
	}
	cfg := copilotConfig(o, env, cwd, be.url, connect, logger)
	cfg.Gateway = gw
	srv := copilot.NewServer(cfg)
	if o.stdio {
		// The SDK owns this process: when it closes stdin, we are done.
		_ = srv.ServeConn(ctx, stdioConn{})
		return exitOK
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)))
	if err != nil {
		return fail(env, "copilot", err)
	}
	fmt.Fprintf(env.stdout, "CLI server listening on port %d\n", ln.Addr().(*net.TCPAddr).Port)
	if err := srv.Serve(ctx, ln); err != nil {
		return fail(env, "copilot", err)
	}
	return exitOK
}

// copilotConfig is the bridge's configuration from the SDK's environment,
// for the Tandem server at base, this command acting through connect.
//
// Who a connection is (contract section 10): over stdio, the process that
// started this command owns both ends, and the connection acts as this command's token.
// Over TCP every connection must connect with a Tandem token and acts as
// its person; the one exception is the connection token the starting
// process handed this command in COPILOT_CONNECTION_TOKEN (the SDKs make
// one up, a UUID, when they start their CLI on TCP): that process already
// holds token, so a connection presenting its secret acts as token.
func copilotConfig(o copilotOptions, env *cliEnv, cwd, base string, connect bridge.Connect, logger *slog.Logger) copilot.Config {
	cfg := copilot.Config{
		Connect: connect,
		Cwd:     cwd,
		Version: "tandem-" + server.Version,
		Logger:  logger,
	}
	if !o.stdio {
		cfg.Authenticate = copilotAuth(base, connect, env.getenv("COPILOT_CONNECTION_TOKEN"))
	}
	if api := env.getenv("COPILOT_API_URL"); api != "" {
		// The SDK's models live behind its API, which speaks Chat
		// Completions: Tandem's openai provider asks it (through the
		// gateway) for them by their own names.
		cfg.ModelPrefix = "openai/"
		cfg.Model = copilotDefaultModel
	}
	return cfg
}

// copilotAuth accepts a Tandem token of the server at base, or launch (when
// set), which stands for this command's own token (own connects as it).
func copilotAuth(base string, own bridge.Connect, launch string) func(ctx context.Context, clientID, token string) (bridge.Backend, error) {
	tandem := httpbridge.Authenticate(base)
	return func(ctx context.Context, clientID, token string) (bridge.Backend, error) {
		if launch != "" && subtle.ConstantTimeCompare([]byte(launch), []byte(token)) == 1 {
			return own(clientID)
		}
		return tandem(ctx, clientID, token)
	}
}

// copilotDefaultModel is the Copilot CLI's default model, asked of the
// SDK's API when a session names none.
const copilotDefaultModel = "claude-sonnet-4.5"

// copilotGateway starts the model gateway of the SDK's COPILOT_API_URL, if
// it names one; nil otherwise (sessions then use the server's models).
func copilotGateway(o copilotOptions, env *cliEnv, logger *slog.Logger) (*copilot.Gateway, error) {
	api := env.getenv("COPILOT_API_URL")
	if api == "" {
		return nil, nil
	}
	key := ""
	if o.authTokenEnv != "" {
		key = env.getenv(o.authTokenEnv)
	}
	if key == "" {
		key = env.getenv("GITHUB_TOKEN")
	}
	return copilot.NewGateway(api, key, logger)
}

// copilotBackend finds the Tandem server of the data dir, or runs one in
// this process: SDK clients started one after the other share it.
func copilotBackend(ctx context.Context, o copilotOptions, env *cliEnv) (*backend, error) {
	co := clientOptions{url: o.url, token: o.token, dataDir: o.dataDir}
	if co.url != "" {
		return co.connect(ctx, env, false)
	}
	// A client killed a moment ago may still hold the data dir, or have
	// left its server.json behind: look again for a while.
	deadline := time.Now().Add(copilotStartWait)
	for {
		b, err := copilotTryBackend(ctx, co, env)
		if err == nil || time.Now().After(deadline) {
			return b, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// copilotStartWait bounds the search for the data dir's server.
const copilotStartWait = 10 * time.Second

func copilotTryBackend(ctx context.Context, co clientOptions, env *cliEnv) (*backend, error) {
	info, ok, err := server.RunningServer(co.dataDir, startWait)
	if err != nil {
		return nil, err
	}
	if ok {
		return co.connectTo(ctx, info)
	}
	return co.startInProcess(ctx, env)
}

// stdioConn is the process's stdin and stdout as one connection.
type stdioConn struct{}

func (stdioConn) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdioConn) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdioConn) Close() error                { return os.Stdin.Close() }

// serveCopilot serves the Copilot SDK protocol on addr for tandem serve,
// beside its HTTP API at httpAddr: the bridge is one more client of the
// server, so what SDK apps do is live for every other client and the other
// way round. Each connection must connect with a Tandem token and acts as
// its person (contract section 10).
func serveCopilot(ctx context.Context, addr string, httpAddr net.Addr, getenv func(string) string, stdout io.Writer, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("copilot: %w", err)
	}
	base := "http://" + loopbackAddr(httpAddr)
	cfg := copilot.Config{
		Authenticate: httpbridge.Authenticate(base),
		Version:      "tandem-" + server.Version,
		Logger:       logger,
	}
	if cwd, err := os.Getwd(); err == nil {
		cfg.Cwd = cwd
	}
	env := &cliEnv{getenv: getenv}
	if gw, err := copilotGateway(copilotOptions{}, env, logger); err != nil {
		ln.Close()
		return nil, err
	} else if gw != nil {
		cfg.Gateway = gw
		cfg.ModelPrefix = "openai/"
		cfg.Model = copilotDefaultModel
	}
	srv := copilot.NewServer(cfg)
	fmt.Fprintf(stdout, "tandem serving the Copilot SDK protocol on %s\n", ln.Addr())
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			logger.Error("copilot", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		if cfg.Gateway != nil {
			_ = cfg.Gateway.Close()
		}
	}, nil
}

// loopbackAddr is where this process reaches a listener of its own: an
// unspecified host (every interface) is reached on loopback.
func loopbackAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		port := 0
		if ok {
			port = tcp.Port
		}
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return tcp.String()
}
