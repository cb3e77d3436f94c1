// Package goroutine is a group of goroutines that their owner stops and
// waits for. Once stopping has begun the group starts nothing more, so a
// wait cannot miss a goroutine started while it waited.
package goroutine

import "sync"

// Group runs goroutines until Stop; Wait waits for those it ran. The zero
// value is ready to use.
type Group struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
}

// Go runs f on a goroutine of the group, unless the group is stopped: then
// it runs nothing and reports false.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Stop makes Go refuse from now on.
func (g *Group) Stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}

// Wait waits for every goroutine Go ran; call it after Stop.
func (g *Group) Wait() { g.wg.Wait() }
