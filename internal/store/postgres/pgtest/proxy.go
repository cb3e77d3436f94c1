package pgtest

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy stands between clients and a server on a TCP port of its own.
// Cut breaks every connection through it and turns new ones away until
// Restore: the database gone away, as its clients see it (a restart, a
// partition healed by a reset, a failover). Pause holds every byte in
// both directions, on the connections open and on new ones, until Resume:
// a database that hangs (a partition that drops packets, a frozen server),
// which its clients notice only by their own timeouts.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// resume, while paused, is closed by Resume (or Cut, or the end).
	resume chan struct{}
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to the server of dbURL and returns it; URL gives
// dbURL through the proxy. It stops when t ends.
func NewProxy(t testing.TB, dbURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{target: u.Host, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// URL is dbURL with its host and port replaced by the proxy's.
func (p *Proxy) URL(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return dbURL
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.resumeLocked()
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Pause holds every byte through the proxy until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resume == nil {
		p.resume = make(chan struct{})
	}
}

// Resume lets the held bytes, and those after, through.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumeLocked()
}

func (p *Proxy) resumeLocked() {
	if p.resume != nil {
		close(p.resume)
		p.resume = nil
	}
}

// gate waits while the proxy is paused; false when it was cut meanwhile.
func (p *Proxy) gate() bool {
	p.mu.Lock()
	wait := p.resume
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.cut
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.track(c)
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *Proxy) track(c net.Conn) { p.conns[c] = struct{}{} }

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) serve(client net.Conn) {
	if !p.gate() {
		p.forget(client)
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		p.forget(client)
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		server.Close()
		p.forget(client)
		return
	}
	p.track(server)
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && (!p.gate() || !writeAll(dst, buf[:n])) {
				break
			}
			if err != nil {
				break
			}
		}
		// One side ended: end both, as a dropped connection would.
		p.forget(client, server)
	}
	wg.Go(func() { pipe(server, client) })
	wg.Go(func() { pipe(client, server) })
	wg.Wait()
}

func writeAll(dst net.Conn, b []byte) bool {
	_, err := dst.Write(b)
	return err == nil
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
