package httpapi

import (
	"context"
	"net/http"

	"github.com/tandem-dev/tandem/internal/auth"
)

// caller is the context of a domain call made for r: the caller it
// carries (who authenticated it), with the client the request names, when
// it names one.
func caller(r *http.Request, clientID string) context.Context {
	return auth.WithClient(r.Context(), clientID)
}
