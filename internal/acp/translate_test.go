package acp

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/proto"
)

// A write's old text is rebuilt from its permission's unified diff, hunks
// of context and all; a diff that does not fit the new text rebuilds
// nothing.
func TestReversePatch(t *testing.T) {
	after := "a\nB\nc\nd\ne\nf\ng\nh\ni\nJ\nk\nnew\n"
	diff := "--- a/x\n+++ b/x\n@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n d\n@@ -7,5 +7,6 @@\n g\n h\n i\n-j\n+J\n k\n+new"
	before, ok := reversePatch(after, diff)
	require.True(t, ok)
	assert.Equal(t, "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n", before)

	// No newline at the end of the old file.
	before, ok = reversePatch("x\ny\n", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-z\n\\ No newline at end of file\n+y")
	require.True(t, ok)
	assert.Equal(t, "x\nz", before)

	_, ok = reversePatch("other\n", diff)
	assert.False(t, ok, "a diff of another text")
	_, ok = reversePatch("x\n", "(x is 99999999 bytes, too large to compare)")
	assert.False(t, ok)
}

// Content blocks become the prompt and its attachments.
func TestPromptRequest(t *testing.T) {
	a := &attached{id: "s1", root: "/work/proj"}
	text := "package main\n"
	req, err := a.promptRequest([]contentBlock{
		{Type: "text", Text: "look at"},
		{Type: "resource_link", URI: "file:///work/proj/main.go", Name: "main.go"},
		{Type: "resource_link", URI: "file:///etc/passwd", Name: "passwd"},
		{Type: "resource_link", URI: "https://example.com/doc", Name: "doc"},
		{Type: "resource", Resource: &resourceContent{URI: "file:///work/proj/x.go", Text: &text}},
		{Type: "image", Data: "iVBORw0=", MimeType: "image/png"},
	})
	require.NoError(t, err)
	assert.Equal(t, "look at\n[passwd](file:///etc/passwd)\n[doc](https://example.com/doc)", req.Prompt)
	require.Len(t, req.Attachments, 3)
	assert.Equal(t, proto.Attachment{Type: "file", Path: "/work/proj/main.go", DisplayName: "main.go"}, req.Attachments[0])
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(text)), req.Attachments[1].Data)
	assert.Equal(t, "x.go", req.Attachments[1].DisplayName)
	assert.Equal(t, "image/png", req.Attachments[2].MimeType)

	_, err = a.promptRequest([]contentBlock{{Type: "audio", Data: "AA", MimeType: "audio/wav"}})
	assert.ErrorContains(t, err, "audio")
	_, err = a.promptRequest([]contentBlock{{Type: "text", Text: "  "}})
	assert.ErrorContains(t, err, "empty")
}
