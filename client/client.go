package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// userAgent lets server logs tell SDK traffic from curl and browsers.
const userAgent = "tandem-go-client/1"

// maxErrorBody bounds how much of a failed answer is read: an error body is
// small, and a misconfigured proxy may answer with an endless page.
const maxErrorBody = 64 << 10

// Client talks to one Tandem server. It is safe for concurrent use; create one
// per process and share it, because its client ID is what the server uses to
// tell this process's streams, tools and prompts from other clients'.
type Client struct {
	baseURL  string
	token    string
	clientID string
	hc       *http.Client
	log      *slog.Logger
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient replaces the HTTP client. It must not have a Timeout: that
// would cut every event stream after that long; bound calls with their ctx.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithClientID sets the client ID instead of a random one, for a process that
// wants to be recognized as the same client across restarts (its session
// membership and tools are keyed by it).
func WithClientID(id string) Option {
	return func(c *Client) {
		if id != "" {
			c.clientID = id
		}
	}
}

// WithLogger makes the client log requests (Debug) and stream reconnects
// (Info/Warn). By default it logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// New returns a client of the server at baseURL (such as
// "http://127.0.0.1:7433") that authenticates with token.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		baseURL:  strings.TrimRight(baseURL, "/"),
		token:    token,
		clientID: uuid.NewString(),
		log:      slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		// A transport of its own, so CloseIdleConnections releases exactly
		// this client's connections and nobody else's.
		c.hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return c
}

// ClientID is the ID this client sends as client_id wherever the contract
// takes one and the caller left it empty.
func (c *Client) ClientID() string { return c.clientID }

// CloseIdleConnections releases idle keep-alive connections, for programs and
// tests that must end without stray goroutines. The client stays usable.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// call describes one REST request.
type call struct {
	method string
	path   string
	query  url.Values
	in     any // JSON body; nil sends none
	out    any // decoded from a 2xx answer when non-nil
	auth   bool
}

// do sends a request and returns the 2xx status, or an error: *APIError when
// the server answered, the transport's error otherwise.
func (c *Client) do(ctx context.Context, k call) (int, error) {
	var body io.Reader
	if k.in != nil {
		raw, err := json.Marshal(k.in)
		if err != nil {
			return 0, fmt.Errorf("tandem: encode %s %s body: %w", k.method, k.path, err)
		}
		body = bytes.NewReader(raw)
	}
	u := c.baseURL + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, body)
	if err != nil {
		return 0, fmt.Errorf("tandem: %s %s: %w", k.method, k.path, err)
	}
	if k.in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if k.auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.log.DebugContext(ctx, "tandem request failed", "method", k.method, "path", k.path, "err", err)
		return 0, fmt.Errorf("tandem: %s %s: %w", k.method, k.path, err)
	}
	defer resp.Body.Close()
	c.log.DebugContext(ctx, "tandem request", "method", k.method, "path", k.path,
		"status", resp.StatusCode, "duration", time.Since(start))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, readAPIError(resp)
	}
	if k.out != nil && resp.StatusCode != http.StatusNoContent {
		// Not strict, unlike the server: the contract lets the server add
		// fields, and an older SDK must keep working when it does.
		if err := json.NewDecoder(resp.Body).Decode(k.out); err != nil {
			return resp.StatusCode, fmt.Errorf("tandem: decode %s %s answer: %w", k.method, k.path, err)
		}
	}
	// Drain so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return resp.StatusCode, nil
}

// path joins escaped segments under /v1, so an id with a slash or a dot-dot
// cannot reach another route.
func path(segs ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
