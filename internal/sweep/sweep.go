// Package sweep lets a cache give back what nobody used for a while: the
// cache marks each key it serves, and a sweep every few minutes keeps only
// the entries marked since the sweep before. An idle session's memory so
// goes between one and two sweep periods after its last use, with no clock
// read on the hot path.
package sweep

// Marks is the set of keys used since the last sweep. The zero value is
// empty and ready; the cache's lock guards it.
type Marks[K comparable] struct {
	used map[K]struct{}
}

// Use marks k as used in this period.
func (m *Marks[K]) Use(k K) {
	if m.used == nil {
		m.used = make(map[K]struct{})
	}
	m.used[k] = struct{}{}
}

// Reset unmarks every key (the cache was emptied).
func (m *Marks[K]) Reset() { m.used = nil }

// Forget unmarks k (its entry is gone).
func (m *Marks[K]) Forget(k K) { delete(m.used, k) }

// Keep returns a new map of the entries of from whose keys were used since
// the last sweep, calls kept (when not nil) for each, and starts a new
// period. It makes a new map rather than deleting from from, because a Go
// map that only had keys deleted keeps its size.
func Keep[K comparable, V any](m *Marks[K], from map[K]V, kept func(K, V)) map[K]V {
	out := make(map[K]V, len(m.used))
	for k := range m.used {
		if v, ok := from[k]; ok {
			out[k] = v
			if kept != nil {
				kept(k, v)
			}
		}
	}
	m.used = nil
	return out
}
