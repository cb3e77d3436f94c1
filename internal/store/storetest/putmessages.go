package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// PutMessages (a fork's or an import's copy) writes many messages in
// their order, each as PutMessage would: counted, listed in order, and an
// id already there updated in its place. Every Tandem store has the role.
func testPutMessages(t *testing.T, h Harness) {
	s := h.Open(t)
	mw, ok := s.(store.MessageWriter)
	require.True(t, ok, "the store implements store.MessageWriter")
	mustWorkspace(t, s, "w")
	mustSession(t, s, "w", "s", t0)
	require.NoError(t, s.PutMessage(bg, msg("first", "s", "before")))
	const n = 2500
	msgs := make([]proto.Message, n)
	for i := range msgs {
		// Ids that do not sort in the messages' order.
		msgs[i] = msg(fmt.Sprintf("m%05d", n-i), "s", fmt.Sprint(i))
	}
	msgs[n-1] = msg("first", "s", "updated")
	require.NoError(t, mw.PutMessages(bg, msgs))
	got, err := s.ListMessages(bg, "s")
	require.NoError(t, err)
	require.Len(t, got, n)
	require.Equal(t, "first", got[0].ID, "an id already there keeps its place")
	require.Equal(t, "updated", got[0].Parts[0].Text)
	for i := 1; i < n; i++ {
		require.Equal(t, msgs[i-1].ID, got[i].ID, "message %d", i)
	}
	sess, err := s.GetSession(bg, "w", "s")
	require.NoError(t, err)
	require.Equal(t, n, sess.MessageCount)
}
