// Package groupcommit is the write queue both stores commit through: one
// goroutine takes whatever is queued when it gets to it and commits it as
// one group, so under load N commits become one and a prompt's 202 does not
// queue behind a commit per write in flight. What a group is, and how it
// commits, is the store's.
package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = errors.New("store is closed")

// Queue hands queued units to commit in groups of at most max, in the
// order they were queued, on a goroutine of its own.
type Queue[U any] struct {
	queue  chan U
	commit func(group []U)
	max    int
	// mu is held for reading while a unit is being queued and for writing
	// to set closed, so no unit enters the queue once run has drained it.
	mu     sync.RWMutex
	closed bool
	quit   chan struct{}
	done   chan struct{}
}

// New starts a Queue; commit gets each group and must answer every unit
// of it. Close stops it.
func New[U any](max int, commit func(group []U)) *Queue[U] {
	q := &Queue[U]{
		queue: make(chan U, max), commit: commit, max: max,
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	go q.run()
	return q
}

// Submit queues u, unless the queue is closed or ctx ends first. Once
// queued, u is committed (or answered with its failure) by commit.
func (q *Queue[U]) Submit(ctx context.Context, u U) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case q.queue <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Closed reports whether Close was called.
func (q *Queue[U]) Closed() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.closed
}

// Close commits what is queued and stops the queue's goroutine.
func (q *Queue[U]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.quit)
	}
	q.mu.Unlock()
	<-q.done
}

func (q *Queue[U]) run() {
	defer close(q.done)
	for {
		var first U
		select {
		case first = <-q.queue:
		case <-q.quit:
			// Writes queued before Close still commit.
			for {
				select {
				case u := <-q.queue:
					q.commit([]U{u})
				default:
					return
				}
			}
		}
		group := []U{first}
	fill:
		for len(group) < q.max {
			select {
			case u := <-q.queue:
				group = append(group, u)
			default:
				break fill
			}
		}
		q.commit(group)
	}
}
