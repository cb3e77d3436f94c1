package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/e2e/benchkit"
	"github.com/tandem-dev/tandem/proto"
)

// client talks to one server over HTTP/1.1, as the CLI and SDK do.
type client struct {
	srv  *server
	http *http.Client
}

func newClient(srv *server) *client {
	return &client{srv: srv, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// post sends body as JSON and decodes the answer into out, which must come
// with status want.
func (c *client) post(path string, body, out any, want int) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodPost, c.srv.url+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %s %s", path, resp.Status, got)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(got, out)
}

// health is GET /v1/health, answered 200.
func (c *client) health() error {
	req, _ := http.NewRequest(http.MethodGet, c.srv.url+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /v1/health: %s", resp.Status)
	}
	return nil
}

func (c *client) workspace(path string) (string, error) {
	var ws proto.Workspace
	return ws.ID, c.post("/v1/workspaces", map[string]string{"path": path}, &ws, http.StatusCreated)
}

func (c *client) session(wsID string) (string, error) {
	var s proto.Session
	return s.ID, c.post("/v1/workspaces/"+wsID+"/sessions", map[string]any{}, &s, http.StatusCreated)
}

func (c *client) prompt(wsID, sid, text string) (string, error) {
	var acc proto.PromptAccepted
	err := c.post("/v1/workspaces/"+wsID+"/agent", proto.PromptRequest{SessionID: sid, Prompt: text}, &acc, http.StatusAccepted)
	return acc.RunID, err
}

func (c *client) cancel(wsID, sid string) error {
	return c.post("/v1/workspaces/"+wsID+"/agent/sessions/"+sid+"/cancel", struct{}{}, nil, http.StatusOK)
}

// stream is one open event stream.
type stream struct {
	conn net.Conn
	body *bufio.Reader
}

func (c *client) open(wsID string) (*stream, error) {
	conn, resp, err := benchkit.Subscribe(c.srv.addr, "/v1/workspaces/"+wsID+"/events?client_id="+uuid.NewString(),
		"Authorization: Bearer "+token)
	if err != nil {
		return nil, err
	}
	return &stream{conn: conn, body: bufio.NewReaderSize(resp.Body, 16<<10)}, nil
}

// lines calls fn with each line of the stream (without its newline) until
// the stream ends. Lines longer than the buffer (a long message.updated) are
// skipped: nothing here reads them.
func (s *stream) lines(fn func(line []byte)) {
	long := false
	for {
		line, err := s.body.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			long = true
			continue
		case err != nil:
			return
		case long:
			long = false
			continue
		}
		fn(line[:len(line)-1])
	}
}

// runs follows the runs of a workspace on one stream: when each one's
// first delta arrived and when it completed.
type runs struct {
	mu sync.Mutex
	m  map[string]*runState
}

type runState struct {
	first, end       time.Time
	started, stopped chan struct{}
}

func (r *runs) get(id string) *runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.m[id]
	if st == nil {
		st = &runState{started: make(chan struct{}), stopped: make(chan struct{})}
		r.m[id] = st
	}
	return st
}

func (r *runs) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// followRuns opens a stream of the workspace through c and follows its
// runs on it until stop is called.
func followRuns(c *client, wsID string) (r *runs, stop func(), err error) {
	s, err := c.open(wsID)
	if err != nil {
		return nil, nil, err
	}
	r = &runs{m: map[string]*runState{}}
	followed := make(chan struct{})
	go func() { defer close(followed); r.follow(s) }()
	return r, func() { s.conn.Close(); <-followed }, nil
}

// follow reads s until it ends.
func (r *runs) follow(s *stream) {
	var event string
	s.lines(func(line []byte) {
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")) && (event == proto.EventMessageDelta || event == proto.EventRunCompleted):
			now := time.Now()
			id := field(line, `"run_id":"`)
			if id == "" {
				return
			}
			st := r.get(id)
			r.mu.Lock()
			defer r.mu.Unlock()
			if st.first.IsZero() {
				st.first = now
				close(st.started)
			}
			if event == proto.EventRunCompleted && st.end.IsZero() {
				st.end = now
				close(st.stopped)
			}
		}
	})
}

// wait waits for run id to complete and returns when its first delta
// arrived (zero if none) and when it completed.
func (r *runs) wait(ctx context.Context, id string) (first, end time.Time, err error) {
	st := r.get(id)
	defer r.drop(id)
	select {
	case <-st.stopped:
	case <-ctx.Done():
		return first, end, fmt.Errorf("run %s: %w", id, errTimeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return st.first, st.end, nil
}

func field(line []byte, key string) string {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return ""
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// reader measures, on one stream, each stamped delta's delivery: the time
// from the fake model sending it to this stream reading it.
type reader struct {
	s    *stream
	n    atomic.Int64
	hist benchkit.Hist // written by the reading goroutine only; read after it ended
}

func (rd *reader) read() {
	key := []byte(`"text":"@`)
	rd.s.lines(func(line []byte) {
		if ts, ok := stampAfter(line, key); ok {
			rd.hist.Add(time.Now().UnixNano() - ts)
			rd.n.Add(1)
		}
	})
}

// stampAfter is the number after key in line (a delta's stamp, the fake
// model's UnixNano when it sent it), if key is there.
func stampAfter(line, key []byte) (int64, bool) {
	i := bytes.Index(line, key)
	if i < 0 {
		return 0, false
	}
	var ts int64
	for _, c := range line[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		ts = ts*10 + int64(c-'0')
	}
	return ts, true
}
