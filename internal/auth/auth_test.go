package auth

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
)

// Whatever an Authorization header holds, ParseBearer never panics, and
// what it returns is a non-empty token of printable ASCII without spaces,
// at most MaxBearer long, that the header ends with; a made secret always
// parses back.
func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc", "BEARER x", "Bearer", "Bearer ", "Basic abc", "Bearer a b", "Bearer \x7f", "Bearer " + NewSecret(), "Bearer\tabc", "Bearer " + strings.Repeat("x", 513)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := ParseBearer(header)
		if !ok {
			require.Empty(t, tok)
			return
		}
		require.NotEmpty(t, tok)
		require.LessOrEqual(t, len(tok), MaxBearer)
		require.True(t, strings.HasSuffix(header, tok))
		require.True(t, strings.EqualFold(header[:7], "bearer "))
		for i := 0; i < len(tok); i++ {
			require.True(t, tok[i] > ' ' && tok[i] < 0x7f, "byte %d of %q", i, tok)
		}
		if madeSecret(tok) {
			require.Len(t, Hash(tok), 64)
		}
	})
}

func TestSecrets(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	require.NotEqual(t, a, b)
	require.True(t, madeSecret(a))
	got, ok := ParseBearer("Bearer " + a)
	require.True(t, ok)
	require.Equal(t, a, got)
	require.False(t, madeSecret(a[:len(a)-1]))
	require.False(t, madeSecret("tdm_"+strings.Repeat("!", len(a)-4)))
	require.NotContains(t, Hash(a), a)
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"alice", "bob.smith", "a_b-c@example.com", "Zoë", strings.Repeat("x", 64), "名前"} {
		assert.NoError(t, CheckName(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("x", 65), "a b", "a/b", "a\x00", "alice!", "\xff"} {
		assert.Error(t, CheckName(bad), bad)
	}
}

// Each role allows what the one before does, and the owner-only actions
// are the contract's.
func TestPolicyIsOrdered(t *testing.T) {
	for act, p := range policy {
		for r := Viewer; r <= Owner; r++ {
			assert.Equal(t, r >= p.min, Check(r, act) == nil, "%s for %s", act, r)
		}
	}
	for _, act := range []Action{WorkspaceDelete, SessionDelete, TokenList, TokenCreate, TokenRevoke, AuditRead, AllowAll, MCPServers, AllowAllTools} {
		min, _ := MinRole(act)
		assert.Equal(t, Owner, min, act)
	}
	err := Check(Viewer, Prompt)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "role viewer may not prompt")
}

// A flood of refused requests, which anyone can send without a token, does
// not fill the audit log: past a burst, refusals are counted, and the next
// entry kept says how many were not.
func TestDeniedFloodIsBounded(t *testing.T) {
	st := &memAudit{}
	s := New(Config{Store: st, OwnerToken: "o"})
	defer s.Close()
	for range 1000 {
		s.RecordDenied(t.Context(), store.AuditEntry{Detail: "GET /v1/workspaces"})
	}
	require.LessOrEqual(t, len(st.entries), deniedBurst+5)
	require.GreaterOrEqual(t, len(st.entries), deniedBurst)
	s.skipped = 1 // as if the next came after a wait
	s.denials.SetBurst(deniedBurst + 1)
	s.denials.SetLimit(1e9)
	s.RecordDenied(t.Context(), store.AuditEntry{Detail: "x"})
	last := st.entries[len(st.entries)-1]
	assert.Equal(t, "auth.denied", last.Action)
	assert.Contains(t, last.Detail, "and 1 refusals before it, not kept")
}

// An audit entry's ids and detail come from requests, refused ones too:
// what the log keeps of them is bounded, and still valid UTF-8.
func TestAuditEntryIsBounded(t *testing.T) {
	st := &memAudit{}
	s := New(Config{Store: st, OwnerToken: "o"})
	defer s.Close()
	huge := strings.Repeat("é", 1<<19) // 1 MiB
	s.Record(t.Context(), store.AuditEntry{Action: string(SessionCreate), ClientID: huge, WorkspaceID: huge,
		SessionID: huge, RunID: huge, Detail: "POST /v1/x -> 400; " + huge})
	s.RecordDenied(t.Context(), store.AuditEntry{Detail: "GET /v1/" + huge})
	require.Len(t, st.entries, 2)
	for _, e := range st.entries {
		for _, f := range []string{e.ClientID, e.WorkspaceID, e.SessionID, e.RunID} {
			assert.LessOrEqual(t, len(f), maxAuditID)
			assert.True(t, utf8.ValidString(f))
		}
		assert.LessOrEqual(t, len(e.Detail), maxAuditDetail)
		assert.True(t, utf8.ValidString(e.Detail))
		assert.True(t, strings.HasSuffix(e.Detail, "..."), "it says it was cut")
	}
	assert.True(t, strings.HasPrefix(st.entries[0].Detail, "POST /v1/x -> 400; "))
	id := "5f0c8a52-8f0e-4f55-9c1b-6f3e7a1d2b10"
	s.Record(t.Context(), store.AuditEntry{ClientID: id, Detail: "short"})
	assert.Equal(t, id, st.entries[2].ClientID, "a UUID is kept whole")
	assert.Equal(t, "short", st.entries[2].Detail)

	// A NUL or a byte that is not UTF-8 (a path's %00 or %ff, a JSON
	// "\u0000") would make PostgreSQL refuse the entry: it is replaced.
	s.RecordDenied(t.Context(), store.AuditEntry{ClientID: "a\x00b", Detail: "GET /v1/\x00\xff"})
	last := st.entries[len(st.entries)-1]
	assert.Equal(t, "a\uFFFDb", last.ClientID)
	assert.Equal(t, "GET /v1/\uFFFD\uFFFD", last.Detail)
}

// memAudit is a store.Auth keeping the audit log in memory.
type memAudit struct {
	store.Auth
	entries []store.AuditEntry
}

func (m *memAudit) AppendAudit(_ context.Context, e store.AuditEntry) (int64, error) {
	m.entries = append(m.entries, e)
	return int64(len(m.entries)), nil
}

// A transport that calls the domain directly asks with the identity its
// context carries; without one it is refused.
func TestCheckContext(t *testing.T) {
	ctx := t.Context()
	require.Error(t, CheckContext(ctx, Read))
	member := WithIdentity(ctx, Identity{TokenID: "t", Name: "m", Role: Member})
	require.NoError(t, CheckContext(member, Prompt))
	require.Error(t, CheckContext(member, SessionDelete))
	require.NoError(t, CheckContext(WithIdentity(ctx, Identity{Role: Owner}), SessionDelete))
}
