package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/sandbox"
)

func TestSandboxKeys(t *testing.T) {
	f, err := Parse("s.json", []byte(`{"sandbox": "read-only", "sandbox_network": true, "sandbox_read": ["/srv/ref"], "sandbox_write": ["/srv/cache"]}`))
	require.NoError(t, err)
	cfg, err := Merge(f)
	require.NoError(t, err)
	assert.Equal(t, sandbox.Settings{Mode: "read-only", Network: true, Read: []string{"/srv/ref"}, Write: []string{"/srv/cache"}}, cfg.Sandbox)

	for _, c := range []struct{ json, want string }{
		{`{"sandbox": "none"}`, `s.json:1:13: sandbox: "none" is not read-only, workspace or off`},
		{`{"sandbox_network": "yes"}`, `s.json:1:21: sandbox_network: must be true or false, got a string`},
		{`{"sandbox_read": ["relative"]}`, `s.json:1:19: sandbox_read[0]: must be an absolute path, got "relative"`},
		{`{"sandbox_write": "/srv"}`, `s.json:1:19: sandbox_write: must be an array, got a string`},
	} {
		_, err := Parse("s.json", []byte(c.json))
		require.Error(t, err, c.json)
		assert.Equal(t, c.want, err.(Errors)[0].Error(), c.json)
	}
}

// A workspace's file may narrow the server's sandbox; any key that widens
// it is an error naming the file.
func TestWorkspaceFileOnlyNarrowsTheSandbox(t *testing.T) {
	server, err := Parse("server.json", []byte(`{"sandbox_network": true, "sandbox_write": ["/srv/cache"]}`))
	require.NoError(t, err)
	narrow, err := ParseWorkspace("ws/.tandem/config.json", []byte(`{"sandbox": "read-only", "sandbox_network": false, "sandbox_write": ["/srv/cache/go"]}`))
	require.NoError(t, err)
	cfg, err := Merge(server, narrow)
	require.NoError(t, err)
	assert.Equal(t, sandbox.Settings{Mode: "read-only", Write: []string{"/srv/cache/go"}}, cfg.Sandbox)

	for _, body := range []string{`{"sandbox": "off"}`, `{"sandbox_read": ["/home"]}`, `{"sandbox_write": ["/srv"]}`} {
		ws, err := ParseWorkspace("ws/.tandem/config.json", []byte(body))
		require.NoError(t, err, body)
		_, err = Merge(server, ws)
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), "ws/.tandem/config.json", body)
		assert.Contains(t, err.Error(), "may only narrow", body)
	}
	// The same keys in the server's own file are the owner's to set.
	owner, err := Parse("owner.json", []byte(`{"sandbox": "off"}`))
	require.NoError(t, err)
	_, err = Merge(server, owner)
	require.NoError(t, err)
}
