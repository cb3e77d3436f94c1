package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/tandem-dev/tandem/internal/store/groupcommit"
)

// maxBatch bounds how many statements share one transaction, so one commit
// never holds the write lock for long.
const maxBatch = 256

// unit is one write waiting for the group commit: its statements run in
// order, in the same transaction, and succeed or fail together.
type unit struct {
	ctx   context.Context
	stmts []stmt
	// done gets the outcome, with the result of the last statement; it runs
	// on the batcher's goroutine.
	done func(stmtResult)
}

// stmt is one statement of a unit.
type stmt struct {
	query string
	args  []any
}

type stmtResult struct {
	res sql.Result
	err error
}

// batcher commits the small writes (events, messages, sessions, pending
// rows; all but workspace creation and session deletion) in groups:
// whatever is queued when the writer gets to it goes into one
// transaction. Under load that turns N commits into one, which is what
// keeps a prompt's 202 from queueing behind the writes of every run in
// flight. Units commit in the order they were queued.
type batcher struct {
	w     *sql.DB
	stmts *stmtCache
	queue *groupcommit.Queue[*unit]
}

func newBatcher(w *sql.DB) *batcher {
	b := &batcher{w: w, stmts: &stmtCache{db: w}}
	b.queue = groupcommit.New(maxBatch, b.commit)
	return b
}

// exec queues one statement and waits for its commit.
func (b *batcher) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return b.submitWait(ctx, []stmt{{query, args}})
}

// submitWait queues the statements as one unit and waits for its commit.
func (b *batcher) submitWait(ctx context.Context, stmts []stmt) (sql.Result, error) {
	out := make(chan stmtResult, 1)
	if err := b.queue.Submit(ctx, &unit{ctx: ctx, stmts: stmts, done: func(r stmtResult) { out <- r }}); err != nil {
		return nil, err
	}
	// Once queued the unit is the batcher's: waiting for its outcome, even
	// past ctx, keeps the caller from reporting a failure for a write that
	// then commits.
	r := <-out
	return r.res, r.err
}

// commit runs the batch in one transaction. If any unit fails, the
// transaction is rolled back and each unit is retried on its own, so one bad
// write (a duplicate seq) never fails its neighbours.
func (b *batcher) commit(batch []*unit) {
	live := batch[:0:0]
	for _, u := range batch {
		if err := u.ctx.Err(); err != nil {
			u.done(stmtResult{err: err})
			continue
		}
		live = append(live, u)
	}
	// Prepare outside the transaction: the writer has one connection, and
	// preparing on the pool while the transaction holds it would wait forever.
	live = slices.DeleteFunc(live, func(u *unit) bool {
		for _, s := range u.stmts {
			if _, err := b.stmts.get(context.Background(), s.query); err != nil {
				u.done(stmtResult{err: classify(err)})
				return true
			}
		}
		return false
	})
	if len(live) == 0 {
		return
	}
	results := make([]stmtResult, len(live))
	err := inTx(context.Background(), b.w, func(tx *sql.Tx) error {
		for i, u := range live {
			res, err := b.execIn(tx, u)
			if err != nil {
				return err
			}
			results[i].res = res
		}
		return nil
	})
	if err == nil {
		for i, u := range live {
			u.done(results[i])
		}
		return
	}
	if len(live) == 1 {
		live[0].done(stmtResult{err: err})
		return
	}
	for _, u := range live {
		var res sql.Result
		err := inTx(context.Background(), b.w, func(tx *sql.Tx) error {
			var err error
			res, err = b.execIn(tx, u)
			return err
		})
		u.done(stmtResult{res: res, err: err})
	}
}

// execIn runs u's statements in tx through their cached statements
// (prepared by commit); the writer has a single connection, so they are
// already prepared on the tx's.
func (b *batcher) execIn(tx *sql.Tx, u *unit) (res sql.Result, err error) {
	for _, s := range u.stmts {
		if ps, ok := b.stmts.m.Load(s.query); ok {
			res, err = tx.Stmt(ps.(*sql.Stmt)).Exec(s.args...)
		} else {
			res, err = tx.Exec(s.query, s.args...)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// close commits what is queued and stops the batcher.
func (b *batcher) close() { b.queue.Close() }
