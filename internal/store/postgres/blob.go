package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-dev/tandem/internal/store"
)

// PutBlob keeps data under id until TakeBlob takes it (or
// DeleteBlobsOlderThan sweeps it): a node-to-node command's input or answer
// too large for one bus message.
func (db *DB) PutBlob(ctx context.Context, id string, data []byte) error {
	if _, err := db.exec(ctx, `INSERT INTO cluster_blobs (id, data) VALUES ($1, $2)`, id, data); err != nil {
		return fmt.Errorf("put blob %s: %w", id, classify(err))
	}
	return nil
}

// TakeBlob returns the blob and deletes it; store.ErrNotFound when there
// is none (taken, swept or never put).
func (db *DB) TakeBlob(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	err := db.execRow(ctx, `DELETE FROM cluster_blobs WHERE id = $1 RETURNING data`, []any{id}, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("take blob %s: %w", id, classify(err))
	}
	return data, nil
}

// DeleteBlobsOlderThan deletes the blobs put more than age ago, which
// nobody took. Age is measured on the database's clock, which stamped
// them: a node whose clock runs ahead must not sweep blobs in flight.
func (db *DB) DeleteBlobsOlderThan(ctx context.Context, age time.Duration) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM cluster_blobs WHERE created_at < now() - $1 * interval '1 microsecond'`, age.Microseconds()); err != nil {
		return fmt.Errorf("delete old blobs: %w", classify(err))
	}
	return nil
}
