package tui

import (
	"runtime"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/tandem-dev/tandem/proto"
)

// benchHistory is a 2,000-message session: 1,000 prompts and their
// markdown answers.
func benchHistory() []proto.Message {
	var msgs []proto.Message
	for i := range 1000 {
		msgs = append(msgs,
			proto.Message{ID: "u" + itoa(i), Role: proto.RoleUser, ClientID: me, Parts: []proto.Part{{Type: proto.PartText, Text: "question " + itoa(i) + ": why is the build slow?"}}},
			proto.Message{ID: "a" + itoa(i), Role: proto.RoleAssistant, Model: "echo", Parts: []proto.Part{
				{Type: proto.PartText, Text: "Answer " + itoa(i) + ". The **linker** spends most of the time:\n\n- cache `go build` outputs\n- split the package\n\n```go\nfunc main() {}\n```"},
				{Type: proto.PartFinish, Reason: proto.FinishEndTurn}}})
	}
	return msgs
}

// open is what happens between the TUI starting and its first drawn
// screen: the session's history arrives and the screen is drawn.
func openSession(b *testing.B, msgs []proto.Message) Model {
	api := newFake()
	api.msgs[sid] = msgs
	m := New(Config{API: api})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	next, _ = next.Update(ReadyMsg{Workspace: proto.Workspace{ID: wsID, Path: "/p"}, Session: proto.Session{ID: sid, Model: "echo"}})
	next, _ = next.Update(loadedMsg{sid: sid, msgs: msgs})
	m = next.(Model)
	_ = m.View()
	return m
}

// BenchmarkFirstFrame2000 is the time from the history's arrival to the
// first drawn screen of a 2,000-message session, and the memory it holds.
func BenchmarkFirstFrame2000(b *testing.B) {
	msgs := benchHistory()
	b.ReportAllocs()
	var keep Model
	for b.Loop() {
		keep = openSession(b, msgs)
	}
	b.StopTimer()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keep = openSession(b, msgs)
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
	runtime.KeepAlive(keep)
}

// BenchmarkFrameStreaming2000 is one frame while an answer streams at the
// end of a 2,000-message session: a delta arrives, the screen is drawn.
func BenchmarkFrameStreaming2000(b *testing.B) {
	m := openSession(b, benchHistory())
	b.ReportAllocs()
	for b.Loop() {
		next, _ := m.Update(EventMsg{Event: deltaEvent("word ")})
		m = next.(Model)
		_ = m.View()
	}
}

// BenchmarkFrameScroll2000 is one frame of scrolling up through the
// session a page at a time: from the end to the top, then again.
func BenchmarkFrameScroll2000(b *testing.B) {
	m := openSession(b, benchHistory())
	b.ReportAllocs()
	for b.Loop() {
		before := m.tr.offset
		next, _ := m.Update(tea.KeyPressMsg{Code: tea.KeyPgUp})
		m = next.(Model)
		_ = m.View()
		if m.tr.offset == before {
			m.tr.offset = 0 // at the top: start over from the end
		}
	}
}

func deltaEvent(text string) proto.Event {
	raw := []byte(`{"message_id":"streaming","part_index":0,"kind":"text","text":"` + text + `"}`)
	return proto.Event{Type: proto.EventMessageDelta, SessionID: sid, Data: raw}
}

// BenchmarkRenderAll2000 is the baseline the TUI avoids: every message of
// the session rendered, as a view that draws everything before cutting
// what fits would.
func BenchmarkRenderAll2000(b *testing.B) {
	msgs := benchHistory()
	for b.Loop() {
		m := openSession(b, msgs)
		for _, e := range m.tr.entries {
			m.tr.render(e, m.width, m.dark)
		}
	}
}
