package main

// The subscriber side runs in a child process (this binary re-executed with
// -child), so that the parent's getrusage(RUSAGE_SELF) counts the server's
// work only: publishing, fan-out, HTTP framing and socket writes. The
// readers' parsing and read syscalls land on the child's account. Both
// servers are read by the very same code.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-dev/tandem/e2e/benchkit"
)

// childResult is what a child prints on its RESULT line.
type childResult struct {
	Conns      int
	Delivered  int64 // frames with a timestamp, over all healthy conns
	MinPerConn int64
	LastRecv   int64 // unix ns of the last frame
	P50, P99   int64 // publish-to-receive latency, ns
	Max        int64
	Cycles     int // churn mode
	Errors     int
	Seconds    float64
}

type childOpts struct {
	mode   string // "read" or "churn"
	addr   string
	path   string
	conns  int
	expect int64
	stall  bool
	idle   time.Duration
	cycles int
	par    int
}

// runChild is the child's main: it reports on stdout ("READY", then
// "RESULT {json}") and exits when the parent closes its stdin, which keeps
// the connections open for as long as the parent measures.
func runChild(o childOpts) {
	var res childResult
	var keep []net.Conn
	switch o.mode {
	case "read":
		res, keep = readMode(o)
	case "churn":
		res = churnMode(o)
	default:
		fatalf("unknown child mode %q", o.mode)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range keep {
		c.Close()
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench child: "+format+"\n", args...)
	os.Exit(1)
}

func readMode(o childOpts) (childResult, []net.Conn) {
	type reader struct {
		conn net.Conn
		body *bufio.Reader
		n    int64
		hist benchkit.Hist
	}
	readers := make([]*reader, o.conns)
	conns := make([]net.Conn, 0, o.conns+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50) // dial at most 50 at once
	for i := range readers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			conn, resp, err := benchkit.Subscribe(o.addr, o.path)
			if err != nil {
				fatalf("subscribe: %v", err)
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			readers[i] = &reader{conn: conn, body: bufio.NewReaderSize(resp.Body, 8<<10)}
		})
	}
	wg.Wait()
	if o.stall {
		// Sends its request and never reads: its socket fills, then the
		// server must cope. A small receive buffer makes that quick.
		conn, err := net.Dial("tcp", o.addr)
		if err != nil {
			fatalf("dial: %v", err)
		}
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		_, _ = io.WriteString(conn, "GET "+o.path+" HTTP/1.1\r\nHost: "+o.addr+"\r\n\r\n")
		conns = append(conns, conn)
	}
	fmt.Println("READY")
	if o.expect == 0 {
		return childResult{Conns: o.conns}, conns
	}

	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	var done sync.WaitGroup
	for _, r := range readers {
		done.Go(func() {
			prefix, tsKey := []byte("data: "), []byte(`"ts":`)
			for r.n < o.expect {
				line, err := r.body.ReadSlice('\n')
				if err != nil {
					return // the parent closed the server, or the line was absurd
				}
				if !bytes.HasPrefix(line, prefix) {
					continue
				}
				i := bytes.Index(line, tsKey)
				if i < 0 {
					continue // stream.opened
				}
				now := time.Now().UnixNano()
				r.hist.Add(now - parseInt(line[i+len(tsKey):]))
				r.n++
				lastRecv.Store(now)
			}
		})
	}
	// Stop when every reader has everything, or when nothing arrived for
	// o.idle (a server stalled by the stalled subscriber).
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-ticker.C:
			if time.Since(time.Unix(0, lastRecv.Load())) > o.idle {
				// Readers still waiting for a stalled server end now.
				for _, r := range readers {
					r.conn.Close()
				}
				<-finished
				break wait
			}
		}
	}
	res := childResult{Conns: o.conns, LastRecv: lastRecv.Load(), MinPerConn: -1}
	var all benchkit.Hist
	for _, r := range readers {
		n := r.n
		res.Delivered += n
		if res.MinPerConn < 0 || n < res.MinPerConn {
			res.MinPerConn = n
		}
		all.Merge(&r.hist)
	}
	res.P50, res.P99, res.Max = all.Quantile(0.50), all.Quantile(0.99), all.Max()
	return res, conns
}

// churnMode connects, waits for the response headers and disconnects,
// o.cycles times with o.par at once.
func churnMode(o childOpts) childResult {
	start := time.Now()
	var errs atomic.Int64
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range o.par {
		wg.Go(func() {
			for range next {
				conn, _, err := benchkit.Subscribe(o.addr, o.path)
				if err != nil {
					errs.Add(1)
					continue
				}
				// RST instead of FIN: 10,000 TIME_WAIT sockets would only
				// measure the kernel.
				_ = conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
		})
	}
	for range o.cycles {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return childResult{Cycles: o.cycles, Errors: int(errs.Load()), Seconds: time.Since(start).Seconds()}
}

func parseInt(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
