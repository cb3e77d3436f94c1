package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-dev/tandem/internal/config"
)

// httpMaxRetries is how often a broken stream is reconnected (after 1 s,
// then 1.5 s) before the server counts as failed: enough for a blip, short
// enough that a dead server's call fails in seconds, not the SDK's default
// quarter of a minute.
const httpMaxRetries = 2

// httpTransport returns the streamable HTTP transport to the server's URL,
// with its headers (their ${NAME} references resolved).
func (c *conn) httpTransport() (sdk.Transport, error) {
	s := c.s
	headers := make(http.Header, len(s.spec.Headers))
	names := make([]string, 0, len(s.spec.Headers))
	for k := range s.spec.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, err := config.Expand(s.spec.Headers[k], s.m.opts.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		headers.Set(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.httpCancel = cancel
	client := &http.Client{Transport: &headerTransport{base: s.m.transport, headers: headers, ctx: ctx}}
	return &sdk.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: client, MaxRetries: httpMaxRetries}, nil
}

// headerTransport adds the configured headers to each request (never over
// one the SDK set) and binds each request to ctx, so that teardown can cut
// what a server that does not answer holds open.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	ctx     context.Context
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	r := req.Clone(ctx)
	for k, vs := range t.headers {
		if r.Header.Get(k) == "" {
			r.Header[k] = vs
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
	return resp, nil
}

// releasingBody releases its request's context when closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
