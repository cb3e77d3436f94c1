package coordinator

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/proto"
)

func TestKeptAttachmentsRoundTrip(t *testing.T) {
	img := bytes.Repeat([]byte{0, 0xff, '\n', '"'}, 1000)
	atts := []agent.Attachment{
		{Part: proto.Part{Type: proto.PartAttachment, Kind: "file", Path: "a/b.go", DisplayName: "b.go", MimeType: "text/plain", Size: 12}, Text: "Attached file a/b.go:\n```\npackage b \"é\"\n```"},
		{Part: proto.Part{Type: proto.PartAttachment, Kind: "blob", DisplayName: "x.png", MimeType: "image/png", Size: int64(len(img))}, Image: &provider.Image{MimeType: "image/png", Data: img}},
		{Part: proto.Part{Type: proto.PartAttachment, Kind: "blob", DisplayName: "empty", MimeType: "text/plain"}},
	}
	got, err := decodeAttachments(encodeAttachments(atts))
	require.NoError(t, err)
	assert.Equal(t, atts, got)

	got, err = decodeAttachments(encodeAttachments(nil))
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestKeptAttachmentsRefuseMalformed(t *testing.T) {
	enc := encodeAttachments([]agent.Attachment{{Part: proto.Part{Type: proto.PartAttachment}, Text: "hello"}})
	for name, data := range map[string][]byte{
		"empty":     nil,
		"cut":       enc[:len(enc)-1],
		"trailing":  append(append([]byte{}, enc...), 'x'),
		"long head": {0xff, 0xff, 0xff, 0xff, 0x0f, '['},
	} {
		_, err := decodeAttachments(data)
		assert.ErrorIs(t, err, errBadKept, name)
	}
}

// Whatever the store hands back, decoding never panics, and what decodes
// encodes to the same bytes.
func FuzzDecodeAttachments(f *testing.F) {
	f.Add(encodeAttachments([]agent.Attachment{{Part: proto.Part{Type: proto.PartAttachment, Kind: "file"}, Text: "t"}}))
	f.Add(encodeAttachments([]agent.Attachment{{Part: proto.Part{Type: proto.PartAttachment}, Image: &provider.Image{MimeType: "image/gif", Data: []byte("GIF89a")}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		atts, err := decodeAttachments(data)
		if err != nil {
			return
		}
		again, err := decodeAttachments(encodeAttachments(atts))
		require.NoError(t, err)
		require.Equal(t, len(atts), len(again))
	})
}
