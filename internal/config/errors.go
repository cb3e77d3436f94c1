package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a configuration file: which file, which key (a
// JSON path such as mcp_servers.git.command or permissions[2].tool), where
// in the file, and why.
type Error struct {
	// File is the file's path; "" for a value that came from elsewhere
	// (a request body).
	File string
	// Key is the JSON path of the value at fault; "" for the file as a whole.
	Key string
	// Line and Col locate the value (1-based; 0 when unknown).
	Line, Col int
	// Reason says what is wrong, for a human.
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// maxErrors bounds how many problems one file reports: enough to fix a
// file in one go, few enough to read.
const maxErrors = 20

// Errors is every problem found in one load, in file order. It is returned
// as an error only when it is not empty.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}
