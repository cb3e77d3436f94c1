package benchkit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// Subscribe opens an SSE stream the cheapest way a client can: a raw
// connection, a hand-written GET (with the given extra header lines, each
// "Name: value") and the response headers read. The stream's frames follow
// on resp.Body. It fails unless the answer is 200.
func Subscribe(addr, path string, header ...string) (net.Conn, *http.Response, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	var req strings.Builder
	req.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n")
	for _, h := range header {
		req.WriteString(h + "\r\n")
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		conn.Close()
		return nil, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 8<<10), nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return conn, resp, nil
}
