package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
)

// maxBatch bounds how many statements share one transaction, so one commit
// never holds the write lock for long.
const maxBatch = 256

// errClosed is returned for writes submitted after Close.
var errClosed = errors.New("store is closed")

// stmt is one single-statement write waiting for the group commit.
type stmt struct {
	ctx   context.Context
	query string
	args  []any
	done  chan stmtResult
}

type stmtResult struct {
	res sql.Result
	err error
}

// batcher commits the hot single-statement writes (events, messages,
// touches, pending rows) in groups: whatever is queued when the writer gets
// to it goes into one transaction. Under load that turns N commits into one,
// which is what keeps a prompt's 202 from queueing behind the writes of
// every run in flight. Each write still returns only after its commit.
type batcher struct {
	w     *sql.DB
	stmts *stmtCache
	queue chan *stmt
	quit  chan struct{}
	done  chan struct{}
}

func newBatcher(w *sql.DB) *batcher {
	b := &batcher{w: w, stmts: &stmtCache{db: w}, queue: make(chan *stmt, maxBatch), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// exec queues one statement and waits for its commit.
func (b *batcher) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s := &stmt{ctx: ctx, query: query, args: args, done: make(chan stmtResult, 1)}
	select {
	case b.queue <- s:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, errClosed
	}
	// Once queued the statement is the batcher's: waiting for its outcome,
	// even past ctx, keeps the caller from reporting a failure for a write
	// that then commits.
	r := <-s.done
	return r.res, r.err
}

func (b *batcher) run() {
	defer close(b.done)
	for {
		var first *stmt
		select {
		case first = <-b.queue:
		case <-b.quit:
			// Writes queued before Close still commit.
			for {
				select {
				case s := <-b.queue:
					b.commit([]*stmt{s})
				default:
					return
				}
			}
		}
		batch := []*stmt{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case s := <-b.queue:
				batch = append(batch, s)
			default:
				break fill
			}
		}
		b.commit(batch)
	}
}

// commit runs the batch in one transaction. If any statement fails, the
// transaction is rolled back and each statement is retried on its own, so
// one bad write (a duplicate seq) never fails its neighbours.
func (b *batcher) commit(batch []*stmt) {
	live := batch[:0:0]
	for _, s := range batch {
		if err := s.ctx.Err(); err != nil {
			s.done <- stmtResult{err: err}
			continue
		}
		live = append(live, s)
	}
	if len(live) == 0 {
		return
	}
	// Prepare outside the transaction: the writer has one connection, and
	// preparing on the pool while the transaction holds it would wait forever.
	for _, s := range live {
		if _, err := b.stmts.get(context.Background(), s.query); err != nil {
			s.done <- stmtResult{err: err}
			s.query = ""
		}
	}
	live = slices.DeleteFunc(live, func(s *stmt) bool { return s.query == "" })
	results := make([]stmtResult, len(live))
	err := inTx(context.Background(), b.w, func(tx *sql.Tx) error {
		for i, s := range live {
			res, err := b.execIn(tx, s)
			if err != nil {
				return err
			}
			results[i].res = res
		}
		return nil
	})
	if err == nil {
		for i, s := range live {
			s.done <- results[i]
		}
		return
	}
	if len(live) == 1 {
		live[0].done <- stmtResult{err: err}
		return
	}
	for _, s := range live {
		var res sql.Result
		err := inTx(context.Background(), b.w, func(tx *sql.Tx) error {
			var err error
			res, err = b.execIn(tx, s)
			return err
		})
		s.done <- stmtResult{res: res, err: err}
	}
}

// execIn runs s in tx through its cached statement (prepared by commit); the
// writer has a single connection, so it is already prepared on the tx's.
func (b *batcher) execIn(tx *sql.Tx, s *stmt) (sql.Result, error) {
	ps, ok := b.stmts.m.Load(s.query)
	if !ok {
		return tx.Exec(s.query, s.args...)
	}
	return tx.Stmt(ps.(*sql.Stmt)).Exec(s.args...)
}

// close commits what is queued and stops the batcher.
func (b *batcher) close() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}
