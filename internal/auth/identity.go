package auth

import (
	"context"

	"github.com/tandem-dev/tandem/proto"
)

// Identity is who a request comes from: a token's id, its person's name and
// role.
type Identity struct {
	TokenID string
	Name    string
	Role    Role
}

// Actor is the identity as events name it, with the client it acts through.
func (id Identity) Actor(clientID string) *proto.Actor {
	if id.TokenID == "" {
		return nil
	}
	return &proto.Actor{TokenID: id.TokenID, Name: id.Name, ClientID: clientID}
}

type identityKey struct{}

// WithIdentity returns ctx carrying id, for the domain to attribute what the
// request causes.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity ctx carries; ok is false for work no
// request caused (a server's own recovery, a test driving the domain).
func FromContext(ctx context.Context) (id Identity, ok bool) {
	id, ok = ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// ActorOf is the actor of the request ctx belongs to, or nil.
func ActorOf(ctx context.Context, clientID string) *proto.Actor {
	id, ok := FromContext(ctx)
	if !ok {
		return nil
	}
	return id.Actor(clientID)
}
