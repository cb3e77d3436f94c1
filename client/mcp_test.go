package client

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/mcp/mcptest"
	"github.com/tandem-dev/tandem/proto"
)

// TestMCPServers: the workspace's MCP servers are listed before they start
// (stopped) and once a run started them (connected, with their tools); an
// invalid workspace file is invalid_config.
func TestMCPServers(t *testing.T) {
	srv := mcptest.NewServer(mcptest.Options{Say: func(string) {}})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	e := startServer(t)
	ctx := ctxT(t)
	path := filepath.Join(e.dir, ".tandem", "config.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(`{"mcp_servers": {"web": {"type": "http", "url": "`+ts.URL+`", "tools": ["echo"]}}}`), 0o600))

	ws := e.workspace()
	list, err := e.c.MCPServers(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, []proto.MCPServerStatus{{Name: "web", Status: proto.MCPStopped, Tools: []string{}}}, list)

	s := openStream(t, e.c, ws.ID, EventsOptions{})
	sess, err := e.c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{PermissionMode: "allow_all"})
	require.NoError(t, err)
	acc, err := e.c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: `/tool mcp__web__echo {"text": "hi"}`})
	require.NoError(t, err)
	rc, err := WaitRun(ctx, s, acc.RunID)
	require.NoError(t, err)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)
	list, err = e.c.MCPServers(ctx, ws.ID)
	require.NoError(t, err)
	assert.Equal(t, []proto.MCPServerStatus{{Name: "web", Status: proto.MCPConnected, Tools: []string{"mcp__web__echo"}}}, list)

	require.NoError(t, os.WriteFile(path, []byte(`{"mcp_servers": {"web": {"type": "ftp"}}}`), 0o600))
	_, err = e.c.MCPServers(ctx, ws.ID)
	assert.True(t, IsCode(err, proto.CodeInvalidConfig), "%v", err)
	assert.ErrorContains(t, err, "mcp_servers.web.type")
}
