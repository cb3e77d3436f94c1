package acp

import (
	"encoding/base64"
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/tandem-dev/tandem/proto"
)

// maxBlocks bounds a prompt's content blocks; Tandem itself takes at most
// 20 attachments, and says so.
const maxBlocks = 1000

// promptRequest turns a prompt's content blocks into Tandem's prompt: text
// is the prompt, a file:// link inside the workspace and an embedded
// resource become attachments (other links stay in the text), an image an
// image attachment; audio is refused.
func (a *attached) promptRequest(blocks []contentBlock) (proto.PromptRequest, error) {
	if len(blocks) > maxBlocks {
		return proto.PromptRequest{}, invalidParams("a prompt has at most %d content blocks, got %d", maxBlocks, len(blocks))
	}
	req := proto.PromptRequest{SessionID: a.id}
	var text []string
	for i, b := range blocks {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "image":
			if b.Data == "" || b.MimeType == "" {
				return req, invalidParams("prompt[%d]: an image needs data and mimeType", i)
			}
			req.Attachments = append(req.Attachments, proto.Attachment{Type: proto.AttachmentBlob, Data: b.Data, MimeType: b.MimeType, DisplayName: displayName(b.URI, "image")})
		case "resource_link":
			if p, ok := a.workspaceFile(b.URI); ok {
				req.Attachments = append(req.Attachments, proto.Attachment{Type: proto.AttachmentFile, Path: p, DisplayName: b.Name})
				continue
			}
			name := b.Name
			if name == "" {
				name = b.URI
			}
			text = append(text, "["+name+"]("+b.URI+")")
		case "resource":
			r := b.Resource
			if r == nil {
				return req, invalidParams("prompt[%d]: a resource block needs its resource", i)
			}
			att := proto.Attachment{Type: proto.AttachmentBlob, MimeType: r.MimeType, DisplayName: displayName(r.URI, "resource")}
			switch {
			case r.Text != nil:
				att.Data = base64.StdEncoding.EncodeToString([]byte(*r.Text))
				if att.MimeType == "" {
					att.MimeType = "text/plain"
				}
			case r.Blob != nil:
				att.Data = *r.Blob
				if att.MimeType == "" {
					att.MimeType = "application/octet-stream"
				}
			default:
				return req, invalidParams("prompt[%d]: a resource needs text or blob", i)
			}
			req.Attachments = append(req.Attachments, att)
		case "audio":
			return req, invalidParams("prompt[%d]: audio is not supported (the promptCapabilities say so)", i)
		default:
			return req, invalidParams("prompt[%d]: unknown content type %q", i, b.Type)
		}
	}
	req.Prompt = strings.Join(text, "\n")
	if strings.TrimSpace(req.Prompt) == "" {
		if len(req.Attachments) == 0 {
			return req, invalidParams("the prompt is empty")
		}
		// Tandem needs a prompt's text; an editor may send a file alone.
		req.Prompt = "See the attached context."
	}
	return req, nil
}

// workspaceFile is the path of a file:// URI inside the workspace.
func (a *attached) workspaceFile(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
		return "", false
	}
	up := u.Path
	if strings.HasPrefix(up, "/") && filepath.VolumeName(up[1:]) != "" {
		up = up[1:] // /C:/x: a Windows path
	}
	p := filepath.Clean(filepath.FromSlash(up))
	rel, err := filepath.Rel(a.root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	// The server confines it too (symlinks included): this only decides
	// whether it is an attachment or a link in the text.
	return p, true
}

// displayName is the last element of a URI, else def.
func displayName(uri, def string) string {
	if uri == "" {
		return def
	}
	if u, err := url.Parse(uri); err == nil && u.Path != "" {
		if b := path.Base(u.Path); b != "/" && b != "." {
			return b
		}
	}
	return def
}
