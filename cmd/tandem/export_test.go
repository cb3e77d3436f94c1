package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// tandem export writes the current session as a document, and tandem
// import on another server makes a session with the same history from it.
func TestExportImportCLI(t *testing.T) {
	t.Parallel()
	src, dst := startCLIServer(t), startCLIServer(t)
	dir := t.TempDir()
	_, errOut, code := runCLI(t, dir, src.env(t), "export")
	assert.Equal(t, 1, code, "no workspace yet")
	assert.Contains(t, errOut, "no workspace")

	_, errOut, code = runCLI(t, dir, src.env(t), "run", "hello")
	require.Equal(t, 0, code, errOut)
	file := filepath.Join(t.TempDir(), "session.json")
	_, errOut, code = runCLI(t, dir, src.env(t), "export", file)
	require.Equal(t, 0, code, errOut)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc proto.Export
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, proto.ExportFormat, doc.Format)
	require.Len(t, doc.Messages, 2)

	other := t.TempDir()
	out, errOut, code := runCLI(t, other, dst.env(t), "import", file)
	require.Equal(t, 0, code, errOut)
	sid := out[:len(out)-1]
	sessions := sessionsOf(t, other, dst.env(t))
	require.Len(t, sessions, 1)
	assert.Equal(t, sid, sessions[0].ID)
	msgs, err := dst.c.Messages(t.Context(), sessions[0].WorkspaceID, sid)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for i := range msgs {
		assert.Equal(t, doc.Messages[i].Parts, msgs[i].Parts)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"format":"nope"}`), 0o600))
	_, errOut, code = runCLI(t, other, dst.env(t), "import", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "format")
	assert.Len(t, sessionsOf(t, other, dst.env(t)), 1, "a bad document creates nothing")
}
