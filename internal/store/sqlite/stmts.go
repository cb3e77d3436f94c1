package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps one prepared statement per query text. Parsing and
// planning a statement costs more than running these small queries, and the
// same few queries run for every event and message.
type stmtCache struct {
	db *sql.DB
	m  sync.Map // query -> *sql.Stmt
}

// get returns the prepared statement for q, preparing it once.
func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := c.m.Load(q); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := c.m.LoadOrStore(q, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

func (c *stmtCache) close() {
	c.m.Range(func(_, s any) bool {
		s.(*sql.Stmt).Close()
		return true
	})
}

// query runs a read through a cached statement on the reader pool.
func (db *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := db.reads.get(ctx, q)
	if err != nil {
		return nil, classify(err)
	}
	rows, err := s.QueryContext(ctx, args...)
	return rows, classify(err)
}

// queryRow is query for one row. A statement that fails to prepare reports
// its error through the returned row.
func (db *DB) queryRow(ctx context.Context, q string, args ...any) row {
	s, err := db.reads.get(ctx, q)
	if err != nil {
		return row{db.reader.QueryRowContext(ctx, q, args...)}
	}
	return row{s.QueryRowContext(ctx, args...)}
}

// row is a *sql.Row whose Scan classifies errors of the storage.
type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error { return classify(r.r.Scan(dest...)) }
