package coordinator

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/store"
)

// A prompt's attachments, as read when it was accepted, are kept in the
// store with its run.accepted (store.Attachments) until its run ends: a
// run queued when its server died runs with them on the next owner, and
// one that ends interrupted keeps them in its user message. Kept is what
// was read, not the path: a file may change or go after the 202.
//
// The encoding is a header, then the attachments' bytes: a uvarint length,
// the JSON of one keptAttachment per attachment, then each one's text and
// image bytes in order. Text and images (up to 20 MiB in all) go as they
// are, not escaped or in base64.

// keptAttachment is one attachment's header in the encoding.
type keptAttachment struct {
	Part      json.RawMessage `json:"part"` // proto.Part
	Text      int             `json:"text,omitempty"`
	ImageType string          `json:"image_type,omitempty"`
	Image     int             `json:"image,omitempty"`
}

// encodeAttachments is the kept form of atts.
func encodeAttachments(atts []agent.Attachment) []byte {
	heads := make([]keptAttachment, len(atts))
	size := 0
	for i, a := range atts {
		part, _ := json.Marshal(a.Part)
		heads[i] = keptAttachment{Part: part, Text: len(a.Text)}
		if a.Image != nil {
			heads[i].ImageType, heads[i].Image = a.Image.MimeType, len(a.Image.Data)
		}
		size += len(a.Text) + heads[i].Image
	}
	head, _ := json.Marshal(heads)
	out := make([]byte, 0, binary.MaxVarintLen64+len(head)+size)
	out = binary.AppendUvarint(out, uint64(len(head)))
	out = append(out, head...)
	for _, a := range atts {
		out = append(out, a.Text...)
		if a.Image != nil {
			out = append(out, a.Image.Data...)
		}
	}
	return out
}

var errBadKept = errors.New("kept attachments are malformed")

// decodeAttachments reads what encodeAttachments wrote.
func decodeAttachments(data []byte) ([]agent.Attachment, error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, errBadKept
	}
	var heads []keptAttachment
	if err := json.Unmarshal(data[k:k+int(n)], &heads); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadKept, err)
	}
	rest := data[k+int(n):]
	take := func(n int) ([]byte, error) {
		if n < 0 || n > len(rest) {
			return nil, errBadKept
		}
		b := rest[:n:n]
		rest = rest[n:]
		return b, nil
	}
	out := make([]agent.Attachment, len(heads))
	for i, h := range heads {
		if err := json.Unmarshal(h.Part, &out[i].Part); err != nil {
			return nil, fmt.Errorf("%w: %v", errBadKept, err)
		}
		text, err := take(h.Text)
		if err != nil {
			return nil, err
		}
		out[i].Text = string(text)
		if h.ImageType != "" {
			img, err := take(h.Image)
			if err != nil {
				return nil, err
			}
			out[i].Image = &provider.Image{MimeType: h.ImageType, Data: img}
		}
	}
	if len(rest) > 0 {
		return nil, errBadKept
	}
	return out, nil
}

// keptAttachments reads what the store kept of the run's attachments:
// its own prompt's, and its steered prompts' by message id.
func (c *Coordinator) keptAttachments(ctx context.Context, runID string) (own []agent.Attachment, steered map[string][]agent.Attachment, err error) {
	kept, err := c.cfg.Store.RunAttachments(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range kept {
		atts, err := decodeAttachments(k.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("attachments of run %s: %w", runID, err)
		}
		if k.MessageID == "" {
			own = atts
			continue
		}
		if steered == nil {
			steered = map[string][]agent.Attachment{}
		}
		steered[k.MessageID] = atts
	}
	return own, steered, nil
}

// keep is the store's form of a prompt's attachments, nil when it has none.
func keep(messageID string, encoded []byte) *store.Attachments {
	if encoded == nil {
		return nil
	}
	return &store.Attachments{MessageID: messageID, Data: encoded}
}
