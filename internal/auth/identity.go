package auth

import (
	"context"
	"sync/atomic"

	"github.com/tandem-dev/tandem/internal/domain"
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

// WithIdentity returns ctx carrying id, for the domain to attribute what the
// request causes. The identity is the person part of the call's
// domain.Caller, so that it crosses to the node that owns the workspace
// with the command, and is checked nowhere again.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	c, _ := domain.CallerFrom(ctx)
	c.TokenID, c.Name, c.Role = id.TokenID, id.Name, id.Role.String()
	return domain.WithCaller(ctx, c)
}

// FromContext returns the identity ctx carries; ok is false for work no
// request caused (a server's own recovery, a test driving the domain).
func FromContext(ctx context.Context) (id Identity, ok bool) {
	c, ok := domain.CallerFrom(ctx)
	if !ok || (c.TokenID == "" && c.Role == "") {
		return Identity{}, false // a client named, nobody authenticated
	}
	role, _ := ParseRole(c.Role)
	return Identity{TokenID: c.TokenID, Name: c.Name, Role: role}, true
}

// ActorOf is the actor of the request ctx belongs to, or nil.
func ActorOf(ctx context.Context, clientID string) *proto.Actor {
	id, ok := FromContext(ctx)
	if !ok {
		return nil
	}
	return id.Actor(clientID)
}

type actorKey struct{}

// WithActor returns ctx naming a as the actor of the events emitted under
// it: a request's identity with the client it names, or a run's prompter.
// A nil a leaves ctx as it is.
func WithActor(ctx context.Context, a *proto.Actor) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom is the actor of the events emitted under ctx: the one WithActor
// set, else the run's, else the caller's (with the client it names), else
// nil.
func ActorFrom(ctx context.Context) *proto.Actor {
	if a, ok := ctx.Value(actorKey{}).(*proto.Actor); ok {
		return a
	}
	if ref, ok := ctx.Value(actorRefKey{}).(*actorRef); ok {
		return ref.p.Load()
	}
	c, _ := domain.CallerFrom(ctx)
	return ActorOf(ctx, c.ClientID)
}

// WithClient names the client a request acts through: in the caller, and
// so in the actor of the events it causes.
func WithClient(ctx context.Context, clientID string) context.Context {
	if clientID == "" {
		return ctx
	}
	c, _ := domain.CallerFrom(ctx)
	c.ClientID = clientID
	return domain.WithCaller(ctx, c)
}

// Author is the author of a user message written under ctx, or nil.
func Author(ctx context.Context) *proto.Author {
	a := ActorFrom(ctx)
	if a == nil {
		return nil
	}
	return &proto.Author{Name: a.Name, ClientID: a.ClientID}
}

// actorRef is a run's actor, which an answer hands over to its answerer.
type actorRef struct{ p atomic.Pointer[proto.Actor] }

type actorRefKey struct{}

// WithRunActor returns ctx for a run prompted by a: its events carry a
// until an answer (a permission, a client tool call) hands the run over to
// its answerer (Handover).
func WithRunActor(ctx context.Context, a *proto.Actor) context.Context {
	ref := &actorRef{}
	ref.p.Store(a)
	return context.WithValue(ctx, actorRefKey{}, ref)
}

// Handover makes a the actor of what the run of ctx does next; nothing
// when ctx is no run's or a is nil.
func Handover(ctx context.Context, a *proto.Actor) {
	if ref, ok := ctx.Value(actorRefKey{}).(*actorRef); ok && a != nil {
		ref.p.Store(a)
	}
}
