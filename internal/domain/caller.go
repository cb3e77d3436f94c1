package domain

import "context"

// Caller is who makes a call: the client (its client_id, when the request
// names one) and the person behind the token that authenticated it. The
// transport that authenticated the request sets it; in a cluster it
// travels with the command to the workspace's owner, which checks
// nothing again.
type Caller struct {
	TokenID  string `json:"token_id,omitempty"`
	Name     string `json:"name,omitempty"`
	Role     string `json:"role,omitempty"`
	ClientID string `json:"client_id,omitempty"`
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries; ok is false when none was set.
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}
