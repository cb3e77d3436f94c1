package provider

import (
	"io"
	"net/http"

	"github.com/tandem-dev/tandem/internal/compute"
)

// PauseTransport makes base's waits for the model (the round trip to the
// response's headers, then each read of its body) let go of the compute
// slot of the run that sent the request (see package compute): a run
// waiting on its model must not keep another run from computing.
func PauseTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return pausing{base}
}

type pausing struct{ base http.RoundTripper }

func (t pausing) RoundTrip(req *http.Request) (*http.Response, error) {
	h := compute.From(req.Context())
	h.BeginWait()
	resp, err := t.base.RoundTrip(req)
	h.EndWait()
	if err != nil {
		return nil, err
	}
	if h != nil {
		resp.Body = pausingBody{h: h, ReadCloser: resp.Body}
	}
	return resp, nil
}

// CloseIdleConnections passes on to base, for http.Client's of the same name.
func (t pausing) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type pausingBody struct {
	h *compute.Holder
	io.ReadCloser
}

func (b pausingBody) Read(p []byte) (int, error) {
	b.h.BeginWait()
	defer b.h.EndWait()
	return b.ReadCloser.Read(p)
}
