package storetest

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// Benchmark runs the store's benchmarks on stores from open, so backends
// compare on the same writes:
//   - AppendEvent: one event per commit, one writer;
//   - AppendEventParallel: 32 writers per core, which the group commit
//     serves with shared commits instead of one each;
//   - PromptWrites: the writes of one echo prompt, one commit after the
//     other, over 64 sessions: the 202's commit (run.accepted and a touch),
//     then the run's (run.started, the user message, the assistant message
//     opened and finished, run.completed with a touch, session.idle). It is
//     the store's share of a prompt's cost, without the scheduling noise of
//     the e2e benchmarks. Message ids are version 7 UUIDs, as the agent
//     makes them.
func Benchmark(b *testing.B, open func(testing.TB) store.Store) {
	b.Run("AppendEvent", func(b *testing.B) { benchAppendEvent(b, open(b)) })
	b.Run("AppendEventParallel", func(b *testing.B) { benchAppendEventParallel(b, open(b)) })
	b.Run("PromptWrites", func(b *testing.B) { benchPromptWrites(b, open(b)) })
}

func benchAppendEvent(b *testing.B, s store.Store) {
	mustWorkspace(b, s, "w")
	env := make([]byte, 256)
	var seq int64
	for b.Loop() {
		seq++
		if err := s.AppendEvent(bg, store.Event{WorkspaceID: "w", Seq: seq, SessionID: "s", RunID: "r",
			Type: "message.delta", InHistory: true, Envelope: env}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchAppendEventParallel(b *testing.B, s store.Store) {
	mustWorkspace(b, s, "w")
	var seq atomic.Int64
	env := bytes.Repeat([]byte("x"), 256)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.AppendEvent(bg, store.Event{Seq: seq.Add(1), WorkspaceID: "w", Type: "t", Envelope: env}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchPromptWrites(b *testing.B, s store.Store) {
	mustWorkspace(b, s, "w")
	const sessions = 64
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = uuid.NewString()
		mustSession(b, s, "w", ids[i], t0)
	}
	env := bytes.Repeat([]byte("x"), 300)
	var seq int64
	event := func(sid, typ string, m *proto.Message, touch bool) store.Event {
		seq++
		e := store.Event{WorkspaceID: "w", Seq: seq, SessionID: sid, RunID: "r", Type: typ, InHistory: true, Envelope: env, Message: m}
		if touch {
			e.Touch = time.Now()
		}
		return e
	}
	i := 0
	for b.Loop() {
		sid := ids[i%sessions]
		i++
		if err := s.AppendEvents(bg, []store.Event{event(sid, "run.accepted", nil, true)}); err != nil {
			b.Fatal(err)
		}
		user := msg(uuid.Must(uuid.NewV7()).String(), sid, "hello")
		user.Role = proto.RoleUser
		opened := msg(uuid.Must(uuid.NewV7()).String(), sid, "")
		finished := opened
		finished.Parts = []proto.Part{{Type: proto.PartText, Text: "hello, echoed back in a few deltas"}, {Type: proto.PartFinish, Reason: "end_turn"}}
		if err := s.AppendEvents(bg, []store.Event{
			event(sid, "run.started", nil, false),
			event(sid, "message.updated", &user, false),
			event(sid, "message.updated", &opened, false),
			event(sid, "message.updated", &finished, false),
			event(sid, "run.completed", nil, true),
			event(sid, "session.idle", nil, false),
		}); err != nil {
			b.Fatal(err)
		}
	}
}
