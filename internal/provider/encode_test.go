package provider

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// counting encodes a message as its text and counts the calls.
type counting struct {
	mu sync.Mutex
	n  int
}

func (c *counting) encode(m Message) ([]byte, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return []byte(m.Role + ":" + m.Text), nil
}

func (c *counting) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestEncodeCacheHitsOnlyTheSameMessage(t *testing.T) {
	c := NewEncodeCache(1 << 20)
	var enc counting
	base := Message{Role: RoleAssistant, Text: "hello", ToolCalls: []ToolCall{{ID: "a", Name: "view", Arguments: json.RawMessage(`{"path":"x"}`)}},
		Images: []Image{{MimeType: "image/png", Data: []byte("png")}}}
	got, err := c.Encode("f", base, enc.encode)
	require.NoError(t, err)
	require.Equal(t, "assistant:hello", string(got))
	// An equal message built anew (other backing arrays) is a hit.
	again := base
	again.Text = strings.Clone(base.Text)
	again.ToolCalls = []ToolCall{{ID: "a", Name: "view", Arguments: json.RawMessage(`{"path":"x"}`)}}
	again.Images = []Image{{MimeType: "image/png", Data: []byte("png")}}
	_, err = c.Encode("f", again, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 1, enc.calls())

	// Any field that differs, and another format, is a miss.
	variants := []func(m *Message){
		func(m *Message) { m.Role = RoleUser },
		func(m *Message) { m.Text = "hellO" },
		func(m *Message) { m.ToolCallID = "x" },
		func(m *Message) { m.ToolName = "x" },
		func(m *Message) { m.IsError = true },
		func(m *Message) { m.ToolCalls = nil },
		func(m *Message) {
			m.ToolCalls = []ToolCall{{ID: "b", Name: "view", Arguments: json.RawMessage(`{"path":"x"}`)}}
		},
		func(m *Message) {
			m.ToolCalls = []ToolCall{{ID: "a", Name: "ls", Arguments: json.RawMessage(`{"path":"x"}`)}}
		},
		func(m *Message) {
			m.ToolCalls = []ToolCall{{ID: "a", Name: "view", Arguments: json.RawMessage(`{"path":"y"}`)}}
		},
		func(m *Message) { m.Images = nil },
		func(m *Message) { m.Images = []Image{{MimeType: "image/jpeg", Data: []byte("png")}} },
		func(m *Message) { m.Images = []Image{{MimeType: "image/png", Data: []byte("pnG")}} },
	}
	for i, change := range variants {
		m := base
		change(&m)
		_, err := c.Encode("f", m, enc.encode)
		require.NoError(t, err)
		require.Equal(t, 2+i, enc.calls(), "variant %d was taken for the original", i)
	}
	_, err = c.Encode("g", base, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 2+len(variants), enc.calls())
}

// TestEncodeCacheEvictsAtItsBound fills a cache far past its size: it never
// holds more than its bound, drops the least recently used first, and does
// not keep a message too large to share the cache with others.
func TestEncodeCacheEvictsAtItsBound(t *testing.T) {
	const bound = 64 << 10
	c := NewEncodeCache(bound)
	var enc counting
	msg := func(i int) Message {
		return Message{Role: RoleUser, Text: fmt.Sprintf("%05d%s", i, strings.Repeat("x", 1000))}
	}
	_, err := c.Encode("f", msg(0), enc.encode)
	require.NoError(t, err)
	for i := 1; i < 1000; i++ {
		_, err := c.Encode("f", msg(i), enc.encode)
		require.NoError(t, err)
		// Message 0 is used at every step, like the first prompt of a
		// session that keeps running: it stays.
		_, err = c.Encode("f", msg(0), enc.encode)
		require.NoError(t, err)
		c.mu.Lock()
		size, n := c.size, len(c.entries)
		c.mu.Unlock()
		require.LessOrEqual(t, size, int64(bound), "after %d messages", i+1)
		require.Equal(t, n, c.lru.Len())
	}
	require.Equal(t, 1000, enc.calls(), "message 0 was evicted although used at every step")
	c.mu.Lock()
	kept := len(c.entries)
	c.mu.Unlock()
	require.Greater(t, kept, 20, "the cache keeps too little of its bound")
	require.Less(t, kept, 64)

	// The newest ones are there, the oldest gone.
	_, err = c.Encode("f", msg(999), enc.encode)
	require.NoError(t, err)
	require.Equal(t, 1000, enc.calls())
	_, err = c.Encode("f", msg(1), enc.encode)
	require.NoError(t, err)
	require.Equal(t, 1001, enc.calls())

	huge := Message{Role: RoleUser, Text: strings.Repeat("y", bound/8)}
	for range 2 {
		_, err = c.Encode("f", huge, enc.encode)
		require.NoError(t, err)
	}
	require.Equal(t, 1003, enc.calls(), "a message of an eighth of the cache was kept")
}

func TestEncodeCacheConcurrent(t *testing.T) {
	c := NewEncodeCache(32 << 10)
	var enc counting
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				m := Message{Role: RoleTool, Text: fmt.Sprintf("result %d %s", (i+g)%80, strings.Repeat("z", 300))}
				got, err := c.Encode("f", m, enc.encode)
				if err != nil || string(got) != "tool:"+m.Text {
					t.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.LessOrEqual(t, c.size, int64(32<<10))
}

func TestNilEncodeCacheEncodesEveryTime(t *testing.T) {
	var c *EncodeCache
	var enc counting
	for range 3 {
		_, err := c.Encode("f", Message{Text: "a"}, enc.encode)
		require.NoError(t, err)
	}
	require.Equal(t, 3, enc.calls())
}

// TestEncodeCacheSweepDropsWhatNoRequestUsed: an entry no request used
// between two sweeps is dropped; one used stays, and once nothing is used
// the cache is empty.
func TestEncodeCacheSweepDropsWhatNoRequestUsed(t *testing.T) {
	c := NewEncodeCache(1 << 20)
	var enc counting
	used, unused := Message{Role: RoleUser, Text: "used"}, Message{Role: RoleUser, Text: "unused"}
	for _, m := range []Message{used, unused} {
		_, err := c.Encode("f", m, enc.encode)
		require.NoError(t, err)
	}
	c.Sweep()
	_, err := c.Encode("f", used, enc.encode)
	require.NoError(t, err)
	c.Sweep()
	require.Equal(t, 2, enc.calls())
	_, err = c.Encode("f", used, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 2, enc.calls(), "used since the sweep before, it was dropped")
	_, err = c.Encode("f", unused, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 3, enc.calls(), "unused across two sweeps, it was kept")

	c.Sweep()
	c.Sweep()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.entries)
	require.Zero(t, c.lru.Len())
	require.Zero(t, c.size)
}

// A request's head (model, effort, system prompt, tools, output cap) is
// encoded once for any number of steps, and again whenever any of them
// differs; messages play no part in it.
func TestEncodeCacheKeepsHeads(t *testing.T) {
	c := NewEncodeCache(DefaultEncodeCacheBytes)
	calls := 0
	encode := func(r Request) ([]byte, []byte, error) {
		calls++
		require.Nil(t, r.Messages)
		return []byte(fmt.Sprintf(`{"model":%q,"messages":[`, r.Model)), []byte(`]}`), nil
	}
	base := func() Request {
		return Request{
			Model: "m", ReasoningEffort: "high", System: strings.Repeat("s", 3) + "ystem", MaxTokens: 100,
			Tools:    []Tool{{Name: "view", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Messages: []Message{{Role: RoleUser, Text: "hi"}},
		}
	}
	pre, suf, err := c.Head("f", base(), encode)
	require.NoError(t, err)
	require.Equal(t, `{"model":"m","messages":[`, string(pre))
	require.Equal(t, `]}`, string(suf))
	again := base()
	again.Messages = append(again.Messages, Message{Role: RoleAssistant, Text: "more"})
	pre2, _, err := c.Head("f", again, encode)
	require.NoError(t, err)
	require.Equal(t, pre, pre2)
	require.Equal(t, 1, calls, "the same head, other messages: encoded once")

	for name, change := range map[string]func(*Request){
		"model":      func(r *Request) { r.Model = "n" },
		"effort":     func(r *Request) { r.ReasoningEffort = "low" },
		"system":     func(r *Request) { r.System = "other" },
		"max tokens": func(r *Request) { r.MaxTokens = 5 },
		"tool name":  func(r *Request) { r.Tools[0].Name = "ls" },
		"tool text":  func(r *Request) { r.Tools[0].Description = "e" },
		"schema":     func(r *Request) { r.Tools[0].Parameters = json.RawMessage(`{}`) },
		"no tools":   func(r *Request) { r.Tools = nil },
	} {
		r := base()
		change(&r)
		before := calls
		_, _, err := c.Head("f", r, encode)
		require.NoError(t, err)
		require.Equal(t, before+1, calls, "%s changed: encoded again", name)
	}
	_, _, err = c.Head("g", base(), encode)
	require.NoError(t, err)
	require.Equal(t, 10, calls, "another format")

	var none *EncodeCache
	_, _, err = none.Head("f", base(), encode)
	require.NoError(t, err)
	require.Equal(t, 11, calls, "no cache: encoded every time")
}

// A message whose text is the very string an entry holds is found by its
// address; that must never serve an entry whose other fields differ, nor
// one that was dropped.
func TestEncodeCacheSameTextOtherFields(t *testing.T) {
	c := NewEncodeCache(1 << 20)
	var enc counting
	text := strings.Repeat("shared ", 10)
	first := Message{Role: RoleTool, Text: text, ToolCallID: "a"}
	_, err := c.Encode("f", first, enc.encode)
	require.NoError(t, err)
	_, err = c.Encode("f", first, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 1, enc.calls(), "the same message again is a hit")

	other := Message{Role: RoleTool, Text: text, ToolCallID: "b"} // same bytes, same address
	_, err = c.Encode("f", other, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 2, enc.calls(), "another call id is another message")
	got, err := c.Encode("g", first, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 3, enc.calls(), "another format is another encoding")
	require.Equal(t, "tool:"+text, string(got))

	// Both entries of text's address are still found, by content at least.
	_, err = c.Encode("f", first, enc.encode)
	require.NoError(t, err)
	_, err = c.Encode("f", other, enc.encode)
	require.NoError(t, err)
	require.Equal(t, 3, enc.calls())

	// Dropped entries leave nothing behind in either index.
	c.Sweep()
	c.Sweep()
	c.mu.Lock()
	require.Empty(t, c.entries)
	require.Empty(t, c.same)
	c.mu.Unlock()
}

func TestEncodeCacheEvictionDropsBothIndexes(t *testing.T) {
	c := NewEncodeCache(8 << 10)
	var enc counting
	for i := range 200 {
		_, err := c.Encode("f", Message{Role: RoleUser, Text: fmt.Sprintf("message %d %s", i, strings.Repeat("x", 100))}, enc.encode)
		require.NoError(t, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Less(t, len(c.entries), 200, "the bound dropped some")
	require.Len(t, c.same, len(c.entries))
	for _, el := range c.same {
		require.Equal(t, el, c.entries[el.Value.(*encodedEntry).key])
	}
}

// Equal messages built from other strings (a history loaded again) are
// found by their addresses too, from their second step on; an entry is
// found under at most maxTexts addresses, the others by their hash.
func TestEncodeCacheAliases(t *testing.T) {
	c := NewEncodeCache(1 << 20)
	var enc counting
	text := strings.Repeat("again ", 20)
	copies := make([]Message, 10)
	for i := range copies {
		copies[i] = Message{Role: RoleUser, Text: strings.Clone(text)}
		_, err := c.Encode("f", copies[i], enc.encode)
		require.NoError(t, err)
	}
	require.Equal(t, 1, enc.calls())
	c.mu.Lock()
	require.Len(t, c.same, maxTexts)
	el := c.entries[c.hash("f", &copies[0])]
	require.Len(t, el.Value.(*encodedEntry).texts, maxTexts)
	for _, m := range copies[:maxTexts] {
		tk, _ := keyOfText(&m)
		require.Equal(t, el, c.same[tk], "the first copies' addresses")
	}
	c.mu.Unlock()
	c.Sweep()
	c.Sweep()
	c.mu.Lock()
	require.Empty(t, c.same)
	c.mu.Unlock()
}

// EncodeAll gives what Encode gives, message by message, found by address,
// by content or encoded, and stops at the first failure.
func TestEncodeAllIsEncodeForEach(t *testing.T) {
	c := NewEncodeCache(1 << 20)
	var enc counting
	msgs := []Message{{Role: RoleUser, Text: "a"}, {Role: RoleAssistant, Text: "b"}, {Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "view"}}}}
	first, _, err := c.EncodeAll("f", msgs[:2], enc.encode)
	require.NoError(t, err)
	require.Equal(t, []string{"user:a", "assistant:b"}, []string{string(first[0]), string(first[1])})
	again := append(slices.Clone(msgs), Message{Role: RoleUser, Text: strings.Clone("a")})
	got, _, err := c.EncodeAll("f", again, enc.encode)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, 3, enc.calls(), "only the message without text was new")
	for i, m := range again {
		want, err := c.Encode("f", m, enc.encode)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got[i]))
	}

	fail := func(m Message) ([]byte, error) {
		if m.Text == "bad" {
			return nil, fmt.Errorf("no")
		}
		return []byte(m.Text), nil
	}
	_, at, err := c.EncodeAll("g", []Message{{Text: "ok"}, {Text: "bad"}}, fail)
	require.Error(t, err)
	require.Equal(t, 1, at)
	var none *EncodeCache
	got, _, err = none.EncodeAll("f", msgs[:1], enc.encode)
	require.NoError(t, err)
	require.Equal(t, "user:a", string(got[0]))
}

// The copies an entry is found by are kept alive by the keys that point
// into them, so they count against the bound: reloading a history again
// and again does not let the cache hold more than its size.
func TestEncodeCacheAliasesCountAgainstTheBound(t *testing.T) {
	c := NewEncodeCache(64 << 10)
	var enc counting
	text := strings.Repeat("a long tool result ", 200) // ~3.8 KiB
	first := Message{Role: RoleTool, Text: text, ToolCallID: "call"}
	_, err := c.Encode("f", first, enc.encode)
	require.NoError(t, err)
	c.mu.Lock()
	before := c.size
	c.mu.Unlock()
	for range maxTexts - 1 { // each a history loaded again
		_, err := c.Encode("f", Message{Role: RoleTool, Text: strings.Clone(text), ToolCallID: "call"}, enc.encode)
		require.NoError(t, err)
	}
	require.Equal(t, 1, enc.calls())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Equal(t, before+int64(maxTexts-1)*aliasBytes(&first), c.size)
	var sum int64
	for el := c.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*encodedEntry).cost
	}
	require.Equal(t, c.size, sum, "the size is the entries' costs")
}
