package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// rpcConn is the client end of a JSON-RPC 2.0 connection, as the
// transports phase needs it: one request at a time, read synchronously.
// ACP frames a message per line; the Copilot SDK protocol frames each
// with a Content-Length header.
type rpcConn struct {
	w      io.Writer
	r      *bufio.Reader
	framed bool // Content-Length headers, not a message per line
	// setDeadline bounds the reads of one call (nil: unbounded).
	setDeadline func(time.Time) error
	next        int
}

// rpcMessage is any message: an answer (ID, Result or Error), a
// notification (Method) or a request of the other end (ID and Method).
type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

func newRPCConn(w io.Writer, r io.Reader, framed bool) *rpcConn {
	c := &rpcConn{w: w, r: bufio.NewReaderSize(r, 64<<10), framed: framed}
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		c.setDeadline = d.SetReadDeadline
	}
	return c
}

// call sends a request and decodes its answer's result into out (unless
// nil). Until it returns, every notification goes to until, which says
// when the call is over: with until nil it is over with its answer, else
// once until also said so. A request of the other end is refused.
func (c *rpcConn) call(method string, params, out any, until func(method string, params json.RawMessage) (bool, error)) error {
	if c.setDeadline != nil {
		_ = c.setDeadline(time.Now().Add(runTimeout))
		defer func() { _ = c.setDeadline(time.Time{}) }()
	}
	c.next++
	id := strconv.Itoa(c.next)
	if err := c.write(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	answered, over := false, until == nil
	for !answered || !over {
		m, err := c.read()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			err := c.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "loadbench answers no " + m.Method}})
			if err != nil {
				return fmt.Errorf("%s: %w", method, err)
			}
		case m.Method != "":
			if until != nil && !over {
				if over, err = until(m.Method, m.Params); err != nil {
					return fmt.Errorf("%s: %w", method, err)
				}
			}
		case string(m.ID) == id:
			answered = true
			if m.Error != nil {
				return fmt.Errorf("%s: error %d: %s %s", method, m.Error.Code, m.Error.Message, m.Error.Data)
			}
			if out != nil {
				if err := json.Unmarshal(m.Result, out); err != nil {
					return fmt.Errorf("%s: result: %w", method, err)
				}
			}
		}
	}
	return nil
}

func (c *rpcConn) write(msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if c.framed {
		body = append([]byte("Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"), body...)
	} else {
		body = append(body, '\n')
	}
	_, err = c.w.Write(body)
	return err
}

// maxRPCMessage bounds a framed message: the phase's are a few KiB.
const maxRPCMessage = 16 << 20

func (c *rpcConn) read() (rpcMessage, error) {
	var m rpcMessage
	var body []byte
	if c.framed {
		n := -1
		for {
			line, err := c.r.ReadString('\n')
			if err != nil {
				return m, err
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			if name, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Length") {
				if n, err = strconv.Atoi(strings.TrimSpace(v)); err != nil {
					return m, fmt.Errorf("bad header %q", line)
				}
			}
		}
		if n < 0 || n > maxRPCMessage {
			return m, fmt.Errorf("a message without a Content-Length of at most %d bytes", maxRPCMessage)
		}
		body = make([]byte, n)
		if _, err := io.ReadFull(c.r, body); err != nil {
			return m, err
		}
	} else {
		for len(body) == 0 {
			line, err := c.r.ReadBytes('\n')
			if err != nil {
				return m, err
			}
			body = bytes.TrimSpace(line)
		}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("not JSON-RPC: %.200q", body)
	}
	return m, nil
}
