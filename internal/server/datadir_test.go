package server

import (
	"encoding/json"
	"errors"
	"log/slog"
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

// waitFor polls cond until it holds, failing after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// A data dir emptied (or removed) under the running server is noticed
// within a second: its lock, server.json and token come back, so a second
// process finds this server instead of starting another on the dir.
func TestGuardRestoresAnEmptiedDataDir(t *testing.T) {
	for _, how := range []string{"emptied", "removed"} {
		t.Run(how, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			d, err := OpenDataDir(dir)
			require.NoError(t, err)
			require.NoError(t, d.Publish("http://127.0.0.1:1234"))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600))
			lost := make(chan error, 1)
			d.Guard(map[string][]byte{"token": []byte("tok\n")}, slog.New(slog.DiscardHandler), func(err error) { lost <- err })
			defer d.Close()

			if how == "removed" {
				require.NoError(t, os.RemoveAll(dir))
			} else {
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				for _, e := range entries {
					require.NoError(t, os.RemoveAll(filepath.Join(dir, e.Name())))
				}
			}
			took := waitFor(t, 2*time.Second, "server.json back", func() bool {
				info, ok, err := RunningServer(dir, 0)
				return err == nil && ok && info.URL == "http://127.0.0.1:1234"
			})
			assert.Less(t, took, time.Second, "noticed within a second")
			raw, err := os.ReadFile(filepath.Join(dir, "token"))
			require.NoError(t, err)
			assert.Equal(t, "tok\n", string(raw))
			fi, err := os.Stat(dir)
			require.NoError(t, err)
			if runtime.GOOS != "windows" {
				assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
			}
			_, err = OpenDataDir(dir)
			var inUse *InUseError
			require.True(t, errors.As(err, &inUse), "a second server is refused: %v", err)
			select {
			case err := <-lost:
				t.Fatalf("lost: %v", err)
			default:
			}
		})
	}
}

// If another server took the emptied dir before this one noticed, this one
// is told to stop: never two servers believing they own one data dir.
func TestGuardStopsWhenAnotherServerTookTheDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := OpenDataDir(dir)
	require.NoError(t, err)
	require.NoError(t, d.Publish("http://127.0.0.1:1234"))
	require.NoError(t, os.RemoveAll(dir))
	other, err := OpenDataDir(dir)
	require.NoError(t, err, "the emptied dir looks free")
	defer other.Close()
	require.NoError(t, other.Publish("http://127.0.0.1:5678"))
	lost := make(chan error, 1)
	d.Guard(nil, slog.New(slog.DiscardHandler), func(err error) { lost <- err })
	defer d.Close()
	select {
	case err := <-lost:
		assert.Contains(t, err.Error(), "another process took it")
		assert.Contains(t, err.Error(), "http://127.0.0.1:5678")
	case <-time.After(2 * time.Second):
		t.Fatal("the guard never noticed that the dir is another server's")
	}
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "a second Close is a no-op")
	info, ok, err := RunningServer(dir, 0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "http://127.0.0.1:5678", info.URL, "the other server's server.json is left alone, by the guard and by Close")
}
