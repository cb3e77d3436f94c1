package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// MaxEventData bounds the encoded data of one event (contract section 1).
// The layers that make events keep what they put in far below it (tool
// results, error messages, client strings); this bound is the last guard,
// for what no one bounded: a model's megabyte-long answer or tool
// arguments. One event larger than a stream's queue would evict every
// stream it reached.
const MaxEventData = 1 << 20

// fit returns data, a JSON value, cut to fit in limit bytes: its longest
// strings are shortened, each ending with a note of how many bytes were
// cut; should that not do (a value made of very many small parts), its
// longest arrays lose their tails. The result is valid JSON of the same
// shape as far as it could be kept.
func fit(data []byte, limit int) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return notice(len(data))
	}
	size := len(data)
	for range 200 {
		if excess := size - limit; !cutLongestString(v, excess) && !cutLongestArray(v) {
			break
		}
		out, err := json.Marshal(v)
		if err != nil {
			break
		}
		if len(out) <= limit {
			return out
		}
		size = len(out)
	}
	return notice(len(data))
}

// notice replaces a value that could not be cut into shape.
func notice(n int) []byte {
	out, _ := json.Marshal(map[string]string{"cut": fmt.Sprintf("[%d bytes cut]", n)})
	return out
}

// leaf is a place in a decoded JSON value that holds a string or an array.
type leaf struct {
	size int
	get  func() any
	set  func(any)
}

// leaves collects the strings and arrays inside v (not v itself).
func leaves(v any, keep func(any) (int, bool), out *[]leaf) {
	visit := func(x any, get func() any, set func(any)) {
		if n, ok := keep(x); ok {
			*out = append(*out, leaf{size: n, get: get, set: set})
		}
		leaves(x, keep, out)
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			visit(x, func() any { return t[k] }, func(y any) { t[k] = y })
		}
	case []any:
		for i, x := range t {
			visit(x, func() any { return t[i] }, func(y any) { t[i] = y })
		}
	}
}

func longest(v any, keep func(any) (int, bool)) (leaf, bool) {
	var all []leaf
	leaves(v, keep, &all)
	if len(all) == 0 {
		return leaf{}, false
	}
	return slices.MaxFunc(all, func(a, b leaf) int { return a.size - b.size }), true
}

// cutNote is what a cut string ends with.
func cutNote(n int) string { return fmt.Sprintf("… [%d bytes cut]", n) }

// cutLongestString shortens the longest string inside v by about excess
// encoded bytes, and reports whether there was one worth cutting.
func cutLongestString(v any, excess int) bool {
	l, ok := longest(v, func(x any) (int, bool) {
		s, ok := x.(string)
		return len(s), ok && len(s) > 64
	})
	if !ok {
		return false
	}
	s := l.get().(string)
	// Escaping makes a string's encoding longer than the string, up to six
	// times (\u003c); cut in proportion.
	drop := int(int64(excess+len(cutNote(len(s)))+8) * int64(len(s)) / int64(encodedLen(s)))
	keep := max(0, len(s)-drop)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	l.set(s[:keep] + cutNote(len(s)-keep))
	return true
}

// encodedLen is about the length of s encoded by encoding/json: what it
// escapes takes six bytes (or two), the rest one each.
func encodedLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		default:
			n++
		}
	}
	return n
}

// cutLongestArray halves the longest array inside v, noting what was cut,
// and reports whether there was one.
func cutLongestArray(v any) bool {
	l, ok := longest(v, func(x any) (int, bool) {
		a, ok := x.([]any)
		return len(a), ok && len(a) > 1
	})
	if !ok {
		return false
	}
	a := l.get().([]any)
	half := len(a) / 2
	cut, _ := json.Marshal(a[half:])
	l.set(append(a[:half:half], fmt.Sprintf("[%d items, %d bytes cut]", len(a)-half, len(cut))))
	return true
}
