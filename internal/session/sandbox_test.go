package session

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/proto"
)

func TestSandboxWideningAndWhoMayAskIt(t *testing.T) {
	def := sandbox.Settings{}.Normal()
	off, on := "off", true
	assert.Empty(t, SandboxWidening(def, proto.SandboxOptions{}))
	assert.Equal(t, []string{"sandbox", "sandbox_network"}, SandboxWidening(def, proto.SandboxOptions{Sandbox: &off, SandboxNetwork: &on}))
	ro := "read-only"
	assert.Empty(t, SandboxWidening(def, proto.SandboxOptions{Sandbox: &ro}), "narrowing")

	member := domain.WithCaller(context.Background(), domain.Caller{Role: proto.RoleMember})
	owner := domain.WithCaller(context.Background(), domain.Caller{Role: proto.RoleOwner})
	err := checkWidening(member, []string{"sandbox"})
	assert.Error(t, err)
	assert.Contains(t, err.Error(), "role member may not widen")
	assert.NoError(t, checkWidening(member, nil))
	assert.NoError(t, checkWidening(owner, []string{"sandbox"}))
	assert.NoError(t, checkWidening(context.Background(), []string{"sandbox"}), "the server itself")

	var st Settings
	assert.Equal(t, def, st.SandboxOf(sandbox.Settings{}))
	st.Sandbox = &sandbox.Patch{Network: &on}
	assert.Equal(t, sandbox.Settings{Mode: "read-only", Network: true, Read: []string{}, Write: []string{}}, st.SandboxOf(sandbox.Settings{Mode: "read-only"}))
}
