package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The database and its -wal and -shm files hold session transcripts: only
// their owner may read them, even in a directory that already existed with
// a looser mode, and a file an older version left readable is tightened.
func TestOpenKeepsFilesPrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix permission bits")
	}
	dir := filepath.Join(t.TempDir(), "existing")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755)) // whatever the umask
	path := filepath.Join(dir, "tandem.db")

	check := func(when string) {
		t.Helper()
		for _, name := range []string{"tandem.db", "tandem.db-wal", "tandem.db-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			require.NoError(t, err, "%s: %s", when, name)
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s: %s", when, name)
		}
	}
	db, err := Open(context.Background(), path)
	require.NoError(t, err)
	mustWorkspace(t, db, "w1")
	check("new database")
	require.NoError(t, db.Close())

	for _, name := range []string{"tandem.db", "tandem.db-wal", "tandem.db-shm"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			require.NoError(t, os.Chmod(p, 0o644))
		}
	}
	require.NoError(t, os.Chmod(path, 0o644))
	db, err = Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	mustWorkspace(t, db, "w2")
	check("reopened database")
}
