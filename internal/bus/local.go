package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Local is the in-process bus of a single node. Its zero value is not
// usable; make one with NewLocal. Bus implementations for clusters use it
// for the subscribers of their own node.
type Local struct {
	mu     sync.Mutex
	topics map[string]*Topic
}

var _ Bus = (*Local)(nil)

// NewLocal returns an empty in-process bus.
func NewLocal() *Local { return &Local{topics: map[string]*Topic{}} }

// Topic is one workspace's subscribers on this node. Its publishing path
// takes no lock: one atomic load of the subscriber list, copied on every
// change (subscribing is rare, publishing constant).
type Topic struct {
	l    *Local
	id   string
	subs atomic.Pointer[[]*subscriber]
	last atomic.Int64 // the last seq its publisher published
	// Guarded by l.mu.
	publisher *localPublisher
	nsubs     int
}

type subscriber struct {
	fn   func(Event)
	lost func()
}

// topic returns the workspace's topic, creating it. Call with l.mu held.
func (l *Local) topicLocked(id string) *Topic {
	t := l.topics[id]
	if t == nil {
		t = &Topic{l: l, id: id}
		t.subs.Store(&[]*subscriber{})
		l.topics[id] = t
	}
	return t
}

// dropLocked forgets t once nobody publishes or subscribes.
func (l *Local) dropLocked(t *Topic) {
	if t.publisher == nil && t.nsubs == 0 && l.topics[t.id] == t {
		delete(l.topics, t.id)
	}
}

// ErrPublished is returned by Publisher when the workspace already has a
// publisher on this node.
var ErrPublished = errors.New("bus: workspace already has a publisher")

// Publisher implements Bus.
func (l *Local) Publisher(workspaceID string, head int64) (Publisher, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.topicLocked(workspaceID)
	if t.publisher != nil {
		return nil, fmt.Errorf("publish %s: %w", workspaceID, ErrPublished)
	}
	t.last.Store(head)
	p := &localPublisher{t: t}
	t.publisher = p
	return p, nil
}

type localPublisher struct {
	t      *Topic
	closed atomic.Bool
}

func (p *localPublisher) Publish(e Event) {
	p.t.last.Store(e.Seq)
	p.t.Deliver(e)
}

func (p *localPublisher) Close() {
	if p.closed.Swap(true) {
		return
	}
	l := p.t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.t.publisher == p {
		p.t.publisher = nil
	}
	l.dropLocked(p.t)
}

// Deliver calls the topic's subscribers with e, in the order they
// subscribed. Buses between nodes call it with the events they receive.
func (t *Topic) Deliver(e Event) {
	for _, s := range *t.subs.Load() {
		s.fn(e)
	}
}

// Lost tells the topic's subscribers that events may have been dropped.
func (t *Topic) Lost() {
	for _, s := range *t.subs.Load() {
		if s.lost != nil {
			s.lost()
		}
	}
}

// Subscribe implements Bus.
func (l *Local) Subscribe(workspaceID string, fn func(Event), lost func()) (func(), error) {
	_, cancel := l.Join(workspaceID, fn, lost)
	return cancel, nil
}

// Join is Subscribe returning the workspace's topic too, for buses that
// feed it events from other nodes. Its subscriber count tells them when
// the first joins and the last leaves.
func (l *Local) Join(workspaceID string, fn func(Event), lost func()) (*Topic, func()) {
	s := &subscriber{fn: fn, lost: lost}
	l.mu.Lock()
	t := l.topicLocked(workspaceID)
	t.subs.Store(new(append(slices.Clone(*t.subs.Load()), s)))
	t.nsubs++
	l.mu.Unlock()
	var once sync.Once
	return t, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			t.subs.Store(new(slices.DeleteFunc(slices.Clone(*t.subs.Load()), func(x *subscriber) bool { return x == s })))
			t.nsubs--
			l.dropLocked(t)
		})
	}
}

// subscribers returns how many subscribers the workspace has on this node (for tests).
func (l *Local) subscribers(workspaceID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.topics[workspaceID]; t != nil {
		return t.nsubs
	}
	return 0
}

// Head implements Bus: the last seq of the workspace's publisher, when
// this node has one.
func (l *Local) Head(_ context.Context, workspaceID string) (int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.topics[workspaceID]
	if t == nil || t.publisher == nil {
		return 0, false, nil
	}
	return t.last.Load(), true, nil
}
