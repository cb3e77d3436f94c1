package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRPCCall drives a call against a scripted peer in both framings: the
// peer asks a request of its own first (which must be refused), sends a
// notification, answers, and sends the notification that ends the call
// only after its answer.
func TestRPCCall(t *testing.T) {
	for _, framed := range []bool{false, true} {
		t.Run(fmt.Sprintf("framed=%v", framed), func(t *testing.T) {
			a, z := net.Pipe()
			defer a.Close()
			c := newRPCConn(a, a, framed)
			peer := newRPCConn(z, z, framed)
			done := make(chan error, 1)
			go func() {
				defer z.Close()
				done <- func() error {
					req, err := peer.read()
					if err != nil {
						return err
					}
					if req.Method != "echo" || string(req.Params) != `{"n":1}` {
						return fmt.Errorf("peer got %+v", req)
					}
					// A pipe's writes wait for their reader: the refusal is
					// read while the rest is written.
					wrote := make(chan error, 1)
					go func() {
						for _, m := range []any{
							map[string]any{"jsonrpc": "2.0", "id": "x", "method": "fs/read_text_file"},
							map[string]any{"jsonrpc": "2.0", "method": "tick", "params": map[string]int{"n": 1}},
							map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]int{"n": 2}},
						} {
							if err := peer.write(m); err != nil {
								wrote <- err
								return
							}
						}
						wrote <- nil
					}()
					refusal, err := peer.read()
					if err != nil {
						return err
					}
					if err := <-wrote; err != nil {
						return err
					}
					if string(refusal.ID) != `"x"` || refusal.Error == nil || refusal.Error.Code != -32601 {
						return fmt.Errorf("peer got %+v for its request", refusal)
					}
					return peer.write(map[string]any{"jsonrpc": "2.0", "method": "tick", "params": map[string]int{"n": 2}})
				}()
			}()
			var out struct{ N int }
			var ticks []int
			err := c.call("echo", map[string]int{"n": 1}, &out, func(method string, params json.RawMessage) (bool, error) {
				var p struct{ N int }
				if err := json.Unmarshal(params, &p); err != nil {
					return false, err
				}
				ticks = append(ticks, p.N)
				return p.N == 2, nil
			})
			// The peer's writes fail from here on, rather than wait.
			a.Close()
			require.NoError(t, err)
			require.NoError(t, <-done)
			require.Equal(t, 2, out.N)
			require.Equal(t, []int{1, 2}, ticks)
		})
	}
}

// TestRPCCallError is an error answer, returned with its code and message.
func TestRPCCallError(t *testing.T) {
	a, z := net.Pipe()
	defer a.Close()
	go func() {
		defer z.Close()
		br := bufio.NewReader(z)
		if _, err := br.ReadBytes('\n'); err == nil {
			_, _ = z.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"cwd is not absolute"}}` + "\n"))
		}
	}()
	err := newRPCConn(a, a, false).call("session/new", map[string]string{"cwd": "."}, nil, nil)
	require.ErrorContains(t, err, "-32602: cwd is not absolute")
}
