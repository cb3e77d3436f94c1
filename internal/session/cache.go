package session

import (
	"sync"

	"github.com/tandem-dev/tandem/internal/store"
)

// maxCached bounds the records a cache holds. A server with more sessions
// in use than this still answers correctly, from the store.
const maxCached = 4096

// cache keeps stored session records for LookupSettings, the read every
// prompt, cancel and log line makes before it answers. Only the fields the
// service itself changes are trusted from it: the store also moves a
// record's UpdatedAt and MessageCount on its own, so those may be old.
//
// A record is dropped after every write of it, once the write is on disk.
// A fill races with such a write when its read began before the drop; the
// epoch, bumped by every drop, lets put refuse the record that read.
type cache struct {
	mu    sync.Mutex
	epoch uint64
	m     map[string]store.Session
}

func newCache() *cache { return &cache{m: make(map[string]store.Session)} }

// get returns the cached record of the session.
func (c *cache) get(sessionID string) (store.Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.m[sessionID]
	return rec, ok
}

// begin is called before reading a record from the store; its result goes
// to put with what was read.
func (c *cache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// put keeps rec unless a record was dropped since begin returned epoch.
func (c *cache) put(epoch uint64, rec store.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[rec.ID] = rec
}

// drop forgets the session's record; call it after the write that changed
// or deleted the record has returned.
func (c *cache) drop(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	delete(c.m, sessionID)
}
