package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A run on openai/... with no OPENAI_API_KEY set, against a server that
// wants one, ends in error saying which variable to set.
func TestRunWithoutAnAPIKeyNamesTheVariable(t *testing.T) {
	fake := newFakeModel(t, "openai", func(int, map[string]any) step { return step{status: http.StatusUnauthorized} })
	env := map[string]string{"OPENAI_BASE_URL": fake.URL() + "/v1"}
	e := startEnv(t, func(c *serverConfig) { c.Getenv = func(k string) string { return env[k] } })
	ws := e.createWorkspace()
	s := e.openStream(ws.ID, newClientID(), "")
	sess := e.createSession(ws.ID, map[string]any{"model": "openai/gpt-test"})
	acc := e.prompt(ws.ID, sess.ID, "hello")
	rc, _ := s.completion(acc.RunID)
	require.Equal(t, proto.OutcomeError, rc.Outcome)
	require.NotNil(t, rc.Error)
	assert.Equal(t, "model_auth", rc.Error.Code)
	assert.Contains(t, rc.Error.Message, "set OPENAI_API_KEY")
	require.NotEmpty(t, fake.Requests())
	assert.Empty(t, fake.Requests()[0].Header.Get("Authorization"), "no key was sent")
}
