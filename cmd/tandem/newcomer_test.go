package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runBinary runs the tandem binary with args to its end.
func runBinary(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t, cliDeadline), binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, _ := cmd.CombinedOutput()
	return string(out), cmd.ProcessState.ExitCode()
}

// serve --model gpt-4 used to start and fail every run; it is refused at
// start, saying what to write instead.
func TestServeRefusesAModelWithoutProvider(t *testing.T) {
	out, code := runBinary(t, []string{"TANDEM_TOKEN=t"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--model", "gpt-4")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "openai/gpt-4")
	assert.NotContains(t, out, "listening")

	out, code = runBinary(t, []string{"TANDEM_TOKEN=t", "TANDEM_MODEL=mistral/large"}, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "openai, azure, anthropic or echo")
	require.NotContains(t, out, "listening")
}
