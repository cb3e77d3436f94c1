package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var built = fstest.MapFS{
	"index.html":              {Data: []byte(`<!doctype html><script type="module" src="/assets/index-abc123.js"></script>`)},
	"assets/index-abc123.js":  {Data: []byte(strings.Repeat("console.log('tandem');\n", 200))},
	"assets/index-abc123.css": {Data: []byte("body{color:red}")},
	"favicon.svg":             {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`)},
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestPageCarriesCSPAndIsRevalidated(t *testing.T) {
	h := New(built)
	for _, p := range []string{"/", "/index.html"} {
		resp := get(t, h, p)
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		assert.Equal(t, CSP, resp.Header.Get("Content-Security-Policy"))
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
		assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
		assert.Contains(t, body(t, resp), "/assets/index-abc123.js")
	}
}

func TestHashedAssetsAreImmutable(t *testing.T) {
	h := New(built)
	resp := get(t, h, "/assets/index-abc123.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	assert.Empty(t, resp.Header.Get("Content-Encoding"), "no gzip unless asked")
	assert.Equal(t, string(built["assets/index-abc123.js"].Data), body(t, resp))

	// Unhashed files may change with a new build.
	assert.Equal(t, "no-cache", get(t, h, "/favicon.svg").Header.Get("Cache-Control"))
}

func TestGzipWhenAccepted(t *testing.T) {
	h := New(built)
	resp := get(t, h, "/assets/index-abc123.js", "Accept-Encoding", "br, gzip")
	require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(resp.Body)
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, built["assets/index-abc123.js"].Data, plain)

	resp = get(t, h, "/assets/index-abc123.js", "Accept-Encoding", "gzip;q=0")
	assert.Empty(t, resp.Header.Get("Content-Encoding"))
}

func TestETagRevalidation(t *testing.T) {
	h := New(built)
	etag := get(t, h, "/").Header.Get("ETag")
	require.NotEmpty(t, etag)
	assert.Equal(t, http.StatusNotModified, get(t, h, "/", "If-None-Match", etag).StatusCode)
}

func TestUnknownPathsAndMethods(t *testing.T) {
	h := New(built)
	resp := get(t, h, "/assets/nope.js")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, http.StatusNotFound, get(t, h, "/../web.go").StatusCode)
	// A path a client meant for the API but wrote with doubled slashes is
	// not the API's, yet its answer is one a client parses the same way.
	assertErrorBody(t, get(t, h, "//v1//workspaces"), http.StatusNotFound, "not_found")

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(nil)))
	assertErrorBody(t, rec.Result(), http.StatusMethodNotAllowed, "method_not_allowed")
}

func assertErrorBody(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	assert.Equal(t, status, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body struct {
		Error struct{ Code, Message string }
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, code, body.Error.Code)
	assert.NotEmpty(t, body.Error.Message)
}

func TestNotBuiltSaysHowToBuild(t *testing.T) {
	h := New(fstest.MapFS{})
	resp := get(t, h, "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, CSP, resp.Header.Get("Content-Security-Policy"))
	assert.Contains(t, body(t, resp), BuildHint)
}

// The embedded handler works whether or not the app was built: on a fresh
// clone it says how to build, after a build it serves the app.
func TestEmbeddedHandler(t *testing.T) {
	resp := get(t, Handler(), "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := body(t, resp)
	if strings.Contains(text, BuildHint) {
		return
	}
	assert.Contains(t, text, `<script type="module"`)
	assert.NotContains(t, text, "<script>", "no inline script")
}
