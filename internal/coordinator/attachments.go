package coordinator

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/tools"
	"github.com/tandem-dev/tandem/proto"
)

// Attachment limits keep one prompt from filling the model's context or
// memory (contract section 1): each file and blob is bounded, and so are
// their count and their decoded total, whatever the size of the body that
// names them (a path is a few bytes; the file behind it is not).
const (
	MaxFileAttachment = 1 << 20
	MaxBlobAttachment = 10 << 20
	MaxAttachments    = 20
	MaxAttachedBytes  = 20 << 20
)

// imageTypes are the image formats every supported provider accepts as input.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// prepareAttachments checks a prompt's attachments and reads them, before
// the run is accepted: too many, or too much in all, is a 413; any other
// problem a 400 naming the attachment.
func prepareAttachments(root string, in []proto.Attachment) ([]agent.Attachment, error) {
	if len(in) > MaxAttachments {
		return nil, apierr.Errorf(proto.CodeBodyTooLarge, "a prompt may carry at most %d attachments, got %d", MaxAttachments, len(in))
	}
	out := make([]agent.Attachment, 0, len(in))
	var total int64
	for i, a := range in {
		var (
			att agent.Attachment
			err error
		)
		switch a.Type {
		case "file":
			att, err = fileAttachment(root, a)
		case "blob":
			att, err = blobAttachment(a)
		default:
			err = fmt.Errorf("type must be \"file\" or \"blob\", got %q", a.Type)
		}
		if err != nil {
			return nil, apierr.Invalid("attachments[%d]: %v", i, err)
		}
		// Each is bounded, so the total passes its limit by at most one
		// attachment before it is seen.
		if total += att.Part.Size; total > MaxAttachedBytes {
			return nil, apierr.Errorf(proto.CodeBodyTooLarge, "attachments[%d]: the attachments hold more than %d bytes in all", i, MaxAttachedBytes)
		}
		out = append(out, att)
	}
	return out, nil
}

func fileAttachment(root string, a proto.Attachment) (agent.Attachment, error) {
	if a.Data != "" {
		return agent.Attachment{}, fmt.Errorf("a file attachment takes a path, not data")
	}
	if a.Path == "" {
		return agent.Attachment{}, fmt.Errorf("path is required")
	}
	// Read through the tools' confined root, like the file tools: the
	// workspace may change under us while the prompt is accepted.
	rel, data, err := tools.Env{Root: root}.ReadFile(a.Path, MaxFileAttachment)
	var (
		tooLarge   *tools.TooLargeError
		notRegular *tools.NotRegularError
	)
	switch {
	case errors.As(err, &notRegular):
		return agent.Attachment{}, fmt.Errorf("path %q is not a regular file", a.Path)
	case errors.As(err, &tooLarge):
		return agent.Attachment{}, fmt.Errorf("file %q is %d bytes, over the %d byte limit", a.Path, tooLarge.Size, MaxFileAttachment)
	case errors.Is(err, fs.ErrNotExist):
		return agent.Attachment{}, fmt.Errorf("path %q does not exist", a.Path)
	case err != nil:
		return agent.Attachment{}, err
	}
	name := a.DisplayName
	if name == "" {
		name = path.Base(rel)
	}
	mime := http.DetectContentType(data)
	part := proto.Part{Type: proto.PartAttachment, Kind: "file", Path: rel, DisplayName: name, Size: int64(len(data))}
	if base := strings.TrimSpace(strings.Split(mime, ";")[0]); imageTypes[base] {
		if a.LineRange != nil {
			return agent.Attachment{}, fmt.Errorf("line_range does not apply to image %q", a.Path)
		}
		part.MimeType = base
		return agent.Attachment{Part: part, Image: &provider.Image{MimeType: base, Data: data}}, nil
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return agent.Attachment{}, fmt.Errorf("file %q is binary; attach text files or images", a.Path)
	}
	part.MimeType = "text/plain"
	text := string(data)
	label := rel
	if r := a.LineRange; r != nil {
		lines := strings.SplitAfter(text, "\n")
		if r.Start < 1 || r.End < r.Start {
			return agent.Attachment{}, fmt.Errorf("line_range must have 1 <= start <= end, got %d-%d", r.Start, r.End)
		}
		if r.Start > len(lines) {
			return agent.Attachment{}, fmt.Errorf("line_range starts at %d but %q has %d lines", r.Start, a.Path, len(lines))
		}
		text = strings.Join(lines[r.Start-1:min(r.End, len(lines))], "")
		label = fmt.Sprintf("%s (lines %d-%d)", rel, r.Start, min(r.End, len(lines)))
	}
	return agent.Attachment{Part: part, Text: attachedText("Attached file "+label+":", text)}, nil
}

func blobAttachment(a proto.Attachment) (agent.Attachment, error) {
	if a.Path != "" || a.LineRange != nil {
		return agent.Attachment{}, fmt.Errorf("a blob attachment takes data and mime_type, not a path or line_range")
	}
	if a.Data == "" {
		return agent.Attachment{}, fmt.Errorf("data is required")
	}
	if a.MimeType == "" {
		return agent.Attachment{}, fmt.Errorf("mime_type is required")
	}
	if base64.StdEncoding.DecodedLen(len(a.Data)) > MaxBlobAttachment+3 {
		return agent.Attachment{}, fmt.Errorf("blob is over the %d byte limit", MaxBlobAttachment)
	}
	data, err := base64.StdEncoding.DecodeString(a.Data)
	if err != nil {
		return agent.Attachment{}, fmt.Errorf("data is not valid base64: %v", err)
	}
	if len(data) > MaxBlobAttachment {
		return agent.Attachment{}, fmt.Errorf("blob is %d bytes, over the %d byte limit", len(data), MaxBlobAttachment)
	}
	// Media types are case-insensitive and may carry parameters
	// ("image/PNG", "text/plain; charset=utf-8"); the model gets the bare type.
	mt, _, err := mime.ParseMediaType(a.MimeType)
	if err != nil {
		return agent.Attachment{}, fmt.Errorf("mime_type %q is not a media type", a.MimeType)
	}
	name := a.DisplayName
	if name == "" {
		name = "attachment"
	}
	part := proto.Part{Type: proto.PartAttachment, Kind: "blob", MimeType: mt, DisplayName: name, Size: int64(len(data))}
	switch {
	case imageTypes[mt]:
		return agent.Attachment{Part: part, Image: &provider.Image{MimeType: mt, Data: data}}, nil
	case strings.HasPrefix(mt, "text/") || mt == "application/json":
		if bytes.IndexByte(data, 0) >= 0 {
			return agent.Attachment{}, fmt.Errorf("blob of type %s contains binary data", mt)
		}
		return agent.Attachment{Part: part, Text: attachedText(fmt.Sprintf("Attached %s (%s):", name, mt), string(data))}, nil
	}
	return agent.Attachment{}, fmt.Errorf("mime_type %q is not supported: send images (png, jpeg, gif, webp) or text", a.MimeType)
}

// attachedText is how an attachment's text reaches the model: a heading, then
// the text fenced. It is built at its final size, as attachments are large.
func attachedText(heading, text string) string {
	text = strings.TrimSuffix(text, "\n")
	var b strings.Builder
	b.Grow(len(heading) + len(text) + 10)
	b.WriteString(heading)
	b.WriteString("\n```\n")
	b.WriteString(text)
	b.WriteString("\n```")
	return b.String()
}
