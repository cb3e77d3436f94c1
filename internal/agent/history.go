package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// History is one session's messages, kept in memory so that a model step
// does not reread and decode the whole conversation from the store: that
// reread grew with every turn and was most of a run's CPU in long sessions.
//
// It stays true to the store because every message of a session is written
// through it (runs of a session never overlap, and nothing else writes
// messages), and a message enters it only once it is on disk. The zero value
// is ready to use and loads from the store on first use. A nil *History
// rereads the store every time.
type History struct {
	mu     sync.Mutex
	loaded bool
	msgs   []proto.Message
	index  map[string]int // message id to position in msgs
}

// Messages returns the session's messages, oldest first, reading them from
// st only the first time. The slice is the caller's; the messages' parts are
// shared and must not be changed.
func (h *History) Messages(ctx context.Context, st store.Store, sessionID string) ([]proto.Message, error) {
	if h == nil {
		return st.ListMessages(ctx, sessionID)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		msgs, err := st.ListMessages(ctx, sessionID)
		if err != nil {
			return nil, err
		}
		h.msgs, h.index, h.loaded = msgs, make(map[string]int, len(msgs)), true
		for i, m := range msgs {
			h.index[m.ID] = i
		}
	}
	return append([]proto.Message(nil), h.msgs...), nil
}

// Save writes m to st, then records it: a new message goes last, a known one
// is replaced in place, as the store orders them. Saves are serialized so
// that the order in memory is the order on disk even when tool calls finish
// side by side.
func (h *History) Save(ctx context.Context, st store.Store, m proto.Message) error {
	if h == nil {
		return st.PutMessage(ctx, m)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := st.PutMessage(ctx, m); err != nil {
		// Whether the row made it is unknown: forget everything and
		// reload from the store next time.
		h.loaded, h.msgs, h.index = false, nil, nil
		return fmt.Errorf("save message %s: %w", m.ID, err)
	}
	if !h.loaded {
		return nil
	}
	// The run goes on appending to and streaming into its copy's parts.
	m.Parts = slices.Clone(m.Parts)
	if i, ok := h.index[m.ID]; ok {
		h.msgs[i] = m
		return nil
	}
	h.index[m.ID] = len(h.msgs)
	h.msgs = append(h.msgs, m)
	return nil
}
