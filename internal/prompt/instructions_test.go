package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

// AGENTS.md wins over CLAUDE.md; CLAUDE.md is read when there is no
// AGENTS.md (or only a directory by that name); none is no error.
func TestReadInstructionsPrefersAgentsMd(t *testing.T) {
	dir := t.TempDir()
	in, err := ReadInstructions(dir)
	require.NoError(t, err)
	assert.Equal(t, Instructions{}, in)

	write(t, filepath.Join(dir, "CLAUDE.md"), "claude rules\n")
	in, err = ReadInstructions(dir)
	require.NoError(t, err)
	assert.Equal(t, Instructions{File: "CLAUDE.md", Text: "claude rules"}, in)

	require.NoError(t, os.Mkdir(filepath.Join(dir, "AGENTS.md"), 0o700))
	in, err = ReadInstructions(dir)
	require.NoError(t, err)
	assert.Equal(t, "CLAUDE.md", in.File, "a directory is not instructions")
	require.NoError(t, os.Remove(filepath.Join(dir, "AGENTS.md")))

	write(t, filepath.Join(dir, "AGENTS.md"), "  use tabs  \n")
	in, err = ReadInstructions(dir)
	require.NoError(t, err)
	assert.Equal(t, Instructions{File: "AGENTS.md", Text: "use tabs"}, in)
}

// A file over the bound is cut, saying how much and how to read the rest;
// what is kept is valid UTF-8.
func TestReadInstructionsCutsALongFile(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("é", MaxInstructionBytes) // 2 bytes each
	write(t, filepath.Join(dir, "AGENTS.md"), long)
	in, err := ReadInstructions(dir)
	require.NoError(t, err)
	assert.Less(t, len(in.Text), MaxInstructionBytes+200)
	assert.Contains(t, in.Text, "AGENTS.md is 65536 bytes; 32768 bytes were cut here. View the file to read the rest.")
	assert.True(t, strings.HasPrefix(in.Text, strings.Repeat("é", MaxInstructionBytes/2)))
}

// A symlink out of the workspace is not followed, and a FIFO by that name
// does not block the read.
func TestReadInstructionsStaysInside(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "the secret")
	dir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "AGENTS.md")))
	in, err := ReadInstructions(dir)
	require.Error(t, err)
	assert.NotContains(t, in.Text, "the secret")

	fifoDir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(fifoDir, "AGENTS.md"), 0o600))
	write(t, filepath.Join(fifoDir, "CLAUDE.md"), "fallback")
	done := make(chan Instructions, 1)
	go func() {
		in, _ := ReadInstructions(fifoDir)
		done <- in
	}()
	select {
	case in := <-done:
		assert.Equal(t, "CLAUDE.md", in.File)
	case <-time.After(5 * time.Second):
		t.Fatal("reading instructions blocked on a FIFO")
	}
}

// The instructions are the project_instructions section, between the
// guidelines and safety; customize acts on it like on any section.
func TestProjectInstructionsSection(t *testing.T) {
	env := testEnv
	env.ProjectInstructions = Instructions{File: "AGENTS.md", Text: "Run `task test` before you commit."}
	got := Build(nil, env)
	assertInOrder(t, got, "# Working guidelines", "# Project instructions", "from AGENTS.md", "Run `task test` before you commit.", "# Safety")
	assert.NotContains(t, Build(nil, testEnv), "# Project instructions", "no file, no section")

	removed := Build(&proto.SystemMessage{Mode: "customize", Sections: map[string]proto.SectionOverride{
		ProjectInstructions: {Action: "remove"},
	}}, env)
	assert.Equal(t, Build(nil, testEnv), removed)
	replaced := Build(&proto.SystemMessage{Mode: "customize", Sections: map[string]proto.SectionOverride{
		ProjectInstructions: {Action: "replace", Content: "ours instead"},
	}}, env)
	assert.NotContains(t, replaced, "task test")
	assertInOrder(t, replaced, "# Working guidelines", "ours instead", "# Safety")
	require.NoError(t, Validate(&proto.SystemMessage{Mode: "customize", Sections: map[string]proto.SectionOverride{ProjectInstructions: {Action: "append", Content: "x"}}}))
}
