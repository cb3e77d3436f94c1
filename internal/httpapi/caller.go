package httpapi

import (
	"context"
	"net/http"

	"github.com/tandem-dev/tandem/internal/domain"
)

// caller is the context of a domain call made for r: the caller it
// carries (who authenticated it), with the client the request names, when
// it names one.
func caller(r *http.Request, clientID string) context.Context {
	ctx := r.Context()
	if clientID == "" {
		return ctx
	}
	c, _ := domain.CallerFrom(ctx)
	c.ClientID = clientID
	return domain.WithCaller(ctx, c)
}
