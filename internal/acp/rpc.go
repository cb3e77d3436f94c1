package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// JSON-RPC 2.0 error codes, and ACP's own.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	// codeNotFound is ACP's "resource not found".
	codeNotFound = -32002
)

// maxLine bounds one message: a prompt may carry 20 MiB of attachments,
// which base64 makes about 27 MiB.
const maxLine = 32 << 20

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// invalidParams is a -32602 error.
func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// message is any JSON-RPC message; which fields are set says which kind.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// nullID is the id of an answer to a message whose id could not be read.
var nullID = json.RawMessage("null")

// handler serves one request or notification. A request's result is
// written as its answer; one that implements afterReply is called once
// the answer is written (a session's live updates start then).
type handler func(ctx context.Context, params json.RawMessage) (any, error)

// afterReply is a result with work to do once its answer is on the wire.
type afterReply interface{ afterReply() }

// peer is one JSON-RPC connection, one message per line: it reads the
// other side's messages, serves its requests each on a goroutine of its
// own (a prompt answers when its run ends), and sends requests of its own.
type peer struct {
	w       io.Writer
	wmu     sync.Mutex
	methods map[string]handler
	onError func(error)

	mu       sync.Mutex
	nextID   int64
	calls    map[int64]chan *message
	inflight map[string]context.CancelFunc
	wg       sync.WaitGroup
}

func newPeer(w io.Writer, methods map[string]handler, onError func(error)) *peer {
	return &peer{w: w, methods: methods, onError: onError, calls: map[int64]chan *message{}, inflight: map[string]context.CancelFunc{}}
}

// write sends one message as one line.
func (p *peer) write(m *message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err = p.w.Write(b)
	return err
}

// serve reads messages until r ends or ctx does, then waits for the
// requests it started: they end with ctx. A read cannot be interrupted
// (stdin is not pollable everywhere): when ctx ends first, serve returns
// without waiting for its reader, which ends with r; the caller closes r
// or exits.
func (p *peer) serve(ctx context.Context, r io.Reader) error {
	defer p.wg.Wait()
	type read struct {
		line []byte
		err  error
	}
	lines := make(chan read)
	next := make(chan struct{})
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br)
			select {
			case lines <- read{line, err}:
			case <-ctx.Done():
				return
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
			// One line at a time: the next is read once this one is
			// dispatched, so a slow connection is not read ahead of.
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		var rd read
		select {
		case <-ctx.Done():
			return nil
		case r, ok := <-lines:
			if !ok {
				return nil
			}
			rd = r
		}
		if errors.Is(rd.err, errLineTooLong) {
			p.reply(nullID, nil, &rpcError{Code: codeParseError, Message: fmt.Sprintf("message longer than %d bytes", maxLine)})
		} else {
			if len(bytes.TrimSpace(rd.line)) > 0 {
				p.dispatch(ctx, rd.line)
			}
			if rd.err != nil {
				if errors.Is(rd.err, io.EOF) {
					return nil
				}
				return rd.err
			}
		}
		select {
		case next <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads up to and without the next newline, at most maxLine
// bytes; a longer line is read through and refused.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// dispatch serves one line.
func (p *peer) dispatch(ctx context.Context, line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(line) {
			p.reply(nullID, nil, &rpcError{Code: codeParseError, Message: "parse error: " + err.Error()})
		} else {
			p.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "not a JSON-RPC message: " + err.Error()})
		}
		return
	}
	switch {
	case m.Method == "" && m.ID != nil:
		p.answered(&m)
	case m.Method == "":
		p.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "a message needs a method or an id"})
	case m.ID == nil || string(m.ID) == "null":
		p.notified(ctx, &m)
	default:
		p.requested(ctx, &m)
	}
}

// requested serves a request on a goroutine of its own, cancellable by the
// other side's $/cancel_request.
func (p *peer) requested(ctx context.Context, m *message) {
	h, ok := p.methods[m.Method]
	if !ok {
		p.reply(m.ID, nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + m.Method})
		return
	}
	key := string(m.ID)
	rctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.inflight[key] = cancel
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.inflight, key)
			p.mu.Unlock()
			cancel()
		}()
		res, err := h(rctx, m.Params)
		if err != nil {
			p.reply(m.ID, nil, asRPCError(err))
			return
		}
		p.reply(m.ID, res, nil)
		if a, ok := res.(afterReply); ok {
			a.afterReply()
		}
	}()
}

// notified serves a notification in order, on the reading goroutine: the
// ones ACP has (session/cancel) are quick.
func (p *peer) notified(ctx context.Context, m *message) {
	if m.Method == "$/cancel_request" {
		var c struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &c) == nil {
			p.mu.Lock()
			cancel := p.inflight[string(c.RequestID)]
			p.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
		return
	}
	h, ok := p.methods[m.Method]
	if !ok {
		return // an unknown notification is ignored, as JSON-RPC says
	}
	if _, err := h(ctx, m.Params); err != nil && p.onError != nil {
		p.onError(fmt.Errorf("%s: %w", m.Method, err))
	}
}

// reply answers a request.
func (p *peer) reply(id json.RawMessage, result any, rerr *rpcError) {
	m := &message{ID: id, Error: rerr}
	if rerr == nil {
		b, err := json.Marshal(result)
		if err != nil {
			m.Error = &rpcError{Code: codeInternalError, Message: err.Error()}
		} else {
			m.Result = b
		}
	}
	if err := p.write(m); err != nil && p.onError != nil {
		p.onError(err)
	}
}

// answered delivers an answer to the request of ours it names; an answer
// to a request withdrawn or unknown is dropped.
func (p *peer) answered(m *message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	ch := p.calls[id]
	delete(p.calls, id)
	p.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// call sends a request and waits for its answer. When ctx ends first, the
// request is withdrawn with $/cancel_request and its answer, if one comes,
// is dropped.
func (p *peer) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan *message, 1)
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.calls[id] = ch
	p.mu.Unlock()
	raw := json.RawMessage(strconv.FormatInt(id, 10))
	if err := p.write(&message{ID: raw, Method: method, Params: b}); err != nil {
		p.forget(id)
		return nil, err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		if p.forget(id) {
			cp, _ := json.Marshal(map[string]any{"requestId": id})
			_ = p.write(&message{Method: "$/cancel_request", Params: cp})
		}
		return nil, ctx.Err()
	}
}

// forget drops a call's waiter; it reports whether it was still waiting.
func (p *peer) forget(id int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.calls[id]
	delete(p.calls, id)
	return ok
}

// notify sends a notification.
func (p *peer) notify(method string, params any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return p.write(&message{Method: method, Params: b})
}
