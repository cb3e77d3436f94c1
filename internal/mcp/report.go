package mcp

import (
	"context"
	"sync"
)

// reportQueue hands statuses to the Reporter from one goroutine, in the order
// they happened, so that a slow or re-entrant Reporter never blocks a
// server's lifecycle (and may call the Manager back).
type reportQueue struct {
	r Reporter

	mu      sync.Mutex
	cond    *sync.Cond
	pending []Status
	// pushed and delivered count statuses, so that flush can wait for
	// those pushed before it.
	pushed, delivered int
	closed            bool
	done              chan struct{}
}

func newReportQueue(r Reporter) *reportQueue {
	q := &reportQueue{r: r, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)
	if r == nil {
		close(q.done)
		return q
	}
	go q.loop()
	return q
}

// push queues st. It never blocks on the Reporter.
func (q *reportQueue) push(st Status) {
	if q.r == nil {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.pending = append(q.pending, st)
		q.pushed++
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

func (q *reportQueue) loop() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.pending) == 0 && !q.closed {
			q.cond.Wait()
		}
		batch := q.pending
		q.pending = nil
		closed := q.closed
		q.mu.Unlock()
		for _, st := range batch {
			q.r.MCPStatus(st)
		}
		q.mu.Lock()
		q.delivered += len(batch)
		q.cond.Broadcast()
		q.mu.Unlock()
		if closed && len(batch) == 0 {
			return
		}
	}
}

// flush waits until every status pushed before it is delivered, or ctx is
// done.
func (q *reportQueue) flush(ctx context.Context) error {
	if q.r == nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.pushed
	for q.delivered < target && !q.closed {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.cond.Wait()
	}
	return nil
}

// close delivers what is queued, then stops the goroutine and waits for it.
func (q *reportQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	<-q.done
}
