package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/groupcommit"
)

// maxBatch bounds how many units share one transaction, so one commit
// never holds its locks for long.
const maxBatch = 256

// maxConflictRetries is how many times a batch that lost to a concurrent
// transaction (serialization failure, deadlock) is sent again before its
// writes fail as unavailable.
const maxConflictRetries = 3

// errWriteTimeout marks a write that got no answer within the write timeout.
var errWriteTimeout = fmt.Errorf("%w: no answer from the database in time", store.ErrUnavailable)

// stmt is one statement of a unit. With dest set, the statement returns
// one row that is scanned into dest; none found counts as no row affected.
type stmt struct {
	sql  string
	args []any
	dest []any
}

// result is a unit's outcome: the tag of its last statement (one row
// affected when a row was scanned), or why it failed.
type result struct {
	tag pgconn.CommandTag
	err error
}

// unit is one write waiting for the group commit: its statements run in
// order, in the same transaction, and succeed or fail together. fence,
// when set, is checked first in that transaction.
type unit struct {
	ctx   context.Context
	fence *Lease
	stmts []stmt
	done  chan result
	// deadline is when its caller stops waiting for it to be sent: past
	// it a unit still queued is withdrawn (see submitWait).
	deadline time.Time
	// state is unitQueued until the batcher takes it (unitTaken) or its
	// caller withdraws it (unitWithdrawn), whichever comes first.
	state atomic.Int32
}

// The states of a unit.
const (
	unitQueued = iota
	unitTaken
	unitWithdrawn
)

// minSend is the least time a batch is given once sent, however close
// its units are to their deadlines.
const minSend = time.Second

// batcher commits the small writes in groups: whatever is queued when it
// gets to it goes out as one pipelined batch in one transaction, committed
// once its statements answered (runBatch). Under load N commits become
// one, and a prompt's 202 does not queue behind a commit per write in
// flight.
type batcher struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	health  *health
	queue   *groupcommit.Queue[*unit]
}

func newBatcher(pool *pgxpool.Pool, timeout time.Duration, h *health) *batcher {
	b := &batcher{pool: pool, timeout: timeout, health: h}
	b.queue = groupcommit.New(maxBatch, b.commit)
	return b
}

// submitWait queues the statements as one unit and waits for its commit.
// A write waits the write timeout at most, queued and sent together:
// when the database hangs, a request's write fails as unavailable within
// seconds instead of queueing behind a batch that waits for an answer.
func (b *batcher) submitWait(ctx context.Context, fence *Lease, stmts ...stmt) (pgconn.CommandTag, error) {
	u := &unit{ctx: ctx, fence: fence, stmts: stmts, done: make(chan result, 1), deadline: time.Now().Add(b.health.bound(b.timeout))}
	wctx, cancel := context.WithDeadline(ctx, u.deadline)
	defer cancel()
	if err := b.queue.Submit(wctx, u); err != nil {
		return pgconn.CommandTag{}, queueError(ctx, err)
	}
	select {
	case r := <-u.done:
		return r.tag, r.err
	case <-wctx.Done():
	}
	if u.state.CompareAndSwap(unitQueued, unitWithdrawn) {
		// Never sent: nothing of it is written.
		return pgconn.CommandTag{}, queueError(ctx, wctx.Err())
	}
	// Under way, the unit is the batcher's: waiting for its outcome (the
	// send is bounded too) keeps the caller from reporting a failure for
	// a write that then commits.
	r := <-u.done
	return r.tag, r.err
}

// queueError is err, a unit's wait for its turn cut short: its caller's
// own end, or the write timeout's, which says the database is not
// keeping up (unavailable).
func queueError(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errWriteTimeout, err)
	}
	return err
}

// commit sends the batch as one transaction. A unit whose statement fails
// on its own account (a duplicate seq, a lost lease) gets that error and
// the others are sent again without it; a failure of the database fails
// every unit of the batch, none of which committed.
func (b *batcher) commit(batch []*unit) {
	live := make([]*unit, 0, len(batch))
	for _, u := range batch {
		if !u.state.CompareAndSwap(unitQueued, unitTaken) {
			continue // withdrawn by its caller: nobody waits for it
		}
		if err := u.ctx.Err(); err != nil {
			u.done <- result{err: err}
			continue
		}
		live = append(live, u)
	}
	conflicts := 0
	for len(live) > 0 {
		tags, failed, err := b.send(live)
		switch {
		case err == nil:
			for i, u := range live {
				u.done <- result{tag: tags[i]}
			}
			return
		case failed >= 0 && !unavailable(err):
			live[failed].done <- result{err: err}
			live = append(live[:failed:failed], live[failed+1:]...)
		case conflict(err) && conflicts < maxConflictRetries:
			conflicts++
		default:
			err = classify(err)
			for _, u := range live {
				u.done <- result{err: err}
			}
			return
		}
	}
}

// conflict reports whether err is a transaction losing to a concurrent
// one, which is worth sending again as it was.
func conflict(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01":
		return true
	}
	return false
}

// send runs the units' statements as one pipelined batch (one
// transaction, see runBatch) and returns each unit's last tag, or the
// error and the index of the unit whose statement failed first (-1 when
// the failure is not a statement's, like a lost connection).
func (b *batcher) send(units []*unit) (tags []pgconn.CommandTag, failed int, err error) {
	var batch pgx.Batch
	owner := make([]int, 0, len(units)*2)
	for i, u := range units {
		if u.fence != nil {
			batch.Queue(fenceSQL, u.fence.WorkspaceID, u.fence.Epoch, u.fence.Owner)
			owner = append(owner, i)
		}
		for _, s := range u.stmts {
			batch.Queue(s.sql, s.args...)
			owner = append(owner, i)
		}
	}
	// The batch's time is its most pressed unit's, never less than
	// minSend: a unit that waited its turn long does not wait the whole
	// timeout again once sent.
	timeout := b.timeout
	for _, u := range units {
		timeout = min(timeout, max(time.Until(u.deadline), minSend))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tags = make([]pgconn.CommandTag, len(units))
	failed = -1
	err = runBatch(ctx, b.pool, &batch, func(i int, tag pgconn.CommandTag) { tags[owner[i]] = tag }, units, owner)
	if err != nil {
		var se *stmtError
		if errors.As(err, &se) {
			failed = owner[se.index]
			err = se.err
		}
		if ctx.Err() != nil {
			b.health.hung.Store(true)
			return nil, -1, fmt.Errorf("%w: %w", errWriteTimeout, err)
		}
		b.health.hung.Store(false)
		return nil, failed, err
	}
	b.health.hung.Store(false)
	return tags, -1, nil
}

// stmtError is the failure of statement index of a batch.
type stmtError struct {
	index int
	err   error
}

func (e *stmtError) Error() string { return e.err.Error() }
func (e *stmtError) Unwrap() error { return e.err }

// runBatch sends batch on a pooled connection and reads every result,
// calling got with each statement's tag. Statements with a dest (found
// through units and owner) are read as rows.
//
// The batch is one explicit transaction, and its COMMIT goes out only once
// every statement's result is back and only while ctx lasts. A batch whose
// answer is late (a database that hangs, a link that holds packets) is
// thus never committed after its callers were told it failed: ctx's end
// closes the connection, which rolls the transaction back, whenever its
// statements reach the server. Only a COMMIT sent in time whose answer is
// lost leaves the outcome unknown.
func runBatch(ctx context.Context, pool *pgxpool.Pool, batch *pgx.Batch, got func(int, pgconn.CommandTag), units []*unit, owner []int) error {
	dests := make([][]any, len(batch.QueuedQueries))
	k := 0
	for _, u := range units {
		if u.fence != nil {
			k++
		}
		for _, s := range u.stmts {
			dests[k] = s.dest
			k++
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left in a transaction (a failed batch, a COMMIT never
	// sent) is closed on release, never reused: the server rolls back.
	defer conn.Release()
	n := len(batch.QueuedQueries)
	batch.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, batch.QueuedQueries...)
	br := conn.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
	var first error
	for i := range n {
		var (
			tag pgconn.CommandTag
			err error
		)
		if dests[i] != nil {
			err = br.QueryRow().Scan(dests[i]...)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				tag, err = pgconn.NewCommandTag("SELECT 0"), nil
			case err == nil:
				tag = pgconn.NewCommandTag("SELECT 1")
			}
		} else {
			tag, err = br.Exec()
		}
		if err != nil {
			// Later statements were skipped by the server; their errors
			// only repeat this one.
			first = &stmtError{index: i, err: err}
			break
		}
		got(i, tag)
	}
	cerr := br.Close()
	if first == nil {
		first = cerr
	}
	if first != nil {
		rollback(conn)
		return first
	}
	if err := ctx.Err(); err != nil {
		// Answered, but past the deadline: its callers are told it
		// failed, so it must not commit.
		closeConn(conn)
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}

// rollback ends a failed batch's transaction on a connection that is
// still sound, so it can serve again; on a broken one it does nothing,
// and the release closes it.
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() || conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), hungTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		closeConn(conn)
	}
}

// closeConn closes a connection whose transaction must not go on.
func closeConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), hungTimeout)
	defer cancel()
	_ = conn.Conn().Close(ctx)
}

// direct runs stmts as one transaction of their own, outside the group
// commit, for writes that read back what they wrote. Like the group
// commit's, once under way the write goes on whatever becomes of ctx.
func (db *DB) direct(ctx context.Context, fence *Lease, stmts ...stmt) ([]pgconn.CommandTag, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if db.batch.isClosed() {
		return nil, groupcommit.ErrClosed
	}
	u := &unit{ctx: ctx, fence: fence, stmts: stmts}
	var batch pgx.Batch
	var owner []int
	if fence != nil {
		batch.Queue(fenceSQL, fence.WorkspaceID, fence.Epoch, fence.Owner)
		owner = append(owner, 0)
	}
	for _, s := range stmts {
		batch.Queue(s.sql, s.args...)
		owner = append(owner, 0)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), db.health.bound(db.writeTimeout))
	defer cancel()
	tags := make([]pgconn.CommandTag, len(batch.QueuedQueries))
	err := runBatch(wctx, db.pool, &batch, func(i int, t pgconn.CommandTag) { tags[i] = t }, []*unit{u}, owner)
	if err != nil {
		if wctx.Err() != nil {
			db.health.hung.Store(true)
			return nil, fmt.Errorf("%w: %w", errWriteTimeout, err)
		}
		db.health.hung.Store(false)
		return nil, classify(err)
	}
	db.health.hung.Store(false)
	if fence != nil {
		tags = tags[1:]
	}
	return tags, nil
}

func (b *batcher) isClosed() bool { return b.queue.Closed() }

// close commits what is queued and stops the batcher.
func (b *batcher) close() { b.queue.Close() }
