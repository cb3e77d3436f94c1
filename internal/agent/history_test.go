package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/proto"
)

// countingStore counts history reads.
type countingStore struct {
	store.Store
	reads atomic.Int32
}

func (s *countingStore) ListMessages(ctx context.Context, sessionID string) ([]proto.Message, error) {
	s.reads.Add(1)
	return s.Store.ListMessages(ctx, sessionID)
}

// put writes m as a run's write function would.
func (s *countingStore) put(m proto.Message) error {
	return s.PutMessage(context.Background(), m)
}

func newHistoryStore(t *testing.T) (*countingStore, string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, t.TempDir()+"/t.db")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ws, _, err := db.EnsureWorkspace(ctx, store.Workspace{ID: uuid.NewString(), Path: t.TempDir()})
	require.NoError(t, err)
	sid := uuid.NewString()
	require.NoError(t, db.CreateSession(ctx, store.Session{ID: sid, WorkspaceID: ws.ID, Title: "t", Model: "echo"}))
	return &countingStore{Store: db}, sid
}

func textMessage(sid, text string) proto.Message {
	return proto.Message{ID: uuid.NewString(), SessionID: sid, Role: proto.RoleUser, Parts: []proto.Part{{Type: proto.PartText, Text: text}}}
}

// The history in memory is what the store would return, in the store's
// order, through new messages, rewrites of older ones and saves from many
// goroutines at once, and the store is read once.
func TestHistoryMatchesStore(t *testing.T) {
	ctx := context.Background()
	st, sid := newHistoryStore(t)
	var h History

	first := textMessage(sid, "before load")
	require.NoError(t, h.Record(first, st.put))
	got, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)
	require.Len(t, got, 1)

	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			m := textMessage(sid, fmt.Sprint("side by side ", i))
			require.NoError(t, h.Record(m, st.put))
			m.Parts = append(m.Parts, proto.Part{Type: proto.PartText, Text: " and again"})
			require.NoError(t, h.Record(m, st.put))
		})
	}
	wg.Wait()
	first.Parts[0].Text = "rewritten"
	require.NoError(t, h.Record(first, st.put))

	got, err = h.Messages(ctx, st, sid)
	require.NoError(t, err)
	require.Equal(t, int32(1), st.reads.Load(), "the store is read once")
	want, err := st.Store.ListMessages(ctx, sid)
	require.NoError(t, err)
	require.Len(t, got, 33)
	require.Equal(t, ids(want), ids(got), "same order as the store")
	for i := range want {
		require.Equal(t, want[i].Parts, got[i].Parts)
	}
}

// A run keeps streaming into its own copy of a saved message: the history
// keeps what was saved, not what the run changed afterwards.
func TestHistoryKeepsWhatWasSaved(t *testing.T) {
	ctx := context.Background()
	st, sid := newHistoryStore(t)
	var h History
	_, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)

	m := textMessage(sid, "saved")
	require.NoError(t, h.Record(m, st.put))
	m.Parts[0].Text = "streamed after the save"
	got, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)
	require.Equal(t, "saved", got[0].Parts[0].Text)
}

// Messages recorded before the first read are merged with what the store
// has, whether their writes have committed yet or not; a failed write is not
// kept.
func TestHistoryMergesRecordsBeforeLoad(t *testing.T) {
	ctx := context.Background()
	st, sid := newHistoryStore(t)
	old := textMessage(sid, "an earlier run")
	require.NoError(t, st.PutMessage(ctx, old))

	var h History
	committed := textMessage(sid, "committed")
	require.NoError(t, h.Record(committed, st.put))
	queued := textMessage(sid, "still queued")
	require.NoError(t, h.Record(queued, func(proto.Message) error { return nil }))
	require.Error(t, h.Record(textMessage(sid, "lost"), func(proto.Message) error { return errors.New("disk full") }))

	got, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)
	require.Equal(t, []string{old.ID, committed.ID, queued.ID}, ids(got))
}

// What Messages handed out never changes when messages are replaced or
// added, and readers through Read, side by side with the writer, never see
// a message being replaced (run it under -race).
func TestHistoryReadersAndWriters(t *testing.T) {
	ctx := context.Background()
	st, sid := newHistoryStore(t)
	var h History
	nothing := func(proto.Message) error { return nil }
	old := textMessage(sid, "old")
	require.NoError(t, h.Record(old, nothing))
	view, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				require.NoError(t, h.Read(ctx, st, sid, func(msgs []proto.Message) {
					for _, m := range msgs {
						_ = m.Parts[0].Text // what the writer may be replacing
					}
				}))
			}
		})
	}
	next := textMessage(sid, "opened")
	for i := range 200 {
		require.NoError(t, h.Record(next, nothing))
		next.Parts = []proto.Part{{Type: proto.PartText, Text: fmt.Sprint("step ", i)}}
	}
	old.Parts = []proto.Part{{Type: proto.PartText, Text: "replaced"}}
	require.NoError(t, h.Record(old, nothing))
	require.NoError(t, h.Record(textMessage(sid, "appended"), nothing))
	wg.Wait()

	require.Len(t, view, 1)
	require.Equal(t, "old", view[0].Parts[0].Text)
	got, err := h.Messages(ctx, st, sid)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, "replaced", got[0].Parts[0].Text)
	require.Equal(t, "step 198", got[1].Parts[0].Text)
}

func ids(msgs []proto.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// TestHistorySizeFollowsItsMessages: what a history reports holding grows
// with what is recorded, counts a message replaced at its new size only,
// and never counts less than the text it keeps.
func TestHistorySizeFollowsItsMessages(t *testing.T) {
	var h History
	require.Zero(t, h.Size())
	var nilHistory *History
	require.Zero(t, nilHistory.Size())
	text := func(n int) []proto.Part { return []proto.Part{{Type: proto.PartText, Text: string(make([]byte, n))}} }
	noWrite := func(proto.Message) error { return nil }
	for i := range 100 {
		require.NoError(t, h.Record(proto.Message{ID: fmt.Sprint("m", i), Role: proto.RoleUser, Parts: text(1000)}, noWrite))
	}
	grown := h.Size()
	require.GreaterOrEqual(t, grown, int64(100*1000))
	require.Less(t, grown, int64(100*1000*3), "a history of 100 KB of text said it holds %d", grown)

	// Replacing a message with a longer version counts the difference.
	require.NoError(t, h.Record(proto.Message{ID: "m5", Role: proto.RoleUser, Parts: text(51000)}, noWrite))
	require.Equal(t, grown+50000, h.Size())
}

// A history loaded from the store holds the strings that repeat from one
// message to the next once, not a copy per message as decoding leaves them.
func TestLoadedHistorySharesRepeatedStrings(t *testing.T) {
	ctx := context.Background()
	st, sid := newHistoryStore(t)
	runID := uuid.NewString()
	for _, role := range []string{proto.RoleUser, proto.RoleAssistant} {
		m := textMessage(sid, "hello")
		m.Role, m.RunID, m.Model = role, runID, "openai/fake"
		m.Parts = append(m.Parts, proto.Part{Type: proto.PartFinish, Reason: proto.FinishEndTurn})
		require.NoError(t, st.put(m))
	}
	var h History
	require.NoError(t, h.Read(ctx, st, strings.Clone(sid), func(msgs []proto.Message) {
		require.Len(t, msgs, 2)
		a, b := msgs[0], msgs[1]
		require.True(t, unsafe.StringData(a.SessionID) == unsafe.StringData(b.SessionID), "session id")
		require.True(t, unsafe.StringData(a.RunID) == unsafe.StringData(b.RunID), "run id")
		require.True(t, unsafe.StringData(a.Model) == unsafe.StringData(b.Model), "model")
		require.True(t, unsafe.StringData(proto.RoleAssistant) == unsafe.StringData(b.Role), "role")
		require.True(t, unsafe.StringData(proto.PartText) == unsafe.StringData(b.Parts[0].Type), "part type")
		require.True(t, unsafe.StringData(proto.FinishEndTurn) == unsafe.StringData(b.Parts[1].Reason), "finish reason")
	}))
}
