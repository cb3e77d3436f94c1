package postgres

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// A blob is taken once, whole; the sweep deletes only those put longer
// ago than its age on the database's clock (which stamped them), so a
// node whose clock runs ahead cannot sweep a blob still in flight.
func TestBlobsTakenOnceAndSweptByAge(t *testing.T) {
	db, _ := openTest(t)
	data := []byte("a command too large for one message")
	require.NoError(t, db.PutBlob(bg, "taken", data))
	got, err := db.TakeBlob(bg, "taken")
	require.NoError(t, err)
	assert.Equal(t, data, got)
	_, err = db.TakeBlob(bg, "taken")
	assert.ErrorIs(t, err, store.ErrNotFound, "taken once")

	require.NoError(t, db.PutBlob(bg, "fresh", data))
	require.NoError(t, db.PutBlob(bg, "left", data))
	_, err = db.pool.Exec(bg, `UPDATE cluster_blobs SET created_at = now() - interval '11 minutes' WHERE id = 'left'`)
	require.NoError(t, err)
	require.NoError(t, db.DeleteBlobsOlderThan(bg, 10*time.Minute))
	_, err = db.TakeBlob(bg, "left")
	assert.ErrorIs(t, err, store.ErrNotFound, "a blob nobody took is swept")
	got, err = db.TakeBlob(bg, "fresh")
	require.NoError(t, err, "a blob in flight is kept")
	assert.Equal(t, data, got)
}
