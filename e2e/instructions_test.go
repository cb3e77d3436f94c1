package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// The workspace's AGENTS.md reaches the model in the system prompt, read
// when each run starts, so an edit shows in the next run; CLAUDE.md is read
// when there is no AGENTS.md; a session that customizes the section away
// does not send it. Both providers carry it.
func TestProjectInstructionsReachTheModel(t *testing.T) {
	for _, flavor := range []string{"openai", "anthropic"} {
		t.Run(flavor, func(t *testing.T) {
			fake := newFakeModel(t, flavor, reply("ok"))
			e := startEnv(t)
			ws := e.createWorkspace()
			s := e.openStream(ws.ID, newClientID(), "")
			agents := filepath.Join(ws.Path, "AGENTS.md")
			require.NoError(t, os.WriteFile(agents, []byte("Always run `task test` before committing."), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(ws.Path, "CLAUDE.md"), []byte("Claude's rules: tabs, not spaces."), 0o600))

			sess := e.fakeSession(ws.ID, fake)
			system := func(prompt string) string {
				t.Helper()
				n := len(fake.Requests())
				rc, _ := s.completion(e.prompt(ws.ID, sess.ID, prompt).RunID)
				require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
				sys, _ := turns(t, flavor, fake.Requests()[n])
				return sys
			}
			sys := system("first")
			assert.Contains(t, sys, "# Project instructions")
			assert.Contains(t, sys, "Always run `task test` before committing.")
			assert.NotContains(t, sys, "Claude's rules", "AGENTS.md wins")
			assert.Less(t, strings.Index(sys, "# Project instructions"), strings.Index(sys, "# Safety"))

			require.NoError(t, os.WriteFile(agents, []byte("Now: never commit."), 0o600))
			sys = system("second")
			assert.Contains(t, sys, "Now: never commit.", "read again when the next run starts")

			require.NoError(t, os.Remove(agents))
			sys = system("third")
			assert.Contains(t, sys, "Claude's rules: tabs, not spaces.", "CLAUDE.md without AGENTS.md")

			custom := e.createSession(ws.ID, map[string]any{
				"model":    sess.Model,
				"provider": providerOf(fake),
				"system_message": map[string]any{"mode": "customize", "sections": map[string]any{
					"project_instructions": map[string]any{"action": "remove"},
				}},
			})
			n := len(fake.Requests())
			rc, _ := s.completion(e.prompt(ws.ID, custom.ID, "no instructions").RunID)
			require.Equal(t, proto.OutcomeEndTurn, rc.Outcome, "%+v", rc.Error)
			sys, _ = turns(t, flavor, fake.Requests()[n])
			assert.NotContains(t, sys, "# Project instructions")
			assert.NotContains(t, sys, "Claude's rules")
			assert.Contains(t, sys, "# Safety")
		})
	}
}

// providerOf is the session provider settings that reach fake.
func providerOf(f *fakeModel) map[string]any {
	if f.flavor == "openai" {
		return map[string]any{"type": "openai", "base_url": f.URL() + "/v1", "api_key": "sk-secret-test-key"}
	}
	return map[string]any{"type": "anthropic", "base_url": f.URL(), "api_key": "sk-ant-secret-test-key"}
}
