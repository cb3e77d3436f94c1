package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// openTimeout bounds the browser opener (xdg-open and friends return once
// they handed the URL over).
const openTimeout = 10 * time.Second

// webCommand is tandem web: it opens the server's web app in a browser,
// signed in. The URL carries a one-time code, never the token: a browser's
// command line is readable by every local user (/proc/PID/cmdline) for as
// long as it runs. The code rides in the URL fragment, which a browser never
// sends to a server; the app drops it from the URL and exchanges it, once,
// within a minute, for the token (POST /v1/signin). When no browser can be
// opened it prints the URL instead.
func webCommand(args []string, env *cliEnv, open func(ctx context.Context, url string) error) int {
	var o clientOptions
	var printOnly bool
	fs := flag.NewFlagSet("web", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: tandem web [flags]\n\nOpens the web app of the server at --url in a browser, signed in with the token.")
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, `print {"url"} as JSON instead of opening a browser`)
	fs.BoolVar(&printOnly, "print", false, "print the URL (it holds a one-time code, good for a minute) instead of opening a browser")
	if err := parseNoArgs(fs, args); err != nil {
		return usageError(env, "web", err)
	}
	ctx := context.Background()
	// No server is started in-process: the page needs one that outlives
	// this command.
	b, err := o.connect(ctx, env, false)
	if err != nil {
		return fail(env, "web", err)
	}
	defer b.Close()
	// A refused token is said here, not in the browser.
	sc, err := b.c.SignInCode(ctx)
	if err != nil {
		return fail(env, "web", explain(err))
	}
	page := signInURL(b.url, sc.Code)
	if o.json {
		return printJSON(env.stdout, struct {
			URL string `json:"url"`
		}{page})
	}
	if printOnly {
		fmt.Fprintln(env.stdout, page)
		return exitOK
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := open(octx, page); err != nil {
		fmt.Fprintf(env.stderr, "tandem: cannot open a browser (%v); open this URL:\n", err)
		fmt.Fprintln(env.stdout, page)
		return exitOK
	}
	fmt.Fprintf(env.stderr, "tandem: opened %s in your browser\n", strings.TrimRight(b.url, "/")+"/")
	return exitOK
}

// signInURL is the app's address on the server at base, carrying a
// one-time sign-in code in the fragment.
func signInURL(base, code string) string {
	return strings.TrimRight(base, "/") + "/#code=" + url.QueryEscape(code)
}

// errNoDisplay: on a Linux or BSD console xdg-open would start a text
// browser in this terminal, which is not what anyone asked for.
var errNoDisplay = errors.New("no graphical display (DISPLAY and WAYLAND_DISPLAY are unset)")

// browserOpener returns the opener of the system the command runs on: $BROWSER
// when set, else the platform's own.
func browserOpener(getenv func(string) string) func(ctx context.Context, url string) error {
	return func(ctx context.Context, u string) error {
		var cmd *exec.Cmd
		switch {
		case getenv("BROWSER") != "":
			cmd = exec.CommandContext(ctx, getenv("BROWSER"), u)
		case runtime.GOOS == "darwin":
			cmd = exec.CommandContext(ctx, "open", u)
		case runtime.GOOS == "windows":
			// rundll32 takes the URL as one argument; cmd's start would
			// reparse it.
			cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", u)
		default:
			if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
				return errNoDisplay
			}
			cmd = exec.CommandContext(ctx, "xdg-open", u)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			if msg := strings.TrimSpace(string(out)); msg != "" {
				return fmt.Errorf("%s: %w: %s", cmd.Path, err, msg)
			}
			return fmt.Errorf("%s: %w", cmd.Path, err)
		}
		return nil
	}
}
