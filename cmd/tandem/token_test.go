package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// tandem token create prints the secret once, list shows the token without
// it, and revoke makes the server refuse it; through a running server.
func TestTokenCommandsThroughTheServer(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)

	out, errOut, code := runCLI(t, dir, env, "token", "create", "alice", "--role", "viewer", "--expires", "720h")
	require.Equal(t, 0, code, errOut)
	secret := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(secret, "tdm_"), out)
	assert.Contains(t, errOut, "for alice (viewer), expires")
	alice := client.New(srv.url, secret)
	t.Cleanup(alice.CloseIdleConnections)
	me, err := alice.Me(t.Context())
	require.NoError(t, err)
	assert.Equal(t, proto.Me{TokenID: me.TokenID, Name: "alice", Role: "viewer", WorkspaceRoots: []string{}}, me)

	out, errOut, code = runCLI(t, dir, env, "token", "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "alice")
	assert.Contains(t, out, "owner")
	assert.NotContains(t, out, secret)

	_, errOut, code = runCLI(t, dir, env, "token", "create", "alice")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "already exists")
	// A viewer cannot manage tokens.
	_, errOut, code = runCLI(t, dir, append(env, "TANDEM_TOKEN="+secret), "token", "list")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "role viewer may not list tokens")

	_, errOut, code = runCLI(t, dir, env, "token", "revoke", "alice")
	require.Equal(t, 0, code, errOut)
	_, err = alice.Me(t.Context())
	assert.True(t, client.IsCode(err, proto.CodeUnauthorized), "%v", err)

	_, _, code = runCLI(t, dir, env, "token", "frobnicate")
	assert.Equal(t, 2, code)
	_, _, code = runCLI(t, dir, env, "token", "create")
	assert.Equal(t, 2, code)
}

// With no server running, the commands work on the data dir (through a
// server started in the command's process), and what they did is there
// for the next server.
func TestTokenCommandsOnTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := cliEnvironment(t, "TANDEM_DATA_DIR="+t.TempDir())
	out, errOut, code := runCLI(t, dir, env, "token", "create", "bob", "--role", "member")
	require.Equal(t, 0, code, errOut)
	secret := strings.TrimSpace(out)
	out, errOut, code = runCLI(t, dir, env, "token", "list", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"name": "bob"`)
	assert.NotContains(t, out, secret)
	_, errOut, code = runCLI(t, dir, env, "token", "revoke", "bob")
	require.Equal(t, 0, code, errOut)
	out, errOut, code = runCLI(t, dir, env, "token", "list")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "bob")
}
