package sqlite

import (
	"database/sql"
	"sync"
	"time"
)

// checkpointInterval is how often the WAL is copied into the database file.
// PASSIVE checkpoints never block writers or readers, so this only bounds how
// large the WAL grows between them.
const checkpointInterval = time.Second

// checkpointer runs PASSIVE WAL checkpoints on a connection of its own, so
// the fsync a checkpoint needs never lands inside a commit a client waits for.
type checkpointer struct {
	db   *sql.DB // nil when it could not be opened; SQLite then checkpoints on close only
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func newCheckpointer(absPath string) *checkpointer {
	c := &checkpointer{quit: make(chan struct{}), done: make(chan struct{})}
	db, err := sql.Open("sqlite", dsn(absPath, false))
	if err == nil {
		db.SetMaxOpenConns(1)
		c.db = db
	}
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer close(c.done)
	if c.db == nil {
		return
	}
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			// A failed checkpoint is retried at the next tick; nothing is lost
			// while the WAL keeps the data.
			_, _ = c.db.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// close stops the checkpointer; later calls do nothing, like DB.Close's.
func (c *checkpointer) close() {
	c.once.Do(func() {
		close(c.quit)
		<-c.done
		if c.db != nil {
			c.db.Close()
		}
	})
}
