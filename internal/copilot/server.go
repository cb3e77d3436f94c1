package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/tandem-dev/tandem/proto"
)

// ProtocolVersion is the SDK protocol version the bridge speaks.
const ProtocolVersion = 3

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// preConnectFrame bounds a frame's body while a connection that must
// connect with the token has not: a connect or a ping is small, and nobody
// without the token may make the bridge hold a full frame.
const preConnectFrame = 64 << 10

// DefaultConnectWait is how long a connection that must connect with the
// token may wait before it does: a stranger holds no connection for long.
const DefaultConnectWait = 10 * time.Second

// maxInflight bounds the requests of one connection being handled at once.
const maxInflight = 64

// outQueue is how many frames wait for a connection's writer; a client that
// reads slower than that blocks only its own connection.
const outQueue = 256

// Config is what a Server is made of.
type Config struct {
	// Connect makes the Backend of one connection, for its client id.
	Connect func(clientID string) (Backend, error)
	// Cwd is the workspace of sessions that name no working directory.
	Cwd string
	// Model is the model of sessions that name none (as the SDK names
	// models); empty for the server's default.
	Model string
	// Provider is the model endpoint of sessions created over the protocol
	// (the SDK's COPILOT_API_URL), nil for the server's configuration.
	Provider *proto.Provider
	// Gateway, when set, is the model endpoint of every session created or
	// resumed over the protocol (see Gateway).
	Gateway *Gateway
	// ModelPrefix turns an SDK model name into a Tandem one ("openai/").
	ModelPrefix string
	// Authenticate, when set, decides who a connection is (contract
	// section 10: over TCP the connection token is a Tandem token): every
	// request before a successful connect is refused, and connect's token
	// must be one it accepts; the connection then acts through the Backend
	// it returns, as that token's person. When nil (stdio, where the process
	// acts as the token it was started with) Connect makes the Backend and
	// no connect is needed.
	Authenticate func(ctx context.Context, clientID, token string) (Backend, error)
	// Version is reported by connect and in session.start.
	Version string
	// MaxFrame bounds a frame's body; DefaultMaxFrame when zero.
	MaxFrame int
	// ConnectWait, with Authenticate set, is how long a connection may stay
	// without connecting; DefaultConnectWait when zero.
	ConnectWait time.Duration
	Logger      *slog.Logger
}

// Server serves the protocol on any number of connections.
type Server struct {
	cfg Config
	log *slog.Logger
	// extras keeps what a prompt carried that Tandem does not keep (the
	// SDK's attachment shapes, the agent mode), by run id, so that
	// user.message echoes them.
	extras *extraStore

	mu    sync.Mutex
	conns map[*conn]struct{}
	// where remembers the workspace of the sessions seen, so that a
	// session's workspace is searched for once.
	where map[string]string
	wg    sync.WaitGroup
}

// NewServer returns a Server; it serves nothing until Serve or ServeConn.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "tandem"
	}
	return &Server{cfg: cfg, log: cfg.Logger, extras: newExtraStore(), conns: map[*conn]struct{}{}, where: map[string]string{}}
}

// Serve accepts connections on ln until ln is closed or ctx ends, then closes
// every connection and waits for them.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer s.wg.Wait()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.closeAll()
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.ServeConn(ctx, nc)
		}()
	}
}

// maxWhere bounds the sessions whose workspace the server remembers.
const maxWhere = 10000

func (s *Server) remember(sessionID, wsID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wsID == "" {
		delete(s.where, sessionID)
		return
	}
	if len(s.where) >= maxWhere {
		clear(s.where)
	}
	s.where[sessionID] = wsID
}

func (s *Server) workspaceOf(sessionID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, ok := s.where[sessionID]
	return ws, ok
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.rwc.Close()
	}
}

// ServeConn serves one connection until it ends or ctx does. It closes rwc.
func (s *Server) ServeConn(ctx context.Context, rwc io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	c := &conn{
		srv: s, rwc: rwc, clientID: uuid.NewString(),
		out: make(chan outFrame, outQueue), ctx: ctx, cancel: cancel,
		sessions: map[string]*attachment{},
	}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	if s.cfg.Authenticate != nil {
		wait := s.cfg.ConnectWait
		if wait <= 0 {
			wait = DefaultConnectWait
		}
		t := time.AfterFunc(wait, func() {
			if !c.isConnected() {
				rwc.Close()
			}
		})
		defer t.Stop()
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	return c.serve()
}

// outFrame is a message waiting for the writer; written, when set, is
// closed once it was written.
type outFrame struct {
	body    []byte
	written chan struct{}
}

// conn is one connection of the protocol.
type conn struct {
	srv      *Server
	rwc      io.ReadWriteCloser
	clientID string
	out      chan outFrame
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // request handlers and event pumps

	backendOnce sync.Once
	backend     Backend
	backendErr  error

	mu        sync.Mutex
	connected bool
	sessions  map[string]*attachment
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

func errorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (c *conn) serve() error {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.write()
	}()
	err := c.read()
	c.cancel()
	c.rwc.Close()
	c.wg.Wait()
	<-writerDone
	c.mu.Lock()
	for _, a := range c.sessions {
		a.stop()
	}
	c.mu.Unlock()
	c.mu.Lock()
	b := c.backend
	c.mu.Unlock()
	if b != nil {
		b.Close()
	}
	return err
}

// write sends queued frames until the connection ends.
func (c *conn) write() {
	var buf []byte
	for {
		select {
		case <-c.ctx.Done():
			return
		case f := <-c.out:
			buf = appendFrame(buf[:0], f.body)
			_, err := c.rwc.Write(buf)
			if f.written != nil {
				close(f.written)
			}
			if err != nil {
				c.cancel()
				return
			}
		}
	}
}

// send queues a message; it waits while the queue is full (a slow reader
// slows only its own connection), and gives up when the connection ends.
func (c *conn) send(v any) { c.sendFrame(v, nil) }

func (c *conn) sendFrame(v any, written chan struct{}) {
	body, err := json.Marshal(v)
	if err != nil {
		c.srv.log.Error("copilot: encode message", "err", err)
		return
	}
	select {
	case c.out <- outFrame{body: body, written: written}:
	case <-c.ctx.Done():
	}
}

func (c *conn) notify(method string, params any) {
	c.send(notification{JSONRPC: "2.0", Method: method, Params: params})
}

func (c *conn) read() error {
	fr := newFrameReader(c.rwc, c.srv.cfg.MaxFrame)
	if c.srv.cfg.Authenticate != nil {
		fr.limit = func(max int) int {
			if c.isConnected() {
				return max
			}
			return min(max, preConnectFrame)
		}
	}
	sem := make(chan struct{}, maxInflight)
	for {
		body, err := fr.Read()
		if err != nil {
			if errors.Is(err, io.EOF) || c.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrFrame) {
				// The stream is out of step: say why, then end it.
				written := make(chan struct{})
				c.sendFrame(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: errorf(codeParse, "%v", err)}, written)
				select {
				case <-written:
				case <-c.ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
			return err
		}
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			c.send(response{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: errorf(codeParse, "invalid JSON: %v", err)})
			continue
		}
		if req.Method == "" {
			// A response to a request the bridge never sends, or junk: a
			// request without a method is invalid; responses are dropped.
			if len(req.ID) > 0 && !isResponse(body) {
				c.send(response{JSONRPC: "2.0", ID: req.ID, Error: errorf(codeInvalidRequest, "request without a method")})
			}
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			return nil
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() { <-sem }()
			c.handle(req)
		}()
	}
}

func isResponse(body []byte) bool {
	var probe struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(body, &probe) == nil && (probe.Result != nil || probe.Error != nil)
}

func (c *conn) handle(req request) {
	result, err := c.dispatch(req)
	if len(req.ID) == 0 {
		return // a notification gets no answer
	}
	resp := response{JSONRPC: "2.0", ID: req.ID}
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{Code: codeInternal, Message: err.Error()}
		}
		resp.Error = re
	} else {
		if result == nil {
			result = json.RawMessage("null")
		}
		resp.Result = result
	}
	c.send(resp)
}

func (c *conn) isConnected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

// backendFor returns the connection's Backend: the one its connect
// authenticated, or, without Authenticate, one made on first use.
func (c *conn) backendFor() (Backend, error) {
	if c.srv.cfg.Authenticate != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.backend == nil {
			return nil, errNotConnected
		}
		return c.backend, nil
	}
	c.backendOnce.Do(func() {
		c.backend, c.backendErr = c.srv.cfg.Connect(c.clientID)
	})
	return c.backend, c.backendErr
}
