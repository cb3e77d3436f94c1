package server

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOneHolderPerDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := OpenDataDir(dir)
	require.NoError(t, err)
	require.NoError(t, d.Publish("http://127.0.0.1:1234"))

	raw, err := os.ReadFile(filepath.Join(dir, "server.json"))
	require.NoError(t, err)
	var info ServerInfo
	require.NoError(t, json.Unmarshal(raw, &info))
	assert.Equal(t, ServerInfo{URL: "http://127.0.0.1:1234", PID: os.Getpid()}, info)

	start := time.Now()
	_, err = OpenDataDir(dir)
	var inUse *InUseError
	require.True(t, errors.As(err, &inUse), "got %v", err)
	assert.Less(t, time.Since(start), lockRetry/2, "a live holder that said who it is fails the open at once")
	assert.EqualError(t, err, "data dir "+dir+" is in use by tandem pid "+itoa(os.Getpid())+" at http://127.0.0.1:1234")

	got, ok, err := RunningServer(dir, time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, info, got)

	require.NoError(t, d.Close())
	_, err = os.Stat(filepath.Join(dir, "server.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a clean stop removes server.json")
	_, ok, err = RunningServer(dir, time.Second)
	require.NoError(t, err)
	assert.False(t, ok)

	d2, err := OpenDataDir(dir)
	require.NoError(t, err)
	require.NoError(t, d2.Close())
}

// A server.json whose writer is gone (killed: its lock went with it) is not
// a running server.
func TestStaleServerJSONIsIgnored(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.json"), []byte(`{"url":"http://127.0.0.1:9","pid":1}`), 0o600))
	_, ok, err := RunningServer(dir, time.Second)
	require.NoError(t, err)
	assert.False(t, ok)
	d, err := OpenDataDir(dir)
	require.NoError(t, err)
	defer d.Close()
	info, err := readInfo(dir)
	require.NoError(t, err)
	assert.Equal(t, ServerInfo{PID: os.Getpid()}, info, "the new holder replaces it")
}

func TestDataDirIsPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix permission bits")
	}
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	d, err := OpenDataDir(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Publish("http://127.0.0.1:1"))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, name := range []string{"server.lock", "server.json"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
