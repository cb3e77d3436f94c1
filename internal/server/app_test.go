package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
	"github.com/tandem-dev/tandem/web"
)

// The server serves the web app outside /v1 without a token, and the API's
// unknown routes keep their JSON errors.
func TestServesWebApp(t *testing.T) {
	srv, err := New(context.Background(), Config{DataDir: t.TempDir(), Token: "secret"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	h := srv.Handler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, web.CSP, rec.Header().Get("Content-Security-Policy"))
	assert.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	assert.True(t, strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html"))

	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/nope", http.StatusNotFound, proto.CodeNotFound},
		{http.MethodGet, "/v1", http.StatusNotFound, proto.CodeNotFound},
		// The app's pages are only read.
		{http.MethodPost, "/", http.StatusMethodNotAllowed, proto.CodeMethodNotAllowed},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.status, rec.Code, tc)
		var body proto.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), tc)
		assert.Equal(t, tc.code, body.Error.Code, tc)
	}

	// The API still wants its token.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/workspaces", nil))
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
}
