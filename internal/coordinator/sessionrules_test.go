package coordinator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/rules"
	"github.com/tandem-dev/tandem/internal/store"
)

// TestSessionRulesFailClosed: a session's own rules decide before the
// configuration's; stored rules that no longer compile do not vanish
// (they only ask or deny, so dropping them would let through what they
// stopped): every call asks instead.
func TestSessionRulesFailClosed(t *testing.T) {
	h := newHarness(t)
	view := rules.Call{Tool: "view", Path: "a.go", HasPath: true}
	rulesOf := func(sess store.Session) *rules.Set { return h.c.sessionRules(sess.ID, h.c.settings(sess).Permissions) }

	set := rulesOf(store.Session{ID: "s1", Config: []byte(`{"permissions":[{"tool":"bash","decision":"deny"}]}`)})
	m, ok := set.Decide(rules.Call{Tool: "bash", Command: "ls", HasCommand: true})
	require.True(t, ok)
	assert.Equal(t, rules.Deny, m.Decision)
	_, ok = set.Decide(view)
	assert.False(t, ok, "a call no rule names is the mode's to decide")

	assert.Nil(t, rulesOf(store.Session{ID: "s2"}), "no rules of its own")

	set = rulesOf(store.Session{ID: "s3", Config: []byte(`{"permissions":[{"tool":"","decision":"deny"}]}`)})
	m, ok = set.Decide(view)
	require.True(t, ok, "rules that do not compile make every call ask")
	assert.Equal(t, rules.Ask, m.Decision)
}
