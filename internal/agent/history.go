package agent

import (
	"context"
	"slices"
	"sync"
	"unsafe"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// History is one session's messages, kept in memory so that a model step
// does not reread and decode the whole conversation from the store: that
// reread grew with every turn and was most of a run's CPU in long sessions.
//
// Every message of a session is recorded through it (runs of a session never
// overlap, and nothing else writes messages), in the order its writes are
// queued, which is the order they reach the disk. The zero value is ready to
// use and reads the store once, at the first Messages. A nil *History reads
// the store every time.
type History struct {
	mu     sync.Mutex
	loaded bool
	// msgs is the conversation once loaded; before that, only the messages
	// recorded since, which loading merges into what the store has.
	msgs  []proto.Message
	index map[string]int // message id to position in msgs
	// size is roughly what msgs hold in memory, in bytes.
	size int64
}

// Size returns roughly how many bytes of memory the history holds, so that
// its keeper can bound what idle sessions keep; a nil History holds none.
func (h *History) Size() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The slice's spare room and the index count too: a history that
	// grew by appends holds up to twice its messages' headers.
	spare := int64(cap(h.msgs)-len(h.msgs)) * int64(unsafe.Sizeof(proto.Message{}))
	return h.size + spare + int64(len(h.index))*indexEntryBytes
}

// indexEntryBytes is roughly what an entry of the index holds besides its
// key, which the message shares.
const indexEntryBytes = 48

// messageBytes is roughly what m holds in memory: its strings and the
// headers around them, the parts' spare room included.
func messageBytes(m *proto.Message) int64 {
	n := int(unsafe.Sizeof(*m)) + len(m.ID) + len(m.SessionID) + len(m.RunID) + len(m.Role) + len(m.Model) +
		cap(m.Parts)*int(unsafe.Sizeof(proto.Part{}))
	for i := range m.Parts {
		p := &m.Parts[i]
		n += len(p.Type) + len(p.Text) + len(p.ID) + len(p.Name) + len(p.Arguments) +
			len(p.ToolCallID) + len(p.Content) + len(p.Kind) + len(p.Path) + len(p.MimeType) +
			len(p.DisplayName) + len(p.Reason) + len(p.Message)
	}
	return int64(n)
}

// Messages returns a copy of the session's messages, oldest first; the
// messages' parts are shared and must not be changed.
func (h *History) Messages(ctx context.Context, st store.Store, sessionID string) ([]proto.Message, error) {
	var out []proto.Message
	err := h.Read(ctx, st, sessionID, func(msgs []proto.Message) { out = slices.Clone(msgs) })
	return out, err
}

// Read calls fn with the session's messages, oldest first, under the
// History's lock, so that each model step can read the whole conversation
// without copying it. fn must not keep or change them, nor record.
func (h *History) Read(ctx context.Context, st store.Store, sessionID string, fn func([]proto.Message)) error {
	if h == nil {
		msgs, err := st.ListMessages(ctx, sessionID)
		if err == nil {
			fn(msgs)
		}
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		stored, err := st.ListMessages(ctx, sessionID)
		if err != nil {
			return err
		}
		// Messages recorded before the load may or may not be committed
		// yet; either way they are newer than what the store returned.
		recent := h.msgs
		share(stored, sessionID)
		h.msgs, h.index, h.size = stored, make(map[string]int, len(stored)+len(recent)), 0
		for i := range stored {
			h.index[stored[i].ID] = i
			h.size += messageBytes(&stored[i])
		}
		for _, m := range recent {
			h.putLocked(m)
		}
		h.loaded = true
	}
	fn(h.msgs)
	return nil
}

// share makes the messages read from the store share the strings that
// repeat from one message to the next instead of holding a copy each, as
// decoding leaves them: the session id, the roles, the run id of a
// prompt and its answer, the model, the client, the part types and finish
// reasons. That is a third of a loaded message's allocations, and the
// tiny ones: evicted and loaded again and again, a history's small objects
// scatter over the heap's spans and keep more of it in use than they hold.
func share(msgs []proto.Message, sessionID string) {
	var prev *proto.Message
	for i := range msgs {
		m := &msgs[i]
		if m.SessionID == sessionID {
			m.SessionID = sessionID
		}
		m.Role = known(m.Role, proto.RoleUser, proto.RoleAssistant)
		if prev != nil {
			same(&m.RunID, prev.RunID)
			same(&m.Model, prev.Model)
			same(&m.ClientID, prev.ClientID)
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			p.Type = known(p.Type, proto.PartText, proto.PartFinish, proto.PartToolCall, proto.PartToolResult,
				proto.PartReasoning, proto.PartAttachment, proto.PartSummary)
			p.Reason = known(p.Reason, proto.FinishEndTurn, proto.FinishToolUse, proto.FinishMaxTokens,
				proto.FinishCanceled, proto.FinishError, proto.FinishInterrupted)
		}
		prev = m
	}
}

// known returns the constant among names that equals s, else s.
func known(s string, names ...string) string {
	for _, n := range names {
		if s == n {
			return n
		}
	}
	return s
}

// same points *s at v's bytes when they are equal.
func same(s *string, v string) {
	if *s == v {
		*s = v
	}
}

// Record hands m to write, which persists it or queues it to be, and then
// keeps it: a new message goes last, a known one is replaced in place, as the
// store orders them. Records are serialized so that the order in memory is
// the order of the writes even when tool calls finish side by side. When
// write fails, m is not kept.
func (h *History) Record(m proto.Message, write func(proto.Message) error) error {
	// The run goes on appending to and streaming into its copy's parts,
	// while the write may encode m later (a run's events linger).
	m.Parts = slices.Clone(m.Parts)
	if h == nil {
		return write(m)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := write(m); err != nil {
		return err
	}
	h.putLocked(m)
	return nil
}

func (h *History) putLocked(m proto.Message) {
	if h.index == nil {
		h.index = make(map[string]int)
	}
	if i, ok := h.index[m.ID]; ok {
		h.size += messageBytes(&m) - messageBytes(&h.msgs[i])
		h.msgs[i] = m
		return
	}
	h.index[m.ID] = len(h.msgs)
	h.msgs = append(h.msgs, m)
	h.size += messageBytes(&m)
}
