// Package web serves Tandem's browser app: the files `npm run build` writes to
// dist/app, embedded into the binary. The app needs no token to load; it asks
// for one (or reads it from the URL fragment) and talks to the /v1 API.
//
// The build output is never committed. Without it the binary still builds and
// serves a page saying how to build the app.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/tandem-dev/tandem/proto"
)

// dist holds the committed placeholder dist/README.md and, once built, the app
// in dist/app.
//
//go:embed all:dist
var dist embed.FS

// CSP is the Content-Security-Policy of the app's pages: no inline script or
// style, nothing from another origin, no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

// BuildHint is what the binary serves at / when it was built without the app.
const BuildHint = "npm --prefix web ci && npm --prefix web run build && go build ./cmd/tandem"

// Handler serves the app embedded in the binary.
func Handler() http.Handler {
	app, err := fs.Sub(dist, "dist/app")
	if err != nil {
		// fs.Sub fails only on a malformed name, which "dist/app" is not.
		panic(err)
	}
	return New(app)
}

// file is one asset, kept with its gzip form when that is smaller.
type file struct {
	name   string
	body   []byte
	gz     []byte
	ctype  string
	etag   string
	hashed bool // under assets/: its name changes with its content
}

type handler struct {
	files map[string]*file // by URL path, "/" for index.html
	built bool
}

// New serves the app in fsys (index.html and assets/ at its root). Files are
// read and compressed once, here; fsys is not used afterwards.
func New(fsys fs.FS) http.Handler {
	h := &handler{files: map[string]*file{}}
	_ = fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(body)
		f := &file{
			name:   path.Base(name),
			body:   body,
			ctype:  contentType(name),
			etag:   `"` + hex.EncodeToString(sum[:8]) + `"`,
			hashed: strings.HasPrefix(name, "assets/"),
		}
		if compressible(f.ctype) {
			f.gz = gzipped(body)
		}
		urlPath := "/" + name
		if name == "index.html" {
			urlPath = "/"
			h.built = true
		}
		h.files[urlPath] = f
		return nil
	})
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, proto.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
		return
	}
	p := r.URL.Path
	if p == "/index.html" {
		p = "/"
	}
	if p == "/" && !h.built {
		notBuilt(w)
		return
	}
	f, ok := h.files[p]
	if !ok {
		writeError(w, http.StatusNotFound, proto.CodeNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	hd.Set("Vary", "Accept-Encoding")
	switch {
	case f.hashed:
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	default:
		// index.html names the hashed assets of this build: always revalidate.
		hd.Set("Cache-Control", "no-cache")
	}
	if strings.HasPrefix(f.ctype, "text/html") {
		pageHeaders(hd)
	}
	body := f.body
	if f.gz != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	// No modification time: the ETag alone validates caches.
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(body))
}

// writeError answers with the contract's error body: every answer of the
// server, the app's paths included, is one a client can parse the same way.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(proto.ErrorBody{Error: proto.ErrorDetail{Code: code, Message: msg}})
}

// pageHeaders are the headers of every HTML page the app serves.
func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func notBuilt(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	pageHeaders(hd)
	fmt.Fprintf(w, `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tandem</title></head>
<body><h1>Tandem</h1>
<p>This tandem binary was built without its web app. The API under <code>/v1</code> works.</p>
<p>To build the app (Node 20.19 or later), from the repository root:</p>
<pre>%s</pre>
</body></html>
`, BuildHint)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ctype string) bool {
	for _, p := range []string{"text/", "application/javascript", "text/javascript", "application/json", "image/svg+xml"} {
		if strings.HasPrefix(ctype, p) {
			return true
		}
	}
	return false
}

// gzipped returns body compressed, or nil when that saves nothing.
func gzipped(body []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if b.Len() >= len(body) {
		return nil
	}
	return b.Bytes()
}
