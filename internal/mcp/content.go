package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText is a call's text content for the model: text parts joined by
// line breaks, other parts named in brackets (the model cannot read them),
// the structured result when there is no content, cut at max bytes.
func resultText(r *sdk.CallToolResult, max int) string {
	var parts []string
	for _, c := range r.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes: not shown]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes: not shown]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s]", c.URI))
		case *sdk.EmbeddedResource:
			switch {
			case c.Resource == nil:
			case c.Resource.Text != "":
				parts = append(parts, c.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %d bytes: not shown]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content: not shown]", c))
		}
	}
	if len(parts) == 0 && r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return cut(strings.ToValidUTF8(strings.Join(parts, "\n"), "\uFFFD"), max)
}

// cut bounds s to about max bytes, on a rune boundary, saying how much was cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s\n[cut: %d of %d bytes not shown]", s[:n], len(s)-n, len(s))
}
