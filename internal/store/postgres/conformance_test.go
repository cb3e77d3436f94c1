package postgres

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
	"github.com/tandem-dev/tandem/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testDB is a store on a database of its own, reached through a proxy
// that Break cuts.
type testDB struct {
	url   string
	proxy *pgtest.Proxy
}

// harness gives each store a database of its own behind a proxy; Break
// cuts the proxy, as a database that went away.
func harness() storetest.Harness {
	var (
		mu  sync.Mutex
		dbs = map[store.Store]testDB{}
	)
	open := func(t testing.TB, tdb testDB) store.Store {
		db, err := Open(context.Background(), tdb.proxy.URL(tdb.url), Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		mu.Lock()
		dbs[db] = tdb
		mu.Unlock()
		return db
	}
	lookup := func(t testing.TB, s store.Store) testDB {
		mu.Lock()
		defer mu.Unlock()
		tdb, ok := dbs[s]
		require.True(t, ok, "a store the harness did not open")
		return tdb
	}
	return storetest.Harness{
		Open: func(t testing.TB) store.Store {
			u := pgtest.Database(t)
			return open(t, testDB{url: u, proxy: pgtest.NewProxy(t, u)})
		},
		Reopen: func(t testing.TB, s store.Store) store.Store {
			tdb := lookup(t, s)
			require.NoError(t, s.Close())
			return open(t, tdb)
		},
		Break: func(t *testing.T, s store.Store) func() {
			p := lookup(t, s).proxy
			p.Cut()
			return p.Restore
		},
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness())
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, harness().Open)
}
