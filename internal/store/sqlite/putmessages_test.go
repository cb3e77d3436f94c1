package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

var _ store.MessageWriter = (*DB)(nil)

// PutMessages writes many messages (several chunks) in their order, each
// as PutMessage would: counted, and listed in order.
func TestPutMessagesKeepsOrderAndCount(t *testing.T) {
	ctx := context.Background()
	db, _ := openTest(t)
	mustWorkspace(t, db, "w")
	mustSession(t, db, "w", "s", at(0))
	const n = 2*putMessagesChunk + 17
	msgs := make([]proto.Message, n)
	for i := range msgs {
		msgs[i] = proto.Message{ID: fmt.Sprintf("m%05d-%d", n-i, i), SessionID: "s", Role: proto.RoleUser,
			Parts: []proto.Part{{Type: proto.PartText, Text: fmt.Sprint(i)}}}
	}
	require.NoError(t, db.PutMessages(ctx, msgs))
	got, err := db.ListMessages(ctx, "s")
	require.NoError(t, err)
	require.Len(t, got, n)
	for i := range got {
		require.Equal(t, msgs[i].ID, got[i].ID, "message %d", i)
	}
	sess, err := db.GetSession(ctx, "w", "s")
	require.NoError(t, err)
	require.Equal(t, n, sess.MessageCount)
}
