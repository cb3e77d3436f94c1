// Package keylock is mutual exclusion by key: callers that lock the same
// key wait for each other, callers of different keys never do. It is for
// state kept per request or per session, where one lock for the whole
// process would queue every key behind the slowest.
package keylock

import "sync"

// Map holds a mutex per key, made on first use and forgotten once no
// caller holds or waits for it, so it keeps memory only for keys in use.
// The zero value is ready to use; a Map must not be copied after first use.
type Map[K comparable] struct {
	mu sync.Mutex // guards m only: never held while a key's mutex is waited for
	m  map[K]*entry
}

type entry struct {
	mu   sync.Mutex
	refs int // callers holding or waiting for mu
}

// Lock locks the key's mutex, waiting while another caller holds it, and
// returns the function that unlocks it, to be called exactly once.
func (l *Map[K]) Lock(key K) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[K]*entry)
	}
	e := l.m[key]
	if e == nil {
		e = &entry{}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// held is the number of keys with a holder or a waiter.
func (l *Map[K]) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
