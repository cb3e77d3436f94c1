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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// webEnv is a cliEnv for webCommand with the given variables.
func webEnv(vars map[string]string) (*cliEnv, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	return &cliEnv{getenv: func(k string) string { return vars[k] }, stdout: &stdout, stderr: &stderr}, &stdout, &stderr
}

func TestWebOpensTheAppWithTheToken(t *testing.T) {
	s := startCLIServer(t)
	env, stdout, stderr := webEnv(map[string]string{"TANDEM_URL": s.url, "TANDEM_TOKEN": s.token})
	var opened []string
	code := webCommand(nil, env, func(_ context.Context, u string) error {
		opened = append(opened, u)
		return nil
	})
	require.Equal(t, 0, code, stderr.String())
	require.Equal(t, []string{s.url + "/#token=" + s.token}, opened)
	assert.Empty(t, stdout.String(), "the token is not printed when a browser got it")
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
	assert.Equal(t, s.url+"/#token="+s.token+"\n", stdout.String())
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

func TestAppURLEscapesTheToken(t *testing.T) {
	assert.Equal(t, "http://h:1/#token=a+b%26c%23d", appURL("http://h:1/", "a b&c#d"))
}

// The command as the binary runs it: --print and --json give the URL.
func TestWebCommandLine(t *testing.T) {
	s := startCLIServer(t)
	env := s.env(t)
	out, errOut, code := runCLI(t, t.TempDir(), env, "web", "--print")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, s.url+"/#token="+s.token, strings.TrimSpace(out))

	out, errOut, code = runCLI(t, t.TempDir(), env, "web", "--json")
	require.Equal(t, 0, code, errOut)
	var body struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(out), &body))
	assert.Equal(t, s.url+"/#token="+s.token, body.URL)

	// A browser that fails: the URL is printed.
	env = append(env, "BROWSER=false")
	out, errOut, code = runCLI(t, t.TempDir(), env, "web")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, s.url+"/#token="+s.token, strings.TrimSpace(out))
}

func TestOpenerNeedsADisplay(t *testing.T) {
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		t.Skip("the display check is for X11 and Wayland systems")
	}
	open := browserOpener(func(string) string { return "" })
	assert.ErrorIs(t, open(context.Background(), "http://127.0.0.1:1/"), errNoDisplay)
}
