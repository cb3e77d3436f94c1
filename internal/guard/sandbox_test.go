package guard

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/proto"
)

func TestSandboxWidening(t *testing.T) {
	off, ro, ws, yes, no := "off", "read-only", "workspace", true, false
	def := sandbox.Settings{}
	widen := []auth.Action{auth.SandboxWiden}
	assert.Nil(t, SandboxWidening(def, proto.SandboxOptions{}))
	assert.Nil(t, SandboxWidening(def, proto.SandboxOptions{Sandbox: &ro}), "narrowing")
	assert.Nil(t, SandboxWidening(def, proto.SandboxOptions{Sandbox: &ws, SandboxNetwork: &no}), "keeping")
	assert.Equal(t, widen, SandboxWidening(def, proto.SandboxOptions{Sandbox: &off}))
	assert.Equal(t, widen, SandboxWidening(def, proto.SandboxOptions{SandboxNetwork: &yes}))
	assert.Equal(t, widen, SandboxWidening(def, proto.SandboxOptions{SandboxRead: &[]string{"/srv"}}))
	assert.Equal(t, widen, SandboxWidening(sandbox.Settings{Mode: ro}, proto.SandboxOptions{Sandbox: &ws}))
	assert.Nil(t, SandboxWidening(sandbox.Settings{Mode: off, Network: true}, proto.SandboxOptions{Sandbox: &ws}), "an owner's wider base")
}
