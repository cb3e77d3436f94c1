package session

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

func TestCacheRefusesARecordReadBeforeADrop(t *testing.T) {
	c := newCache()
	epoch := c.begin()
	// A write lands and drops the record while this read was in flight.
	c.drop("s1")
	c.put(epoch, store.Session{ID: "s1", Title: "old"})
	_, ok := c.get("s1")
	assert.False(t, ok, "a record read before the write must not be served after it")

	c.put(c.begin(), store.Session{ID: "s1", Title: "new"})
	rec, ok := c.get("s1")
	require.True(t, ok)
	assert.Equal(t, "new", rec.Title)

	c.drop("s1")
	_, ok = c.get("s1")
	assert.False(t, ok)
}

func TestCacheIsBounded(t *testing.T) {
	c := newCache()
	for i := range maxCached + 10 {
		c.put(c.begin(), store.Session{ID: fmt.Sprint(i)})
	}
	assert.LessOrEqual(t, len(c.m), maxCached)
	_, ok := c.get(fmt.Sprint(maxCached + 9))
	assert.True(t, ok, "the newest record is kept")
}

// TestCacheNeverServesAWriteThatCompleted drives the cache the way the
// service does, against a store of one versioned record: writers write and
// drop, readers get or read and put. A reader must never be served a version
// older than the last write that had completed (dropped) before its get.
func TestCacheNeverServesAWriteThatCompleted(t *testing.T) {
	c := newCache()
	var stored, completed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				v := stored.Add(1)
				c.drop("s")
				for {
					// completed only grows: a slower writer must not lower it.
					old := completed.Load()
					if old >= v || completed.CompareAndSwap(old, v) {
						break
					}
				}
			}
		})
	}
	var stale atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 5000 {
				floor := completed.Load()
				rec, ok := c.get("s")
				if !ok {
					epoch := c.begin()
					rec = store.Session{ID: "s", MessageCount: int(stored.Load())}
					c.put(epoch, rec)
				}
				if int64(rec.MessageCount) < floor {
					stale.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, stale.Load(), "reads served a version older than a completed write")
}

// TestCacheEvictsAtItsBounds fills the cache past its bounds in number and
// in bytes (records with large settings): it never holds more than either,
// its count of bytes stays exact, and a record too large to share it is not
// kept.
func TestCacheEvictsAtItsBounds(t *testing.T) {
	c := newCache()
	check := func() {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		sum := 0
		for _, rec := range c.m {
			sum += recordBytes(&rec)
		}
		require.Equal(t, sum, c.bytes)
		require.LessOrEqual(t, len(c.m), maxCached)
		require.LessOrEqual(t, c.bytes, maxCachedBytes)
	}
	for i := range maxCached + 100 {
		c.put(c.begin(), store.Session{ID: fmt.Sprint("s", i)})
		if i%97 == 0 {
			c.drop(fmt.Sprint("s", i/2))
			check()
		}
	}
	check()
	config := make([]byte, maxCachedBytes/32)
	for i := range 100 {
		c.put(c.begin(), store.Session{ID: fmt.Sprint("big", i%40), Config: config})
		check()
	}
	c.put(c.begin(), store.Session{ID: "huge", Config: make([]byte, maxCachedBytes/8)})
	_, ok := c.get("huge")
	assert.False(t, ok)
	check()
}

// TestCacheSweepForgetsRecordsUnreadSinceThePreviousSweep: a record no
// request read between two sweeps is forgotten; one read stays.
func TestCacheSweepForgetsRecordsUnreadSinceThePreviousSweep(t *testing.T) {
	c := newCache()
	for _, id := range []string{"read", "unread", "dropped"} {
		c.put(c.begin(), store.Session{ID: id})
	}
	c.sweep()
	_, ok := c.get("read")
	require.True(t, ok)
	c.drop("dropped")
	c.sweep()
	_, ok = c.get("unread")
	assert.False(t, ok, "unread across two sweeps")
	_, ok = c.get("read")
	assert.True(t, ok, "read since the sweep before")
	c.sweep()
	c.sweep()
	assert.Empty(t, c.m)
	assert.Zero(t, c.bytes)
}
