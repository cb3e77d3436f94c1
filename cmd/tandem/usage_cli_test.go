package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// tandem run ends with the run's usage and cost on stderr; --steer sends a
// prompt into the running run, whose end both commands follow; tandem
// compact summarizes the session; tandem sessions shows each session's
// context, tokens and cost.
func TestRunUsageSteerCompactAndSessions(t *testing.T) {
	t.Parallel()
	srv := startCLIServer(t)
	dir, env := t.TempDir(), srv.env(t)
	// Prices for the echo model, so that cost is known: USD per million.
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".tandem"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tandem", "config.json"),
		[]byte(`{"models": {"echo": {"context_window": 200000, "input_price": 3, "output_price": 15}}}`), 0o600))

	_, errOut, code := runCLI(t, dir, env, "compact")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no session to compact")

	out, errOut, code := runCLI(t, dir, env, "run", "hello")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "echo: hello\n", out, "usage goes to stderr, not into the answer")
	assert.Regexp(t, `tandem: [\d.]+k? tokens in, \d+ out, \$0\.\d+\n`, errOut)

	// A long run; a steer joins it.
	first := startCLI(t, dir, env, "run", "/slow 60 20")
	first.stdout.waitFor(t, "tick 1 ")
	out, errOut, code = runCLI(t, dir, env, "run", "--steer", "and then?")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "steered into the running run")
	assert.Contains(t, out, "echo: and then?", "the steered prompt is answered in the run it joined")
	require.Equal(t, 0, first.exitCode(t), first.stderr.String())
	assert.Contains(t, first.stdout.String(), "echo: and then?")
	sessions := sessionsOf(t, dir, env)
	require.Len(t, sessions, 1)
	assert.Equal(t, 6, sessions[0].MessageCount, "hello and its answer; the long prompt, the steer, an answer each")

	out, errOut, code = runCLI(t, dir, env, "compact")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "[compaction] the conversation was summarized")
	msgs, err := srv.c.Messages(t.Context(), sessions[0].WorkspaceID, sessions[0].ID)
	require.NoError(t, err)
	require.Len(t, msgs, 8)
	assert.Equal(t, proto.PartSummary, msgs[6].Parts[0].Type)

	out, errOut, code = runCLI(t, dir, env, "sessions")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	assert.Regexp(t, `^ID\s+TITLE\s+UPDATED\s+MESSAGES\s+CONTEXT\s+TOKENS\s+COST$`, lines[0])
	assert.Regexp(t, `\s8\s+[\d.]+k?/200k \(\d+%\)\s+[\d.]+k?\s+\$0\.\d+$`, lines[1])
	s := sessionsOf(t, dir, env)[0]
	require.NotNil(t, s.Usage.CostUSD)
	assert.Positive(t, s.Usage.InputTokens)
}

// The server's warnings about the run (a model request retried) and its
// compactions are shown on stderr, so a wait they explain does not look
// like a hang; info lines and other runs' warnings are not.
func TestRunShowsWarningsAndCompactions(t *testing.T) {
	var out, errOut syncBuffer
	r := &runner{scr: newScreen(&out, &errOut, false, false), runID: "r1", perms: map[string]string{}}
	ev := func(typ, runID, data string) proto.Event {
		return proto.Event{Seq: 1, Type: typ, RunID: runID, Data: []byte(data)}
	}
	r.handle(ev(proto.EventSessionLog, "r1", `{"level":"warning","message":"model request failed (model_rate_limited: slow down); retry 1 of 3 in 1s"}`))
	r.handle(ev(proto.EventSessionLog, "r1", `{"level":"info","message":"chatter"}`))
	r.handle(ev(proto.EventSessionLog, "other", `{"level":"warning","message":"not ours"}`))
	r.handle(ev(proto.EventSessionCompactionCompleted, "r1", `{"tokens_before":10223,"tokens_after":4926,"summary_message_id":"m"}`))
	r.scr.Close()
	assert.Equal(t, "[warning] model request failed (model_rate_limited: slow down); retry 1 of 3 in 1s\n"+
		"[compaction] the conversation was summarized: 10.2k -> 4.9k tokens\n", errOut.String())
	assert.Empty(t, out.String())
}

func TestFormatUsage(t *testing.T) {
	c := 0.01234
	assert.Equal(t, "950 tokens in, 12 out", formatUsage(proto.Usage{InputTokens: 950, OutputTokens: 12}))
	assert.Equal(t, "12.3k tokens in (10k cached), 1.2M out (300 reasoning), $0.01",
		formatUsage(proto.Usage{InputTokens: 12_345, CacheReadTokens: 10_000, OutputTokens: 1_200_000, ReasoningTokens: 300, CostUSD: &c}))
	assert.Equal(t, "999.9k", count(999_949))
	assert.Equal(t, "1M", count(999_950))
	assert.Equal(t, "$0.0012", cost(0.00123))
	free := 0.0
	assert.Equal(t, "3 tokens in, 2 out, free", formatUsage(proto.Usage{InputTokens: 3, OutputTokens: 2, CostUSD: &free}),
		"a model priced at nothing (echo) costs nothing, not $0.0000")
}
