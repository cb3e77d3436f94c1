package sqlite

import (
	"database/sql"
	"sync"
	"time"
)

// checkpointInterval is how often the WAL is copied into the database file.
// PASSIVE checkpoints take no lock a writer waits for, but each starts with
// an fsync of the WAL, and commits that append to the WAL meanwhile stalled
// for as long as that fsync took, which grows with what was written since
// the last one: once a second at 320 prompts/s, some commits took 7-15 ms.
// A shorter interval keeps each fsync small; a checkpoint with nothing to
// copy costs nothing.
const checkpointInterval = 250 * time.Millisecond

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
