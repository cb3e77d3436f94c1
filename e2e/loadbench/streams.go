package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/e2e/benchkit"
	"github.com/tandem-dev/tandem/proto"
)

// The streams phase: many clients on one server (issue 26, goal 1). Its
// size is set by these flags, so that it can run small.
var (
	streamsTotal      = flag.Int("streams", 10000, "streams phase: clients attached, spread over -stream-workspaces")
	streamsWorkspaces = flag.Int("stream-workspaces", 100, "streams phase: workspaces")
	streamsStreaming  = flag.Int("streaming", 100, "streams phase: clients on sessions that stream (a paced run of -deltas deltas -gap apart on each such session)")
)

// streamsConfig is the streams phase's size.
type streamsConfig struct {
	total, workspaces, streaming int
}

func streamsSize() streamsConfig {
	return streamsConfig{total: *streamsTotal, workspaces: *streamsWorkspaces, streaming: *streamsStreaming}
}

func streamsMetrics(cfg config) []metric {
	sc := streamsSize()
	return []metric{
		{"streams-delta-p50", fmt.Sprintf("%d streams: delta delivery p50, %d streaming", sc.total, sc.streaming), "ns"},
		{"streams-delta-p99", fmt.Sprintf("%d streams: delta delivery p99, %d streaming", sc.total, sc.streaming), "ns"},
		{"streams-rss", fmt.Sprintf("%d streams: RSS per idle stream", sc.total), "KiB"},
		{"streams-open", fmt.Sprintf("%d streams: time to open them all", sc.total), "ns"},
		{"streams-storm", fmt.Sprintf("%d streams: reconnect storm, all caught up", sc.total), "ns"},
		{"streams-storm-connect-p50", "reconnect storm: connect p50", "ns"},
		{"streams-storm-connect-p99", "reconnect storm: connect p99", "ns"},
		{"streams-storm-overflows", "reconnect storm: accept queue overflows", ""},
		{"streams-storm-cpu", "reconnect storm: server CPU", "ms"},
	}
}

// streamsOpenConcurrency is how many streams the phase opens at a time
// before the storm (which opens them all at once).
const streamsOpenConcurrency = 100

// runStreams measures, on a fresh server: the RSS per idle stream with
// every client attached, the delivery of stamped deltas to the clients of
// the sessions that stream while every other client stays attached, and a
// reconnect storm: every client drops, runs publish kept events meanwhile,
// and every client reconnects at once with Last-Event-ID. The storm's
// figure is the time until the last client has caught up; a client that
// lost or got twice an event fails the phase.
func runStreams(cfg config, bin, modelURL string, res result) error {
	sc := streamsSize()
	if sc.workspaces < 1 || sc.total < sc.workspaces || sc.streaming < 0 || sc.streaming > sc.total {
		return fmt.Errorf("need 1 <= -stream-workspaces <= -streams and 0 <= -streaming <= -streams (got %d, %d, %d)", sc.workspaces, sc.total, sc.streaming)
	}
	// This process holds every client's connection, a witness per
	// workspace and the REST client's.
	if err := raiseFileLimit(sc.total + sc.workspaces + 256); err != nil {
		return fmt.Errorf("%w (-streams sets how many streams)", err)
	}
	srv, err := startServer(bin, modelURL)
	if err != nil {
		return err
	}
	defer srv.stop()
	c := newClient(srv)
	defer c.close()
	root, err := os.MkdirTemp("", "loadbench-streams-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	p := &streamsBench{cfg: cfg, sc: sc, c: c, srv: srv}
	defer p.closeAll()

	fmt.Fprintf(os.Stderr, "streams: %d workspaces\n", sc.workspaces)
	if err := p.setup(root); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// RSS per idle stream: every client opens its stream on a quiet server.
	before := srv.settledRSS(ctx, 2*time.Second)
	fmt.Fprintf(os.Stderr, "streams: opening %d streams\n", sc.total)
	began := time.Now()
	if err := p.openAll(); err != nil {
		return err
	}
	res["streams-open"] = float64(time.Since(began))
	after := srv.settledRSS(ctx, 2*time.Second)
	res["streams-rss"] = float64(after-before) / float64(sc.total) / 1024

	fmt.Fprintf(os.Stderr, "streams: delivery to %d streaming clients\n", sc.streaming)
	if err := p.delivery(ctx, res); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "streams: reconnect storm\n")
	return p.storm(ctx, res)
}

// streamsBench is one run of the streams phase against one server.
type streamsBench struct {
	cfg     config
	sc      streamsConfig
	c       *client
	srv     *server
	wss     []*streamsWorkspace
	clients []*streamClient
}

// streamsWorkspace is one workspace of the phase: a session that streams,
// a quiet one, and a witness that follows every event and never drops.
type streamsWorkspace struct {
	id, streamSID, quietSID string
	witness                 *streamClient
	streaming               int // clients on streamSID
}

func (p *streamsBench) setup(root string) error {
	p.wss = make([]*streamsWorkspace, p.sc.workspaces)
	for i := range p.wss {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		id, err := p.c.workspace(dir)
		if err != nil {
			return err
		}
		ws := &streamsWorkspace{id: id}
		if ws.streamSID, err = p.c.session(id); err != nil {
			return err
		}
		if ws.quietSID, err = p.c.session(id); err != nil {
			return err
		}
		ws.witness = newStreamClient(ws, "")
		if err := ws.witness.connect(p.srv.addr, false); err != nil {
			return fmt.Errorf("witness of %s: %w", id, err)
		}
		p.wss[i] = ws
	}
	// Clients 0..streaming-1 are on the sessions that stream, spread over
	// the workspaces like the others.
	p.clients = make([]*streamClient, p.sc.total)
	for i := range p.clients {
		ws := p.wss[i%len(p.wss)]
		sid := ws.quietSID
		if i < p.sc.streaming {
			sid = ws.streamSID
			ws.streaming++
		}
		p.clients[i] = newStreamClient(ws, sid)
	}
	return nil
}

// openAll opens every client's stream, streamsOpenConcurrency at a time.
func (p *streamsBench) openAll() error {
	return openStreams(p.srv.addr, p.clients, streamsOpenConcurrency)
}

// openStreams opens the stream of each of clients on the server at addr,
// at most concurrency at a time.
func openStreams(addr string, clients []*streamClient, concurrency int) error {
	sem := make(chan struct{}, concurrency)
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = cl.connect(addr, false)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// closeAll ends every stream and waits for their readers.
func (p *streamsBench) closeAll() {
	for _, cl := range p.clients {
		if cl != nil {
			cl.drop()
		}
	}
	for _, ws := range p.wss {
		if ws != nil && ws.witness != nil {
			ws.witness.drop()
		}
	}
}

// delivery runs one paced run on every session that has streaming
// clients and records the delivery of its stamped deltas to them.
func (p *streamsBench) delivery(ctx context.Context, res result) error {
	var wss []*streamsWorkspace
	for _, ws := range p.wss {
		if ws.streaming > 0 {
			wss = append(wss, ws)
		}
	}
	if len(wss) == 0 {
		return nil
	}
	prompt := fmt.Sprintf("paced %d %s", p.cfg.deltas, p.cfg.gap)
	if err := p.runAll(ctx, wss, func(ws *streamsWorkspace) []string { return []string{ws.streamSID} }, prompt); err != nil {
		return err
	}
	// A run's deltas precede its run.completed on every stream.
	var all benchkit.Hist
	for _, cl := range p.clients[:p.sc.streaming] {
		if err := waitFor(ctx, func() bool { return cl.deltas.Load() >= int64(p.cfg.deltas) || cl.failed() }); err != nil {
			return fmt.Errorf("a streaming client got %d of %d deltas: %w", cl.deltas.Load(), p.cfg.deltas, err)
		}
		if err := cl.failure(); err != nil {
			return err
		}
		all.Merge(cl.lat.get())
	}
	res["streams-delta-p50"] = float64(all.Quantile(0.50))
	res["streams-delta-p99"] = float64(all.Quantile(0.99))
	return nil
}

// runAll posts prompt on the sessions sessions(ws) of each workspace, all
// at once, and waits until each workspace's witness saw them complete.
func (p *streamsBench) runAll(ctx context.Context, wss []*streamsWorkspace, sessions func(*streamsWorkspace) []string, prompt string) error {
	want := make(map[*streamsWorkspace]int64, len(wss))
	for _, ws := range wss {
		want[ws] = ws.witness.completed.Load() + int64(len(sessions(ws)))
	}
	errs := make([]error, len(wss))
	var wg sync.WaitGroup
	for i, ws := range wss {
		wg.Go(func() {
			for _, sid := range sessions(ws) {
				if _, err := p.c.prompt(ws.id, sid, prompt); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ws := range wss {
		w := ws.witness
		if err := waitFor(ctx, func() bool { return w.completed.Load() >= want[ws] || w.failed() }); err != nil {
			return fmt.Errorf("workspace %s: %d of %d runs completed: %w", ws.id, w.completed.Load(), want[ws], err)
		}
		if err := w.failure(); err != nil {
			return fmt.Errorf("witness of %s: %w", ws.id, err)
		}
	}
	return nil
}

// storm drops every client, publishes a run on each session meanwhile,
// then reconnects every client at once with Last-Event-ID and waits until
// each has every kept event its witness saw.
func (p *streamsBench) storm(ctx context.Context, res result) error {
	for _, cl := range p.clients {
		cl.drop()
	}
	for _, cl := range p.clients {
		if err := cl.failure(); err != nil {
			return fmt.Errorf("before the storm: %w", err)
		}
	}
	both := func(ws *streamsWorkspace) []string { return []string{ws.streamSID, ws.quietSID} }
	if err := p.runAll(ctx, p.wss, both, "fast"); err != nil {
		return fmt.Errorf("runs while the clients are away: %w", err)
	}
	// Each client must catch up to the last kept event it wants that its
	// witness saw.
	for _, cl := range p.clients {
		cl.target = cl.ws.witness.lastKept(cl.session)
		if cl.target <= cl.last {
			return fmt.Errorf("client %s: nothing kept published while it was away (target %d, last %d)", cl.id, cl.target, cl.last)
		}
	}
	var (
		pending = int64(len(p.clients))
		left    atomic.Int64
		caught  = make(chan struct{})
	)
	left.Store(pending)
	for _, cl := range p.clients {
		cl.onCaughtUp = func() {
			if left.Add(-1) == 0 {
				close(caught)
			}
		}
	}
	cpu, overflows := p.srv.cpu(), listenOverflows()
	began := time.Now()
	errs := make([]error, len(p.clients))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		connect benchkit.Hist
	)
	for i, cl := range p.clients {
		wg.Go(func() {
			errs[i] = cl.connect(p.srv.addr, true)
			took := time.Since(began)
			mu.Lock()
			connect.Add(int64(took))
			mu.Unlock()
		})
	}
	wg.Wait()
	res["streams-storm-connect-p50"] = float64(connect.Quantile(0.50))
	res["streams-storm-connect-p99"] = float64(connect.Quantile(0.99))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reconnect: %w", err)
	}
	const stormTimeout = time.Minute
	select {
	case <-caught:
	case <-time.After(stormTimeout):
		for _, cl := range p.clients {
			if err := cl.failure(); err != nil {
				return fmt.Errorf("storm: %w", err)
			}
		}
		return fmt.Errorf("storm: %d of %d clients not caught up after %s: %w", left.Load(), pending, stormTimeout, errTimeout)
	}
	var last time.Time
	for _, cl := range p.clients {
		if t := cl.caughtUp.Load(); t != nil && t.After(last) {
			last = *t
		}
	}
	res["streams-storm"] = float64(last.Sub(began))
	res["streams-storm-cpu"] = float64((p.srv.cpu() - cpu).Microseconds()) / 1000
	res["streams-storm-overflows"] = float64(listenOverflows() - overflows)
	// Every kept event once, in order: compare each client with the
	// witness of its workspace, from what it was first told was the head
	// up to its target.
	p.closeAll()
	for _, cl := range p.clients {
		if err := cl.failure(); err != nil {
			return fmt.Errorf("storm: %w", err)
		}
		want := cl.ws.witness.keptAfter(cl.head, cl.target, cl.session)
		got := cl.keptUpTo(cl.target)
		if !slices.Equal(got, want) {
			return fmt.Errorf("storm: client %s (session %s) got kept events %v, its witness saw %v", cl.id, cl.session, got, want)
		}
	}
	return nil
}

// listenOverflows is how many connections the host's listeners dropped
// for want of room in their accept queue (TcpExt ListenOverflows): a
// client whose handshake was dropped tries again a second or more later.
// It counts every listener of the host, which only this phase fills.
func listenOverflows() int64 {
	raw, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return 0
	}
	lines := bytes.Split(raw, []byte("\n"))
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := bytes.Fields(lines[i]), bytes.Fields(lines[i+1])
		if len(names) == 0 || string(names[0]) != "TcpExt:" || len(values) != len(names) {
			continue
		}
		for j, n := range names {
			if string(n) == "ListenOverflows" {
				v, _ := strconv.ParseInt(string(values[j]), 10, 64)
				return v
			}
		}
	}
	return 0
}

// waitFor polls cond every millisecond until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return errTimeout
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// streamClient is one client of the streams phase: one stream at a time
// under the same client_id, read by one small goroutine. What it records
// is written by that goroutine only and read after it ended, except the
// atomics.
type streamClient struct {
	ws      *streamsWorkspace
	session string // the session_id filter; "" for a witness
	id      string // client_id, kept across reconnects

	conn   net.Conn
	done   chan struct{} // closed when the reader of conn ended
	opened chan struct{} // closed when the first stream.opened was read

	head   int64   // head_seq of the first stream.opened
	last   int64   // the last seq read
	kept   []int64 // the seqs of the kept events read, in order
	target int64   // set before the storm: the kept seq that ends it

	onCaughtUp func()
	caughtUp   atomic.Pointer[time.Time]

	deltas    atomic.Int64 // stamped deltas read
	completed atomic.Int64 // run.completed events read
	lat       *latencies   // streaming clients only

	mu        sync.Mutex
	err       error
	witnessed []keptEvent // witness only: every kept event, guarded by mu
}

// keptEvent is a kept event a witness saw.
type keptEvent struct {
	seq     int64
	session string
}

// latencies is a streaming client's delivery histogram (4 KiB, so only
// those clients have one).
type latencies struct {
	mu sync.Mutex
	h  benchkit.Hist
}

func (l *latencies) add(v int64) {
	l.mu.Lock()
	l.h.Add(v)
	l.mu.Unlock()
}

func (l *latencies) get() *benchkit.Hist {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	return &h
}

func newStreamClient(ws *streamsWorkspace, session string) *streamClient {
	cl := &streamClient{ws: ws, session: session, id: uuid.NewString(), head: -1, opened: make(chan struct{})}
	if session != "" && session == ws.streamSID {
		cl.lat = &latencies{}
	}
	return cl
}

func (cl *streamClient) fail(err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err == nil {
		cl.err = err
	}
}

func (cl *streamClient) failure() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err != nil {
		return fmt.Errorf("client %s: %w", cl.id, cl.err)
	}
	return nil
}

func (cl *streamClient) failed() bool { return cl.failure() != nil }

// connect opens the client's stream (resuming from the last seq read when
// resume is set) and starts its reader.
func (cl *streamClient) connect(addr string, resume bool) error {
	path := "/v1/workspaces/" + cl.ws.id + "/events?client_id=" + cl.id
	if cl.session != "" {
		path += "&session_id=" + cl.session
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\nAuthorization: Bearer " + token + "\r\n"
	if resume {
		req += "Last-Event-ID: " + strconv.FormatInt(cl.last, 10) + "\r\n"
	}
	req += "\r\n"
	conn, err := net.DialTimeout("tcp", addr, time.Minute)
	if err != nil {
		return err
	}
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return err
	}
	// A small buffer: the phase's frames are small, and a longer line
	// is read in pieces (see read).
	br := bufio.NewReaderSize(conn, 4<<10)
	status, err := br.ReadSlice('\n')
	if err != nil {
		conn.Close()
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		conn.Close()
		return fmt.Errorf("GET %s: %s", path, bytes.TrimSpace(status))
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			conn.Close()
			return fmt.Errorf("GET %s: headers: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
	}
	_ = conn.SetDeadline(time.Time{})
	cl.conn, cl.done = conn, make(chan struct{})
	go cl.read(br)
	return nil
}

// drop closes the client's connection and waits for its reader.
func (cl *streamClient) drop() {
	if cl.conn == nil {
		return
	}
	cl.conn.Close()
	<-cl.done
	cl.conn = nil
}

// read reads frames until the connection ends.
func (cl *streamClient) read(br *bufio.Reader) {
	defer close(cl.done)
	var (
		f    frame
		long bool // in the rest of a line longer than the buffer
	)
	for {
		line, err := br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !full {
			return // the connection ended: drop, or the server went
		}
		if long {
			long = full
			continue
		}
		long = full
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 && !full {
			if err := cl.frame(&f); err != nil {
				cl.fail(err)
				cl.conn.Close()
				return
			}
			f = frame{}
			continue
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			f.seq, _ = strconv.ParseInt(string(line[4:]), 10, 64)
		case bytes.HasPrefix(line, []byte("event: ")):
			f.typ = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			cl.data(&f, line[6:])
		}
	}
}

// frame is what the reader keeps of the frame it is reading.
type frame struct {
	seq       int64
	typ       string
	ephemeral bool
	session   string
	head      int64
}

var (
	dataKey      = []byte(`,"data":`)
	ephemeralKey = []byte(`"ephemeral":true`)
	stampKey     = []byte(`"text":"@`)
)

// data reads what the phase needs of a data line (or its first piece).
func (cl *streamClient) data(f *frame, line []byte) {
	switch f.typ {
	case proto.EventStreamOpened:
		if i := bytes.Index(line, []byte(`"head_seq":`)); i >= 0 {
			rest := line[i+len(`"head_seq":`):]
			j := bytes.IndexAny(rest, ",}")
			if j > 0 {
				f.head, _ = strconv.ParseInt(string(rest[:j]), 10, 64)
			}
		}
		return
	case proto.EventMessageDelta:
		if cl.lat != nil {
			if ts, ok := stampAfter(line, stampKey); ok {
				cl.lat.add(time.Now().UnixNano() - ts)
				cl.deltas.Add(1)
			}
		}
	}
	envelope := line
	if i := bytes.Index(line, dataKey); i >= 0 {
		envelope = line[:i]
	}
	f.ephemeral = bytes.Contains(envelope, ephemeralKey)
	if cl.session == "" {
		f.session = field(envelope, `"session_id":"`)
	}
}

// frame records one whole frame.
func (cl *streamClient) frame(f *frame) error {
	switch f.typ {
	case proto.EventStreamOpened:
		if cl.head < 0 {
			cl.head = f.head
			close(cl.opened)
		}
		return nil
	case proto.EventStreamReset, proto.EventStreamEvicted:
		return fmt.Errorf("%s after seq %d", f.typ, cl.last)
	case "":
		return nil // a heartbeat
	}
	if f.seq <= cl.last {
		return fmt.Errorf("seq %d (%s) after seq %d: repeated or out of order", f.seq, f.typ, cl.last)
	}
	cl.last = f.seq
	if f.typ == proto.EventRunCompleted {
		cl.completed.Add(1)
	}
	if f.ephemeral {
		return nil
	}
	cl.kept = append(cl.kept, f.seq)
	if cl.session == "" {
		cl.mu.Lock()
		cl.witnessed = append(cl.witnessed, keptEvent{f.seq, f.session})
		cl.mu.Unlock()
	}
	if cl.target > 0 && f.seq >= cl.target && cl.onCaughtUp != nil && cl.caughtUp.Load() == nil {
		now := time.Now()
		cl.caughtUp.Store(&now)
		cl.onCaughtUp()
	}
	return nil
}

// lastKept is, for a witness, the seq of the last kept event it saw that
// a client with session filter session wants.
func (cl *streamClient) lastKept(session string) int64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for i := len(cl.witnessed) - 1; i >= 0; i-- {
		if e := cl.witnessed[i]; e.session == "" || e.session == session {
			return e.seq
		}
	}
	return 0
}

// keptAfter is, for a witness, the seqs in (after, upTo] of the kept events
// a client with session filter session wants.
func (cl *streamClient) keptAfter(after, upTo int64, session string) []int64 {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []int64
	for _, e := range cl.witnessed {
		if e.seq > after && e.seq <= upTo && (e.session == "" || e.session == session) {
			out = append(out, e.seq)
		}
	}
	return out
}

// keptUpTo is the seqs of the kept events the client read, up to upTo.
func (cl *streamClient) keptUpTo(upTo int64) []int64 {
	var out []int64
	for _, s := range cl.kept {
		if s <= upTo {
			out = append(out, s)
		}
	}
	return out
}
