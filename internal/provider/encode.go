package provider

import (
	"bytes"
	"container/list"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"
)

// DefaultEncodeCacheBytes is the size of the encode cache a Registry keeps:
// the histories of a few dozen long sessions running at once.
const DefaultEncodeCacheBytes = 16 << 20

// entryOverhead is what an entry costs besides its bytes: the list element,
// the map slot and the Message header, roughly.
const entryOverhead = 256

// EncodeCache keeps the wire encodings of conversation messages, so that a
// model request carries the history it carried before without encoding it
// again. Every step of a session re-sends its whole history; encoding all of
// it through an SDK at every step made the cost of a step grow with the
// session, and long sessions spent a third of their CPU on it. With the
// cache a step encodes only its new messages and pays, for the others, a
// hash and a comparison, which is what copying them costs anyway. It also
// keeps the encodings of requests without their messages (Head).
//
// Entries are keyed by content (the format and every field of the Message),
// so a cache serves any number of sessions and providers, and nothing
// depends on who built the Message or when. It holds at most its size in
// bytes (the encodings and the messages they were made from) and drops the
// least recently used entries past it. A nil *EncodeCache keeps nothing.
// It is safe for concurrent use.
type EncodeCache struct {
	max  int64
	seed maphash.Seed

	mu      sync.Mutex
	size    int64
	entries map[uint64]*list.Element // values are *encodedEntry
	// same finds a message's entry by where its text is in memory: see
	// textKey. Every entry of a message with a text is in it.
	same map[textKey]*list.Element
	lru  list.List // front: most recently used
	// clock counts EncodeAll's calls (see moveEvery).
	clock uint64
}

// moveEvery is how many requests apart EncodeAll moves an entry it serves
// to the front of the LRU list: moving each of a long history's entries at
// every step cost a fifth of the step's encoding, while an order off by a
// few dozen requests changes nothing that matters about which entries the
// bound drops.
const moveEvery = 32

// textKey is where a message's text lives, with its length, and where its
// tool call id lives (its result's, or its first call's), which tells apart
// equal texts ("permission denied") of different calls. A step sends the
// messages of the steps before it built from the same stored strings, so
// looking them up by address finds them without hashing the whole history
// again, which made a step's cost grow with the session (a 1,000-message
// history spent 0.7 ms a step hashing). An address is only a hint: a hit is
// checked field by field, which costs nothing for strings that share their
// bytes, so an address since reused for other bytes is merely a miss.
//
// The format is not part of the key (hashing it cost as much as the rest of
// a lookup): the entry found is checked for it, and a message encoded in two
// formats is found by address in one of them.
type textKey struct {
	text, id *byte
	n        int
}

func keyOfText(m *Message) (textKey, bool) {
	tk := textKey{n: len(m.Text)}
	if m.Text != "" {
		tk.text = unsafe.StringData(m.Text)
	}
	id := m.ToolCallID
	if id == "" && len(m.ToolCalls) > 0 {
		id = m.ToolCalls[0].ID
	}
	if id != "" {
		tk.id = unsafe.StringData(id)
	}
	return tk, tk.text != nil || tk.id != nil
}

type encodedEntry struct {
	key    uint64
	format string
	msg    Message
	enc    []byte
	// head, for an entry of Head, is the request it encodes (without
	// messages); enc is then its prefix and suffix, split at split.
	head  *Request
	split int
	cost  int64
	// used is set when the entry is kept or served, and cleared by Sweep.
	used bool
	// stamp is the cache's clock when EncodeAll last moved the entry to
	// the front.
	stamp uint64
	// texts are the addresses under which same finds the entry: its own
	// message's, and those of the first equal messages built from other
	// strings (a history loaded again, the same prompt sent twice).
	texts []textKey
}

// maxTexts bounds the addresses an entry is found under.
const maxTexts = 4

// NewEncodeCache returns a cache that holds at most maxBytes.
func NewEncodeCache(maxBytes int64) *EncodeCache {
	return &EncodeCache{max: maxBytes, seed: maphash.MakeSeed(), entries: make(map[uint64]*list.Element), same: make(map[textKey]*list.Element)}
}

// Encode returns the encoding of m in format (a name the caller picks for
// its encoding, so that providers with different wire formats can share a
// cache): the one kept, or encode(m), which it then keeps. The result is
// shared and must not be changed; neither may m's byte slices (tool call
// arguments, image data) once passed.
func (c *EncodeCache) Encode(format string, m Message, encode func(Message) ([]byte, error)) ([]byte, error) {
	if c == nil {
		return encode(m)
	}
	match := func(e *encodedEntry) bool {
		return e.head == nil && e.format == format && sameMessage(&e.msg, &m)
	}
	if e := c.lookupSame(&m, match); e != nil {
		return e.enc, nil
	}
	key := c.hash(format, &m)
	if e := c.lookup(key, match); e != nil {
		c.alias(format, &m, e)
		return e.enc, nil
	}

	enc, err := encode(m)
	if err != nil {
		return nil, err
	}
	cost := int64(len(enc)+len(format)+entryOverhead) + messageBytes(&m)
	if cost > c.max/8 {
		// One huge message (a prompt's attachments, which later turns
		// replace by a note) would push out everybody else's history.
		return enc, nil
	}
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Images = slices.Clone(m.Images)
	c.keep(&encodedEntry{key: key, format: format, msg: m, enc: enc, cost: cost})
	return enc, nil
}

// lookup returns the entry under key that match accepts, now the most
// recently used, or nil.
func (c *EncodeCache) lookup(key uint64, match func(*encodedEntry) bool) *encodedEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.useLocked(c.entries[key], match)
}

// lookupSame is lookup by the address of m's text.
func (c *EncodeCache) lookupSame(m *Message, match func(*encodedEntry) bool) *encodedEntry {
	tk, ok := keyOfText(m)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.useLocked(c.same[tk], match)
}

// useLocked returns el's entry, now the most recently used, if match
// accepts it.
func (c *EncodeCache) useLocked(el *list.Element, match func(*encodedEntry) bool) *encodedEntry {
	if el == nil {
		return nil
	}
	e := el.Value.(*encodedEntry)
	if !match(e) {
		return nil
	}
	e.used = true
	c.lru.MoveToFront(el)
	return e
}

// EncodeAll is Encode for each of msgs, in order: the encodings, or the
// first error with the index of its message. The messages found by the
// address of their text, a step's history bar its newest messages, are
// found under one lock.
func (c *EncodeCache) EncodeAll(format string, msgs []Message, encode func(Message) ([]byte, error)) ([][]byte, int, error) {
	out := make([][]byte, len(msgs))
	if c != nil {
		c.mu.Lock()
		c.clock++
		for i := range msgs {
			m := &msgs[i]
			tk, ok := keyOfText(m)
			if !ok {
				continue
			}
			el, ok := c.same[tk]
			if !ok {
				continue
			}
			if e := el.Value.(*encodedEntry); e.head == nil && e.format == format && sameMessage(&e.msg, m) {
				e.used = true
				if c.clock-e.stamp >= moveEvery {
					e.stamp = c.clock
					c.lru.MoveToFront(el)
				}
				out[i] = e.enc
			}
		}
		c.mu.Unlock()
	}
	for i, m := range msgs {
		if out[i] != nil {
			continue
		}
		enc, err := c.Encode(format, m, encode)
		if err != nil {
			return nil, i, err
		}
		out[i] = enc
	}
	return out, 0, nil
}

// alias makes e found under the address of m's text too.
func (c *EncodeCache) alias(format string, m *Message, e *encodedEntry) {
	tk, ok := keyOfText(m)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[e.key]
	if !ok || el.Value != e {
		return // dropped meanwhile
	}
	if slices.Contains(e.texts, tk) {
		c.same[tk] = el // taken by the message's entry in another format
		return
	}
	if len(e.texts) == maxTexts {
		// Many equal messages in one history ("ok", "continue"): the
		// others go by their hash, as before; rotating the addresses
		// would cost more at every step than it saves.
		return
	}
	e.texts = append(e.texts, tk)
	c.same[tk] = el
	// The key holds the other copy's strings alive: they count against
	// the bound as the entry's own do.
	extra := aliasBytes(m)
	e.cost += extra
	c.size += extra
	c.boundLocked()
}

// aliasBytes is what an address e is found under keeps alive: the text
// and the tool call id it points into.
func aliasBytes(m *Message) int64 {
	id := len(m.ToolCallID)
	if id == 0 && len(m.ToolCalls) > 0 {
		id = len(m.ToolCalls[0].ID)
	}
	return int64(len(m.Text) + id + 64)
}

// boundLocked drops the least recently used entries past the bound.
func (c *EncodeCache) boundLocked() {
	for c.size > c.max {
		c.removeLocked(c.lru.Back())
	}
}

// forgetText removes tk from same if it finds el there.
func (c *EncodeCache) forgetText(tk textKey, el *list.Element) {
	if c.same[tk] == el {
		delete(c.same, tk)
	}
}

// keep adds e, dropping the least recently used entries past the bound.
func (c *EncodeCache) keep(e *encodedEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		// Another request encoded it meanwhile, or (rarely) something
		// different has the same hash: the newer one wins.
		c.removeLocked(el)
	}
	e.used = true
	el := c.lru.PushFront(e)
	c.entries[e.key] = el
	if tk, ok := keyOfText(&e.msg); ok && e.head == nil {
		e.texts = []textKey{tk}
		c.same[tk] = el
	}
	c.size += e.cost
	c.boundLocked()
}

// Head returns the encoding of req without its messages, split where the
// messages go: what encode made of it (for a request whose messages are
// one marker, the parts before and after the marker), or what an earlier
// call with the same format, model, effort, system prompt, tools and
// output cap got from it. Every step of every session of a workspace
// sends the same system prompt and tools, and encoding them through an
// SDK (the tools' schemas decoded into maps, then encoded back) cost as
// much as the rest of the request. The results are shared and must not be
// changed; neither may req's tool parameters once passed.
func (c *EncodeCache) Head(format string, req Request, encode func(Request) (prefix, suffix []byte, err error)) (prefix, suffix []byte, err error) {
	req.Messages = nil
	if c == nil {
		return encode(req)
	}
	key := c.hashHead(format, &req)
	if e := c.lookup(key, func(e *encodedEntry) bool {
		return e.head != nil && e.format == format && sameHead(e.head, &req)
	}); e != nil {
		return e.enc[:e.split:e.split], e.enc[e.split:], nil
	}

	prefix, suffix, err = encode(req)
	if err != nil {
		return nil, nil, err
	}
	enc := append(append(make([]byte, 0, len(prefix)+len(suffix)), prefix...), suffix...)
	cost := int64(len(enc)+len(format)+entryOverhead) + headBytes(&req)
	if cost > c.max/8 {
		return prefix, suffix, nil
	}
	req.Tools = slices.Clone(req.Tools)
	c.keep(&encodedEntry{key: key, format: format, head: &req, enc: enc, split: len(prefix), cost: cost})
	return enc[:len(prefix):len(prefix)], enc[len(prefix):], nil
}

// Sweep drops the entries no request used since the previous Sweep. Its
// caller sweeps every few minutes, so that a server whose load is gone lets
// go of the encodings of its busy hours; the bound holds the cache down
// under load.
func (c *EncodeCache) Sweep() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*encodedEntry); e.used {
			e.used = false
		} else {
			c.removeLocked(el)
		}
		el = next
	}
	// A new map: one that only had keys deleted keeps its size.
	entries := make(map[uint64]*list.Element, len(c.entries))
	for k, el := range c.entries {
		entries[k] = el
	}
	c.entries = entries
	same := make(map[textKey]*list.Element, len(c.same))
	for k, el := range c.same {
		same[k] = el
	}
	c.same = same
}

func (c *EncodeCache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*encodedEntry)
	delete(c.entries, e.key)
	for _, tk := range e.texts {
		c.forgetText(tk, el)
	}
	c.size -= e.cost
}

// hasher feeds a hash length-prefixed fields, so that no two different
// sequences of fields feed it the same bytes.
type hasher struct{ maphash.Hash }

func (h *hasher) num(n int) {
	var b [8]byte
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	_, _ = h.Write(b[:])
}

func (h *hasher) str(s string) { h.num(len(s)); _, _ = h.WriteString(s) }

func (h *hasher) raw(b []byte) { h.num(len(b)); _, _ = h.Write(b) }

// hash covers every field of m.
func (c *EncodeCache) hash(format string, m *Message) uint64 {
	var h hasher
	h.SetSeed(c.seed)
	h.str(format)
	h.str(m.Role)
	h.str(m.Text)
	h.str(m.ToolCallID)
	h.str(m.ToolName)
	if m.IsError {
		_ = h.WriteByte(1)
	} else {
		_ = h.WriteByte(0)
	}
	h.num(len(m.ToolCalls))
	for _, tc := range m.ToolCalls {
		h.str(tc.ID)
		h.str(tc.Name)
		h.raw(tc.Arguments)
	}
	h.num(len(m.Images))
	for _, img := range m.Images {
		h.str(img.MimeType)
		h.raw(img.Data)
	}
	return h.Sum64()
}

// hashHead is hash for Head's requests; the leading marker keeps a head
// and a message from ever feeding the hash the same bytes.
func (c *EncodeCache) hashHead(format string, r *Request) uint64 {
	var h hasher
	h.SetSeed(c.seed)
	_ = h.WriteByte(0xff)
	h.str(format)
	h.str(r.Model)
	h.str(r.ReasoningEffort)
	h.str(r.System)
	h.num(r.MaxTokens)
	h.num(len(r.Tools))
	for _, t := range r.Tools {
		h.str(t.Name)
		h.str(t.Description)
		h.raw(t.Parameters)
	}
	return h.Sum64()
}

func sameHead(a, b *Request) bool {
	return a.Model == b.Model && a.ReasoningEffort == b.ReasoningEffort && a.System == b.System &&
		a.MaxTokens == b.MaxTokens &&
		slices.EqualFunc(a.Tools, b.Tools, func(x, y Tool) bool {
			return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
		})
}

// headBytes is what a head's request weighs in the cache.
func headBytes(r *Request) int64 {
	n := len(r.Model) + len(r.ReasoningEffort) + len(r.System)
	for _, t := range r.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + 64
	}
	return int64(n)
}

// StreamFirst puts "stream": true first in prefix, the start of a JSON
// object. The SDKs set that key in the body they are given, at every
// request, with a setter that reads the object up to the key: at the end,
// where their own encoding has it, that meant parsing the whole history
// again at every step. Found first, it costs nothing.
func StreamFirst(prefix []byte) ([]byte, error) {
	if len(prefix) == 0 || prefix[0] != '{' {
		return nil, errors.New("encoding the request: not a JSON object")
	}
	return append([]byte(`{"stream":true,`), prefix[1:]...), nil
}

// SplitAround splits whole around the first mark in it: a request encoded
// with a marker where its messages go gives the parts before and after
// them.
func SplitAround(whole, mark []byte) (prefix, suffix []byte, err error) {
	at := bytes.Index(whole, mark)
	if at < 0 {
		return nil, nil, errors.New("encoding the request: the history's place was not found")
	}
	return whole[:at], whole[at+len(mark):], nil
}

func sameMessage(a, b *Message) bool {
	return a.Role == b.Role && a.Text == b.Text && a.ToolCallID == b.ToolCallID &&
		a.ToolName == b.ToolName && a.IsError == b.IsError &&
		slices.EqualFunc(a.ToolCalls, b.ToolCalls, func(x, y ToolCall) bool {
			return x.ID == y.ID && x.Name == y.Name && bytes.Equal(x.Arguments, y.Arguments)
		}) &&
		slices.EqualFunc(a.Images, b.Images, func(x, y Image) bool {
			return x.MimeType == y.MimeType && bytes.Equal(x.Data, y.Data)
		})
}

// messageBytes is what m's contents weigh in the cache.
func messageBytes(m *Message) int64 {
	n := len(m.Role) + len(m.Text) + len(m.ToolCallID) + len(m.ToolName)
	for _, tc := range m.ToolCalls {
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments) + 64
	}
	for _, img := range m.Images {
		n += len(img.MimeType) + len(img.Data) + 48
	}
	return int64(n)
}
