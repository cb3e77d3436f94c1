package pgtest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Each test gets a database of its own, empty, gone after the test.
func TestDatabaseIsOwnAndDropped(t *testing.T) {
	ctx := context.Background()
	var first string
	t.Run("a", func(t *testing.T) {
		first = Database(t)
		c, err := pgx.Connect(ctx, first)
		require.NoError(t, err)
		defer c.Close(ctx)
		_, err = c.Exec(ctx, `CREATE TABLE x (v int)`)
		require.NoError(t, err)
	})
	second := Database(t)
	require.NotEqual(t, first, second)
	c, err := pgx.Connect(ctx, second)
	require.NoError(t, err)
	defer c.Close(ctx)
	var me string
	require.NoError(t, c.QueryRow(ctx, `SELECT current_database()`).Scan(&me))
	require.Contains(t, second, "/"+me+"?")
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n))
	require.Zero(t, n, "a new database is empty")
	var exists bool
	u, err := url.Parse(first)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	// A throwaway server drops it in the background.
	require.Eventually(t, func() bool {
		return c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists) == nil && !exists
	}, 10*time.Second, 20*time.Millisecond, "the first test's database is dropped")
}

// Without a server, a test that needs one fails, saying how to get one; it
// does not skip. The test runs itself in a child process pointed at a
// server that is not there.
func TestNoServerFails(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		Database(t)
		t.Log("unreachable: Database returned")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoServerFails$", "-test.v")
	cmd.Env = append(os.Environ(), "PGTEST_CHILD=1",
		EnvURL+"=postgres://nobody:pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child must fail: %s", out)
	require.Contains(t, string(out), "--- FAIL: TestNoServerFails")
	require.Contains(t, string(out), "no PostgreSQL server for this test")
	require.Contains(t, string(out), EnvURL)
	require.NotContains(t, string(out), "SKIP")
	require.NotContains(t, string(out), "unreachable: Database returned")
}
