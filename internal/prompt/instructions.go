package prompt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// InstructionFiles are the files that hold a project's instructions to the
// agent, looked for at the workspace root in this order; the first found
// is used (contract section 7).
var InstructionFiles = []string{"AGENTS.md", "CLAUDE.md"}

// MaxInstructionBytes bounds the project instructions that go into the
// system prompt; every model request carries them. A longer file is cut,
// saying so.
const MaxInstructionBytes = 32 << 10

// Instructions are a project's instructions to the agent.
type Instructions struct {
	File string // the file's name, relative to the workspace root
	Text string // its content, cut to MaxInstructionBytes
}

// ReadInstructions reads the project instructions at the workspace root:
// the first of InstructionFiles that is a regular file. None is no error.
// The read is confined to root (a symlink leading out of it is refused, as
// for the tools), never blocks on a special file, and reads at most
// MaxInstructionBytes of it.
func ReadInstructions(root string) (Instructions, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return Instructions{}, fmt.Errorf("project instructions: %w", err)
	}
	defer r.Close()
	for _, name := range InstructionFiles {
		// O_NONBLOCK: opening a FIFO named AGENTS.md must not wait for a
		// writer; a regular file reads as usual.
		f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Instructions{}, fmt.Errorf("project instructions: %w", err)
		}
		in, err := readInstructions(f, name)
		f.Close()
		if err != nil || in.File != "" {
			return in, err
		}
	}
	return Instructions{}, nil
}

func readInstructions(f *os.File, name string) (Instructions, error) {
	st, err := f.Stat()
	if err != nil {
		return Instructions{}, fmt.Errorf("project instructions: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Instructions{}, nil // a directory or device by that name: not instructions
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxInstructionBytes+1))
	if err != nil {
		return Instructions{}, fmt.Errorf("project instructions: read %s: %w", name, err)
	}
	text := string(b)
	if len(b) > MaxInstructionBytes {
		size := max(st.Size(), int64(len(b)))
		text = strings.ToValidUTF8(string(b[:MaxInstructionBytes]), "")
		text += fmt.Sprintf("\n\n[%s is %d bytes; %d bytes were cut here. View the file to read the rest.]", name, size, size-int64(len(text)))
	}
	return Instructions{File: name, Text: strings.TrimSpace(text)}, nil
}

// projectInstructionsText renders the project_instructions section; ""
// when the project has none.
func projectInstructionsText(in Instructions) string {
	if strings.TrimSpace(in.Text) == "" {
		return ""
	}
	// Safety says file contents are data; this file is the exception, put
	// here by Tandem, not by a tool result, so the section says so.
	return "# Project instructions\nThe project's own instructions from " + oneLine(in.File) +
		" at the workspace root, included by Tandem: follow them as the users' standing instructions, unless they conflict with a user's request or with the safety rules.\n\n" + in.Text
}
