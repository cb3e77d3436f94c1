package session

import (
	"sync"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/sweep"
)

// maxCached and maxCachedBytes bound the records a cache holds, in number
// and in bytes (a record carries the session's settings, system message and
// tools included). A server with more sessions in use than this still
// answers correctly, from the store.
const (
	maxCached      = 4096
	maxCachedBytes = 16 << 20
)

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
	bytes int // recordBytes of m's records, summed
	// used are the sessions whose records were served or kept since the
	// last sweep.
	used sweep.Marks[string]
}

// recordBytes is roughly what rec holds in memory.
func recordBytes(rec *store.Session) int {
	return 160 + len(rec.ID) + len(rec.WorkspaceID) + len(rec.Title) + len(rec.Model) +
		len(rec.ReasoningEffort) + len(rec.Config)
}

func newCache() *cache { return &cache{m: make(map[string]store.Session)} }

// get returns the cached record of the session.
func (c *cache) get(sessionID string) (store.Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.m[sessionID]
	if ok {
		c.used.Use(sessionID)
	}
	return rec, ok
}

// sweep forgets the records not served nor kept since the previous sweep,
// so that an idle server lets go of the records of its busy hours.
func (c *cache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes = 0
	c.m = sweep.Keep(&c.used, c.m, func(_ string, rec store.Session) { c.bytes += recordBytes(&rec) })
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
	size := recordBytes(&rec)
	if size > maxCachedBytes/16 {
		return // too large to share the cache with the others
	}
	if old, ok := c.m[rec.ID]; ok {
		c.bytes -= recordBytes(&old)
		delete(c.m, rec.ID)
	}
	if len(c.m) >= maxCached || c.bytes+size > maxCachedBytes {
		clear(c.m)
		c.bytes = 0
		c.used.Reset()
	}
	c.m[rec.ID] = rec
	c.bytes += size
	c.used.Use(rec.ID)
}

// drop forgets the session's record; call it after the write that changed
// or deleted the record has returned.
func (c *cache) drop(sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if old, ok := c.m[sessionID]; ok {
		c.bytes -= recordBytes(&old)
		delete(c.m, sessionID)
	}
	c.used.Forget(sessionID)
}
