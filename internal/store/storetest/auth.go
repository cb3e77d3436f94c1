package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

func authOf(t *testing.T, s store.Store) store.Auth {
	t.Helper()
	a, ok := s.(store.Auth)
	require.True(t, ok, "%T does not implement store.Auth", s)
	return a
}

// Tokens: hashes round-trip, a live name is unique, an expired or revoked
// one is free again, revocation and last use persist across a reopen.
func testTokens(t *testing.T, h Harness) {
	s := h.Open(t)
	a := authOf(t, s)
	alice := store.Token{ID: "t-alice", Name: "alice", Role: "member", Hash: "h-alice", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	require.NoError(t, a.CreateToken(bg, alice))
	got, err := a.TokenByHash(bg, "h-alice")
	require.NoError(t, err)
	require.Equal(t, alice, got)
	_, err = a.TokenByHash(bg, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)

	// The name is taken while alice's token lives, even with another hash.
	err = a.CreateToken(bg, store.Token{ID: "t-alice2", Name: "alice", Role: "viewer", Hash: "h2", CreatedAt: at(time.Minute)})
	require.ErrorIs(t, err, store.ErrExists)
	// A hash is never reused.
	err = a.CreateToken(bg, store.Token{ID: "t-x", Name: "x", Role: "viewer", Hash: "h-alice", CreatedAt: at(time.Minute)})
	require.ErrorIs(t, err, store.ErrExists)

	bob := store.Token{ID: "t-bob", Name: "bob", Role: "owner", Hash: "h-bob", CreatedAt: at(time.Second)}
	require.NoError(t, a.CreateToken(bg, bob))
	list, err := a.ListTokens(bg, at(time.Minute))
	require.NoError(t, err)
	require.Equal(t, []store.Token{alice, bob}, list)

	// Past its expiry alice's token is not listed and her name is free.
	list, err = a.ListTokens(bg, at(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, []store.Token{bob}, list)
	alice2 := store.Token{ID: "t-alice2", Name: "alice", Role: "viewer", Hash: "h-alice2", CreatedAt: at(2 * time.Hour)}
	require.NoError(t, a.CreateToken(bg, alice2))
	old, err := a.GetToken(bg, "t-alice")
	require.NoError(t, err)
	require.False(t, old.Live(at(3*time.Hour)))

	require.NoError(t, a.TouchToken(bg, "t-bob", at(3*time.Hour)))
	require.NoError(t, a.RevokeToken(bg, "t-alice2", at(4*time.Hour)))
	require.ErrorIs(t, a.RevokeToken(bg, "t-alice2", at(5*time.Hour)), store.ErrNotFound)
	require.ErrorIs(t, a.RevokeToken(bg, "t-none", at(5*time.Hour)), store.ErrNotFound)

	s = h.Reopen(t, s)
	a = authOf(t, s)
	got, err = a.GetToken(bg, "t-alice2")
	require.NoError(t, err)
	require.Equal(t, at(4*time.Hour), got.RevokedAt)
	require.False(t, got.Live(at(4*time.Hour)))
	got, err = a.GetToken(bg, "t-bob")
	require.NoError(t, err)
	require.Equal(t, at(3*time.Hour), got.LastUsedAt)
	require.True(t, got.Live(at(100*time.Hour)))
	_, err = a.GetToken(bg, "t-none")
	require.ErrorIs(t, err, store.ErrNotFound)
	list, err = a.ListTokens(bg, at(5*time.Hour))
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "bob", list[0].Name)
}

// Audit: entries come back oldest first, paged by id, after a reopen too.
func testAudit(t *testing.T, h Harness) {
	s := h.Open(t)
	a := authOf(t, s)
	empty, err := a.ListAudit(bg, 0, 10)
	require.NoError(t, err)
	require.NotNil(t, empty)
	require.Empty(t, empty)
	var ids []int64
	for i := range 5 {
		e := store.AuditEntry{Time: at(time.Duration(i) * time.Second), TokenID: "t", Name: "alice", ClientID: "c",
			Action: "prompt", WorkspaceID: "w", SessionID: "s", RunID: "r", Detail: "202"}
		id, err := a.AppendAudit(bg, e)
		require.NoError(t, err)
		if len(ids) > 0 {
			require.Greater(t, id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	s = h.Reopen(t, s)
	a = authOf(t, s)
	page, err := a.ListAudit(bg, 0, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.Equal(t, ids[0], page[0].ID)
	require.Equal(t, at(0), page[0].Time)
	require.Equal(t, "alice", page[0].Name)
	require.Equal(t, "r", page[0].RunID)
	page, err = a.ListAudit(bg, page[1].ID, 10)
	require.NoError(t, err)
	require.Len(t, page, 3)
	require.Equal(t, ids[2:], []int64{page[0].ID, page[1].ID, page[2].ID})
}
