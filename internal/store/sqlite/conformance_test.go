package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/storetest"
)

// harness opens each store on a file of its own; Reopen finds the file of
// a store by the store. Break fills the disk (see setFileSizeLimit).
func harness() storetest.Harness {
	var (
		mu    sync.Mutex
		paths = map[store.Store]string{}
	)
	open := func(t testing.TB, path string) store.Store {
		db, err := Open(context.Background(), path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		mu.Lock()
		paths[db] = path
		mu.Unlock()
		return db
	}
	return storetest.Harness{
		Open: func(t testing.TB) store.Store {
			return open(t, filepath.Join(t.TempDir(), "tandem.db"))
		},
		Reopen: func(t testing.TB, s store.Store) store.Store {
			mu.Lock()
			path := paths[s]
			mu.Unlock()
			require.NotEmpty(t, path, "reopen: a store the harness did not open")
			require.NoError(t, s.Close())
			return open(t, path)
		},
		Break: breakDisk,
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, harness().Open)
}
