package store

import (
	"errors"
	"fmt"
	"time"
)

// Leases are a cluster's workspace ownership (contract section 8). The
// types live here, beside the store's interface, so the cluster depends on
// what a store offers and not on the store that offers it (PostgreSQL).

// ErrLeaseHeld is returned when another node holds a live lease on the
// workspace; the error is a *HeldError naming it.
var ErrLeaseHeld = errors.New("workspace lease held by another node")

// ErrLeaseLost is returned by every fenced write, and by a renewal, once
// the lease is no longer held: it expired, or another node took the
// workspace over. The node must stop acting as its owner.
var ErrLeaseLost = errors.New("workspace lease lost")

// Lease is a node's hold on a workspace: while it holds it, the node is the
// workspace's owner.
type Lease struct {
	WorkspaceID string
	// Owner is the holding node's id.
	Owner string
	// Epoch grows by one each time the workspace gets a new owner (a
	// node taking it back after releasing it is a new owner too).
	Epoch int64
	// Expires is when the lease ends unless renewed, by the database's
	// clock. Zero for a released lease.
	Expires time.Time
}

// HeldError is ErrLeaseHeld with the lease that is held.
type HeldError struct{ Held Lease }

func (e *HeldError) Error() string {
	return fmt.Sprintf("workspace %s: lease held by %s (epoch %d) until %s",
		e.Held.WorkspaceID, e.Held.Owner, e.Held.Epoch, e.Held.Expires.Format(time.RFC3339Nano))
}

func (e *HeldError) Unwrap() error { return ErrLeaseHeld }
