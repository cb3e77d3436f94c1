package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// webEnv is a cliEnv for webCommand with the given variables.
func webEnv(vars map[string]string) (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &cliEnv{getenv: func(k string) string { return vars[k] }, stdout: &stdout, stderr: &stderr}, &stdout, &stderr
}

// signInCodeOf returns the one-time code of a sign-in URL of the server.
func signInCodeOf(t *testing.T, s *cliServer, u string) string {
	t.Helper()
	code, ok := strings.CutPrefix(u, s.url+"/#code=")
	require.True(t, ok, "%q is not a sign-in link of %s", u, s.url)
	require.NotContains(t, u, s.token, "the URL never holds the token")
	return code
}

// exchange checks that code signs in as the server's token, once.
func exchange(t *testing.T, s *cliServer, code string) {
	t.Helper()
	anon := client.New(s.url, "")
	got, err := anon.SignIn(t.Context(), code)
	require.NoError(t, err)
	assert.Equal(t, s.token, got, "the code stands for the token that asked for it")
	_, err = anon.SignIn(t.Context(), code)
	assert.True(t, client.IsCode(err, proto.CodeUnauthorized), "a code works once: %v", err)
}

func TestWebOpensTheAppWithAOneTimeCode(t *testing.T) {
	s := startCLIServer(t)
	env, stdout, stderr := webEnv(map[string]string{"TANDEM_URL": s.url, "TANDEM_TOKEN": s.token})
	var opened []string
	code := webCommand(nil, env, func(_ context.Context, u string) error {
		opened = append(opened, u)
		return nil
	})
	require.Equal(t, 0, code, stderr.String())
	require.Len(t, opened, 1)
	exchange(t, s, signInCodeOf(t, s, opened[0]))
	assert.Empty(t, stdout.String(), "nothing is printed when a browser got the link")
	assert.Contains(t, stderr.String(), "opened "+s.url+"/")
	assert.NotContains(t, stderr.String(), s.token)

	// What the browser opens is the app (or the page saying how to build it), without a token.
	resp, err := http.Get(opened[0])
	require.NoError(t, err)
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(page), "Tandem")
	assert.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))
}

func TestWebPrintsTheURLWhenNoBrowserOpens(t *testing.T) {
	s := startCLIServer(t)
	// The token comes from the token file this time.
	dataDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "token"), []byte(s.token+"\n"), 0o600))
	env, stdout, stderr := webEnv(map[string]string{"TANDEM_URL": s.url, "TANDEM_DATA_DIR": dataDir})
	code := webCommand(nil, env, func(context.Context, string) error { return errNoDisplay })
	require.Equal(t, 0, code, stderr.String())
	exchange(t, s, signInCodeOf(t, s, strings.TrimSuffix(stdout.String(), "\n")))
	assert.Contains(t, stderr.String(), "cannot open a browser")
}

func TestWebRefusedToken(t *testing.T) {
	s := startCLIServer(t)
	env, stdout, stderr := webEnv(map[string]string{"TANDEM_URL": s.url, "TANDEM_TOKEN": "wrong"})
	code := webCommand(nil, env, func(context.Context, string) error {
		t.Error("a browser was opened with a refused token")
		return nil
	})
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), "refused the token")
}

func TestWebWithoutServer(t *testing.T) {
	env, _, stderr := webEnv(map[string]string{"TANDEM_URL": "http://127.0.0.1:1", "TANDEM_TOKEN": "x"})
	code := webCommand(nil, env, func(context.Context, string) error {
		return errors.New("unexpected")
	})
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "tandem serve")
}

func TestSignInURLEscapesTheCode(t *testing.T) {
	assert.Equal(t, "http://h:1/#code=a+b%26c%23d", signInURL("http://h:1/", "a b&c#d"))
}

// The command as the binary runs it: --print and --json give the URL.
func TestWebCommandLine(t *testing.T) {
	s := startCLIServer(t)
	env := s.env(t)
	out, errOut, code := runCLI(t, t.TempDir(), env, "web", "--print")
	require.Equal(t, 0, code, errOut)
	exchange(t, s, signInCodeOf(t, s, strings.TrimSpace(out)))

	out, errOut, code = runCLI(t, t.TempDir(), env, "web", "--json")
	require.Equal(t, 0, code, errOut)
	var body struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(out), &body))
	exchange(t, s, signInCodeOf(t, s, body.URL))

	// A browser that fails: the URL is printed.
	env = append(env, "BROWSER=false")
	out, errOut, code = runCLI(t, t.TempDir(), env, "web")
	require.Equal(t, 0, code, errOut)
	exchange(t, s, signInCodeOf(t, s, strings.TrimSpace(out)))
}

// The browser's command line, which every local user can read in
// /proc/PID/cmdline while it runs, holds a one-time code, not the token.
func TestWebBrowserCommandLineHoldsNoToken(t *testing.T) {
	s := startCLIServer(t)
	dir := t.TempDir()
	argv := filepath.Join(dir, "argv")
	browser := filepath.Join(dir, "browser")
	require.NoError(t, os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+argv+"\n"), 0o700))
	_, errOut, code := runCLI(t, t.TempDir(), append(s.env(t), "BROWSER="+browser), "web")
	require.Equal(t, 0, code, errOut)
	raw, err := os.ReadFile(argv)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), s.token)
	exchange(t, s, signInCodeOf(t, s, strings.TrimSpace(string(raw))))
}

func TestOpenerNeedsADisplay(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the display check is for X11 and Wayland systems")
	}
	open := browserOpener(func(string) string { return "" })
	assert.ErrorIs(t, open(context.Background(), "http://127.0.0.1:1/"), errNoDisplay)
}

// POST /v1/signin needs no token but is rate-limited per address, and no
// code reaches the server's log, even at debug level.
func TestSignInExchangeIsLimitedAndNeverLogged(t *testing.T) {
	const token = "signin-test-token"
	p := startServe(t, []string{"TANDEM_TOKEN=" + token, "TANDEM_DATA_DIR=" + t.TempDir(), "TANDEM_MODEL=echo"}, "--log-level", "debug")
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	ctx := t.Context()
	owner := client.New(p.url, token)
	sc, err := owner.SignInCode(ctx)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Minute), sc.ExpiresAt.Time, 5*time.Second)

	anon := client.New(p.url, "")
	got, err := anon.SignIn(ctx, sc.Code)
	require.NoError(t, err)
	assert.Equal(t, token, got)

	// A viewer's code signs in as the viewer.
	viewer, err := owner.CreateToken(ctx, proto.CreateTokenRequest{Name: "vic", Role: "viewer"})
	require.NoError(t, err)
	vsc, err := client.New(p.url, viewer.Secret).SignInCode(ctx)
	require.NoError(t, err)
	got, err = anon.SignIn(ctx, vsc.Code)
	require.NoError(t, err)
	assert.Equal(t, viewer.Secret, got)

	limited := false
	for range 40 {
		_, err := anon.SignIn(ctx, "guess-"+sc.Code)
		if client.IsCode(err, proto.CodeRateLimited) {
			limited = true
			break
		}
		require.True(t, client.IsCode(err, proto.CodeUnauthorized), "%v", err)
	}
	assert.True(t, limited, "guesses from one address are rate-limited")
	_, err = anon.Me(ctx)
	assert.True(t, client.IsCode(err, proto.CodeUnauthorized), "a code is no token")

	logs := p.stderr.String()
	assert.Contains(t, logs, "/v1/signin", "the exchange is logged")
	assert.NotContains(t, logs, sc.Code, "the code never is")
	assert.NotContains(t, logs, vsc.Code)
}

// tandem serve at a terminal prints a link that signs its opener in to the
// web app: a one-time code, not the token.
func TestServeAtATerminalPrintsASignInLink(t *testing.T) {
	const token = "serve-terminal-token"
	tm := newTerm(t, append(os.Environ(), "TANDEM_TOKEN="+token, "TANDEM_DATA_DIR="+t.TempDir(), "TANDEM_MODEL=echo"))
	tm.start("srv", t.TempDir(), 200, 20, "serve", "--addr", "127.0.0.1:0")
	scr := tm.waitFor("srv", "tandem listening on ", "sign in to the web app: ", "within a minute")
	assert.NotContains(t, scr, token)
	var base, link string
	for _, line := range strings.Split(scr, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "tandem listening on "); ok {
			base = v
		}
		if _, v, ok := strings.Cut(line, "sign in to the web app: "); ok {
			link = strings.TrimSpace(v)
		}
	}
	code, ok := strings.CutPrefix(link, base+"/#code=")
	require.True(t, ok, "link %q of %q", link, base)
	got, err := client.New(base, "").SignIn(t.Context(), code)
	require.NoError(t, err)
	assert.Equal(t, token, got)
}
