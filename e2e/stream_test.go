package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/r3labs/sse/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func TestStreamOpensWithHeadersAndOpenedFrame(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	cid := newClientID()
	s := e.openStream(ws.ID, cid, "")
	assert.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-cache", s.resp.Header.Get("Cache-Control"))
	assert.Equal(t, "no", s.resp.Header.Get("X-Accel-Buffering"))

	f := s.next()
	require.Equal(t, proto.EventStreamOpened, f.Event)
	assert.Empty(t, f.ID, "control frames carry no id")
	var opened proto.StreamOpened
	require.NoError(t, json.Unmarshal([]byte(f.Data), &opened))
	assert.Equal(t, cid, opened.ClientID)
	assert.Equal(t, ws.ID, opened.WorkspaceID)

	att := s.next()
	require.Equal(t, proto.EventClientAttached, att.Event)
	ev := att.envelope(t)
	assert.True(t, ev.Ephemeral)
	assert.Greater(t, ev.Seq, opened.HeadSeq)
	assert.Equal(t, strconv.FormatInt(ev.Seq, 10), att.ID)
	var presence proto.ClientPresence
	require.NoError(t, json.Unmarshal(ev.Data, &presence))
	// Opened with the owner token: v1.2 names its person.
	assert.Equal(t, proto.ClientPresence{ClientID: cid, Clients: 1, Name: "owner"}, presence)
	assert.Equal(t, 1, e.workspace(ws.ID).Clients)
}

func TestTwoClientsSeeTheSameEvents(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	a := e.openStream(ws.ID, newClientID(), "")
	b := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, nil)
	seq := e.log(ws.ID, sess.ID, "hello both", false)

	var seqsA, seqsB []string
	for _, s := range []*stream{a, b} {
		f, before := s.until(proto.EventSessionLog)
		ids := []string{}
		for _, g := range append(before, f) {
			if g.Event == proto.EventSessionCreated || g.Event == proto.EventSessionStarted || g.Event == proto.EventSessionLog {
				ids = append(ids, g.Event+"@"+g.ID)
			}
		}
		if s == a {
			seqsA = ids
		} else {
			seqsB = ids
		}
		assert.Equal(t, strconv.FormatInt(seq, 10), f.ID)
	}
	require.Len(t, seqsA, 3)
	assert.Equal(t, seqsA, seqsB)

	// Killing A leaves B streaming.
	a.close()
	det, _ := b.until(proto.EventClientDetached)
	var presence proto.ClientPresence
	require.NoError(t, json.Unmarshal(det.envelope(t).Data, &presence))
	assert.Equal(t, a.ClientID, presence.ClientID)
	assert.Equal(t, 1, presence.Clients)
	seq2 := e.log(ws.ID, sess.ID, "only b", false)
	f, _ := b.until(proto.EventSessionLog)
	assert.Equal(t, strconv.FormatInt(seq2, 10), f.ID)
}

func TestSessionFilter(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s1 := e.createSession(ws.ID, nil)
	s2 := e.createSession(ws.ID, nil)
	st := e.openStream(ws.ID, newClientID(), "&session_id="+s1.ID)
	other := newClientID()
	o := e.openStream(ws.ID, other, "")
	e.log(ws.ID, s2.ID, "not for the filtered stream", false)
	e.log(ws.ID, s1.ID, "for it", false)
	f, before := st.until(proto.EventSessionLog)
	assert.Equal(t, s1.ID, f.envelope(t).SessionID)
	sawOtherAttach := false
	for _, g := range before {
		ev := g.envelope(t)
		if ev.SessionID != "" {
			assert.Equal(t, s1.ID, ev.SessionID, "filtered stream got %s", g.Event)
		}
		if g.Event == proto.EventClientAttached && strings.Contains(g.Data, other) {
			sawOtherAttach = true
		}
	}
	assert.True(t, sawOtherAttach, "workspace-level events pass the filter")
	o.until(proto.EventSessionLog)
}

func TestResumeWithLastEventIDGetsExactlyTheMissedEvents(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	cid := newClientID()
	s := e.openStream(ws.ID, cid, "")
	first := e.log(ws.ID, sess.ID, "seen", false)
	f, _ := s.until(proto.EventSessionLog)
	require.Equal(t, strconv.FormatInt(first, 10), f.ID)
	s.close()

	var missed []int64
	for i := range 5 {
		missed = append(missed, e.log(ws.ID, sess.ID, fmt.Sprintf("missed %d", i), false))
		e.log(ws.ID, sess.ID, "ephemeral, never replayed", true)
	}
	r := e.openStream(ws.ID, cid, "", lastEventID(first))
	require.Equal(t, proto.EventStreamOpened, r.next().Event)
	var got []int64
	var prev int64
	for len(got) < len(missed) {
		f := r.next()
		if f.Event == proto.EventClientAttached || f.Event == proto.EventClientDetached {
			continue
		}
		ev := f.envelope(t)
		require.Greater(t, ev.Seq, prev, "in order, no duplicates")
		prev = ev.Seq
		require.False(t, ev.Ephemeral, "ephemeral events are not replayed: %s", f.Data)
		got = append(got, ev.Seq)
	}
	assert.Equal(t, missed, got)

	// Then live, with nothing repeated.
	live := e.log(ws.ID, sess.ID, "live", false)
	f, _ = r.until(proto.EventSessionLog)
	assert.Equal(t, strconv.FormatInt(live, 10), f.ID)

	// The query parameter works like the header.
	q := e.openStream(ws.ID, newClientID(), fmt.Sprintf("&last_event_id=%d", missed[3]))
	require.Equal(t, proto.EventStreamOpened, q.next().Event)
	f, _ = q.until(proto.EventSessionLog)
	assert.Equal(t, strconv.FormatInt(missed[4], 10), f.ID)
}

func TestResumeBeyondHeadGetsReset(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "", lastEventID(1_000_000))
	opened := s.next()
	require.Equal(t, proto.EventStreamOpened, opened.Event)
	reset := s.next()
	require.Equal(t, proto.EventStreamReset, reset.Event)
	assert.Empty(t, reset.ID)
	var body proto.StreamReset
	require.NoError(t, json.Unmarshal([]byte(reset.Data), &body))
	var op proto.StreamOpened
	require.NoError(t, json.Unmarshal([]byte(opened.Data), &op))
	assert.Equal(t, op.HeadSeq, body.HeadSeq)
	// And then it is live.
	sess := e.createSession(ws.ID, nil)
	e.log(ws.ID, sess.ID, "live after reset", false)
	s.until(proto.EventSessionLog)
}

func TestRestartKeepsEverythingAndSeqKeepsGrowing(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, map[string]any{"title": "survivor"})
	s := e.openStream(ws.ID, newClientID(), "")
	before := e.log(ws.ID, sess.ID, "before restart", false)
	e.log(ws.ID, sess.ID, "ephemeral before restart", true)
	_, seen := s.until(proto.EventSessionLog)
	_ = seen
	ephem, _ := s.until(proto.EventSessionLog)
	ephemSeq := ephem.envelope(t).Seq

	e.restart()

	var again proto.Workspace
	e.must(http.StatusOK, "POST", "/v1/workspaces", map[string]string{"path": e.workDir}, &again)
	assert.Equal(t, ws.ID, again.ID, "same id for the same path across restarts")
	var list proto.SessionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/sessions", nil, &list)
	require.Len(t, list.Sessions, 1)
	assert.Equal(t, "survivor", list.Sessions[0].Title)

	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
	require.NotEmpty(t, hist.Events)
	assert.Equal(t, proto.EventSessionStarted, hist.Events[0].Type)
	assert.Equal(t, before, hist.Events[len(hist.Events)-1].Seq)

	after := e.log(ws.ID, sess.ID, "after restart", false)
	assert.Greater(t, after, ephemSeq, "seq keeps growing across restarts, past ephemeral seqs too")

	// A client that last saw the pre-restart event resumes from the database.
	r := e.openStream(ws.ID, newClientID(), "", lastEventID(before))
	f, between := r.until(proto.EventSessionLog)
	assert.Equal(t, strconv.FormatInt(after, 10), f.ID)
	for _, g := range between {
		assert.NotEqual(t, proto.EventSessionLog, g.Event)
	}
}

func TestWorkspaceClosesAfterDetachGraceAndReconnectKeepsItOpen(t *testing.T) {
	const grace = 300 * time.Millisecond
	e := startEnv(t, withGraces(grace, grace))
	ws := e.createWorkspace()
	assert.True(t, ws.Open)

	cid := newClientID()
	s := e.openStream(ws.ID, cid, "")
	s.until(proto.EventClientAttached)
	s.close()
	// Reconnect inside the grace: the workspace never closes.
	s = e.openStream(ws.ID, cid, "")
	require.Never(t, func() bool { return !e.workspace(ws.ID).Open }, 3*grace, 20*time.Millisecond)

	s.close()
	eventually(t, func() bool { return !e.workspace(ws.ID).Open }, "workspace closes after the detach grace")

	// Attaching reopens it.
	s = e.openStream(ws.ID, cid, "")
	s.until(proto.EventClientAttached)
	assert.True(t, e.workspace(ws.ID).Open)
}

func TestCreateGraceClosesAnUnclaimedWorkspace(t *testing.T) {
	e := startEnv(t, withGraces(200*time.Millisecond, time.Minute))
	ws := e.createWorkspace()
	require.True(t, ws.Open)
	eventually(t, func() bool { return !e.workspace(ws.ID).Open }, "closes when the create hold ends with nobody attached")
	var again proto.Workspace
	e.must(http.StatusOK, "POST", "/v1/workspaces", map[string]string{"path": e.workDir}, &again)
	assert.True(t, again.Open, "POST reopens a closed workspace")
}

func TestDeleteWorkspaceClosesAtOnce(t *testing.T) {
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	frames := s.ended()
	var types []string
	for _, f := range frames {
		types = append(types, f.Event)
	}
	assert.Contains(t, types, proto.EventWorkspaceClosing)
	assert.False(t, e.workspace(ws.ID).Open)
}

func TestStalledClientIsEvictedWithoutDelayingOthers(t *testing.T) {
	// The contract's default queue (1 MiB) for every stream.
	e := startEnv(t, withGraces(time.Minute, time.Minute))
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)

	// The stalled client sends its request and never reads a byte.
	stalledID := newClientID()
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /v1/workspaces/%s/events?client_id=%s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n\r\n", ws.ID, stalledID, testToken)
	require.NoError(t, err)

	healthy := make([]*stream, 3)
	for i := range healthy {
		healthy[i] = e.openStream(ws.ID, newClientID(), "")
	}
	eventually(t, func() bool { return e.workspace(ws.ID).Clients == 4 }, "all four attached")

	// 16 MB in all: enough to fill the stalled connection's kernel buffers and
	// then its 1 MiB queue. Events go out in batches of 16 (512 KiB) and each
	// batch must reach every healthy client before the next: a healthy client
	// never has more than half its queue pending, whatever the machine's speed,
	// while the stalled one piles up everything.
	big := strings.Repeat("x", 32<<10)
	const batches, per = 32, 16
	got := make([][]int64, len(healthy))
	var sent []int64
	for b := range batches {
		for i := range per {
			sent = append(sent, e.log(ws.ID, sess.ID, fmt.Sprintf("%d %s", b*per+i, big), false))
		}
		for i, h := range healthy {
			seqs, err := h.collectWithin(proto.EventSessionLog, per, wait)
			require.NoError(t, err, "healthy client %d, batch %d", i, b)
			got[i] = append(got[i], seqs...)
		}
	}
	for i := range healthy {
		assert.Equal(t, sent, got[i], "healthy client %d got every event in order", i)
	}
	eventually(t, func() bool { return e.workspace(ws.ID).Clients == 3 }, "the stalled client was evicted")
}

func TestHeartbeat(t *testing.T) {
	e := startEnv(t, withHeartbeat(50*time.Millisecond))
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	select {
	case c := <-s.comments:
		assert.Equal(t, ": ping", c)
	case <-time.After(wait):
		t.Fatal("no heartbeat")
	}
}

// A third-party SSE client (r3labs/sse) reads the stream as any peer would.
func TestThirdPartySSEClientReadsTheStream(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	sess := e.createSession(ws.ID, nil)
	c := sse.NewClient(fmt.Sprintf("%s/v1/workspaces/%s/events?client_id=%s", e.ts.URL, ws.ID, newClientID()))
	c.Headers["Authorization"] = "Bearer " + testToken
	c.ReconnectStrategy = nil
	got := make(chan *sse.Event, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.SubscribeRawWithContext(ctx, func(msg *sse.Event) {
			if string(msg.Event) == proto.EventSessionLog {
				got <- msg
			}
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	// Log until the subscriber sees one; it may attach after the first.
	deadline := time.After(wait)
	for {
		seq := e.log(ws.ID, sess.ID, "to a third party", false)
		select {
		case msg := <-got:
			var ev proto.Event
			require.NoError(t, json.Unmarshal(msg.Data, &ev))
			assert.Equal(t, string(msg.ID), strconv.FormatInt(ev.Seq, 10))
			assert.LessOrEqual(t, ev.Seq, seq)
			assert.Equal(t, sess.ID, ev.SessionID)
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("r3labs client got no session.log")
		}
	}
}

func TestShutdownTellsStreams(t *testing.T) {
	e := startEnv(t)
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	s.until(proto.EventClientAttached)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.stop()
	}()
	frames := s.ended()
	<-done
	var closing *proto.WorkspaceClosing
	for _, f := range frames {
		if f.Event == proto.EventWorkspaceClosing {
			closing = new(proto.WorkspaceClosing)
			require.NoError(t, json.Unmarshal(f.envelope(t).Data, closing))
		}
	}
	require.NotNil(t, closing, "streams are told the workspace is closing")
	assert.Equal(t, "shutdown", closing.Reason)
}

// collectWithin gathers the seqs of n frames of type typ within d. It reports
// failure by error so it can run on a goroutine other than the test's.
func (s *stream) collectWithin(typ string, n int, d time.Duration) ([]int64, error) {
	var seqs []int64
	deadline := time.After(d)
	for len(seqs) < n {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return seqs, fmt.Errorf("stream of %s ended after %d %s", s.ClientID, len(seqs), typ)
			}
			if f.Event != typ {
				continue
			}
			var ev proto.Event
			if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
				return seqs, err
			}
			seqs = append(seqs, ev.Seq)
		case <-deadline:
			return seqs, fmt.Errorf("stream of %s: %d of %d %s within %v", s.ClientID, len(seqs), n, typ, d)
		}
	}
	return seqs, nil
}
