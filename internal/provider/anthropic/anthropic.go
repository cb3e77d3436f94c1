// Package anthropic is the provider for Anthropic's Messages API, with
// streaming, tool use, image input and thinking deltas. It uses the official
// anthropic-sdk-go SDK.
//
// The SDK's own retries are off: the agent loop retries Retryable errors itself
// so that each attempt shows up in the session's log.
//
// Request.ReasoningEffort is ignored: extended thinking would require sending
// the signed thinking blocks back with every tool result, and the neutral
// history does not carry them. Thinking the server streams anyway is still
// reported as reasoning deltas.
package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tandem-dev/tandem/internal/provider"
)

const (
	name = provider.TypeAnthropic
	// DefaultMaxTokens is used when the request leaves MaxTokens at 0: the
	// Messages API requires a value.
	DefaultMaxTokens = 8192
)

// Option tunes a Provider.
type Option func(*Provider)

// WithHTTPClient makes the provider use c (for proxies, custom TLS or tests).
func WithHTTPClient(c *http.Client) Option {
	return func(p *Provider) {
		if c != nil {
			p.httpClient = c
		}
	}
}

// WithEncodeCache makes the provider keep the encodings of the messages it
// sends in c, shared with every provider given the same cache, so that each
// model step encodes only the messages the previous steps did not send.
func WithEncodeCache(c *provider.EncodeCache) Option {
	return func(p *Provider) { p.cache = c }
}

// Provider streams messages from the Anthropic Messages API.
type Provider struct {
	apiKey     string
	httpClient *http.Client
	cache      *provider.EncodeCache
	messages   sdk.MessageService
}

var _ provider.Provider = (*Provider)(nil)

// New builds a provider from cfg (BaseURL "" means the public API).
func New(cfg provider.Config, opts ...Option) (*Provider, error) {
	p := &Provider{apiKey: strings.TrimSpace(cfg.APIKey)}
	for _, o := range opts {
		o(p)
	}
	if p.httpClient == nil {
		p.httpClient = provider.DefaultHTTPClient()
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = provider.DefaultAnthropicBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic provider: base_url %q is not an http(s) URL", base)
	}
	// NewMessageService rather than NewClient: NewClient also reads ANTHROPIC_*
	// variables and profile files, and a session's own provider must never
	// pick up (and send to its own base URL) the server's credentials.
	clientOpts := []option.RequestOption{
		option.WithHTTPClient(p.httpClient),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if p.apiKey != "" {
		clientOpts = append(clientOpts, option.WithAPIKey(p.apiKey))
	}
	p.messages = sdk.NewMessageService(clientOpts...)
	return p, nil
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
	if onDelta == nil {
		onDelta = func(provider.Delta) {}
	}
	if ctx.Err() != nil {
		return provider.Response{}, provider.CanceledError(ctx, name)
	}
	body, err := p.body(req)
	if err != nil {
		return provider.Response{}, &provider.Error{Code: provider.CodeBadRequest, Message: name + ": " + err.Error()}
	}
	// The body replaces the encoding of the params, which carry only what
	// the SDK reads of them besides (its telemetry's model and limit); it
	// then adds "stream": true to the body as it would to its own.
	meta := sdk.MessageNewParams{Model: sdk.Model(req.Model), MaxTokens: maxTokensOf(req)}
	stream := p.messages.NewStreaming(ctx, meta, option.WithRequestBody("application/json", body))
	defer func() { _ = stream.Close() }()

	var (
		msg     sdk.Message
		stopped bool
	)
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return provider.Response{}, &provider.Error{Code: provider.CodeError, Message: name + ": malformed stream: " + err.Error()}
		}
		switch ev.Type {
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					onDelta(provider.Delta{Kind: provider.DeltaText, Text: ev.Delta.Text})
				}
			case "thinking_delta":
				if ev.Delta.Thinking != "" {
					onDelta(provider.Delta{Kind: provider.DeltaReasoning, Text: ev.Delta.Thinking})
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	// What message_start counted is billed even when the stream fails.
	partial := provider.Response{Usage: usageOf(msg.Usage)}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return partial, provider.CanceledError(ctx, name)
		}
		return partial, p.mapError(err)
	}
	if ctx.Err() != nil {
		return partial, provider.CanceledError(ctx, name)
	}
	if !stopped {
		// A clean EOF without message_stop is a cut connection, not an answer.
		return partial, provider.TruncatedError(name)
	}
	return toResponse(msg), nil
}

// usageOf maps the Messages API's usage to Usage's convention, where the
// input count includes the cached tokens: Anthropic counts cache reads and
// writes apart from input_tokens. message_start reports the input (and an
// output of a token or so); message_delta then reports cumulative totals,
// which msg.Accumulate keeps.
func usageOf(u sdk.Usage) provider.Usage {
	return provider.Usage{
		InputTokens:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		ReasoningTokens:  u.OutputTokensDetails.ThinkingTokens,
	}
}

func toResponse(msg sdk.Message) provider.Response {
	var resp provider.Response
	var text, reasoning strings.Builder
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "thinking":
			reasoning.WriteString(block.Thinking)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{
				ID:        block.ID,
				Name:      block.Name,
				Arguments: provider.NormalizeArguments(string(block.Input)),
			})
		}
	}
	resp.Text, resp.Reasoning = text.String(), reasoning.String()
	resp.Usage = usageOf(msg.Usage)
	switch msg.StopReason {
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		resp.FinishReason = provider.FinishMaxTokens
	case sdk.StopReasonToolUse:
		resp.FinishReason = provider.FinishToolUse
	default: // end_turn, stop_sequence, pause_turn, refusal
		resp.FinishReason = provider.FinishEndTurn
	}
	// The agent loop runs tools only on tool_use; a call the model made is a
	// call to run whatever the stop reason claims, unless it was cut short.
	if len(resp.ToolCalls) > 0 && resp.FinishReason == provider.FinishEndTurn {
		resp.FinishReason = provider.FinishToolUse
	}
	return resp
}

// historyMarker stands for the history in the encoding of a request's other
// parameters; a JSON string cannot hold the encoding of a turn, so the
// marker's can only be found where the marker turn is.
const historyMarker = "\x00tandem: the conversation goes here\x00"

// encodeFormat names this package's encoding of a message in the cache: the
// comma-separated JSON of its content blocks.
const encodeFormat = "anthropic-blocks"

// body is the JSON the SDK would make of buildParams(req), byte for byte,
// made of the parameters without the history and of the history's
// messages' blocks, each encoded once and then taken from the cache.
func (p *Provider) body(req provider.Request) ([]byte, error) {
	type part struct {
		role sdk.MessageParamRole
		enc  []byte
	}
	encs, at, err := p.cache.EncodeAll(encodeFormat, req.Messages, encodeBlocks)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", at, err)
	}
	parts := make([]part, 0, len(req.Messages))
	size := 0
	for i, enc := range encs {
		if len(enc) > 0 {
			role := sdk.MessageParamRoleUser // of prompts and tool results
			if req.Messages[i].Role == provider.RoleAssistant {
				role = sdk.MessageParamRoleAssistant
			}
			parts = append(parts, part{role, enc})
			size += len(enc) + 1
		}
	}
	if len(parts) == 0 {
		params, err := buildParams(req)
		if err != nil {
			return nil, err
		}
		return params.MarshalJSON()
	}
	prefix, suffix, err := p.cache.Head(encodeFormat, req, encodeHead)
	if err != nil {
		return nil, err
	}
	marker := sdk.NewTextBlock(historyMarker)
	// A turn's encoding is its blocks between what comes before and
	// after a block in the encoding of a turn of one block.
	wrap := map[sdk.MessageParamRole][2][]byte{}
	markBlock, err := marker.MarshalJSON()
	if err != nil {
		return nil, err
	}
	for _, role := range []sdk.MessageParamRole{sdk.MessageParamRoleUser, sdk.MessageParamRoleAssistant} {
		turn, err := sdk.MessageParam{Role: role, Content: []sdk.ContentBlockParamUnion{marker}}.MarshalJSON()
		if err != nil {
			return nil, err
		}
		i := bytes.Index(turn, markBlock)
		if i < 0 {
			return nil, errors.New("encoding the request: a turn's blocks were not found")
		}
		wrap[role] = [2][]byte{turn[:i], turn[i+len(markBlock):]}
		size += len(turn)
	}

	out := make([]byte, 0, len(prefix)+len(suffix)+size+len(parts)*len(wrap[sdk.MessageParamRoleUser][0]))
	out = append(out, prefix...)
	for i, pt := range parts {
		switch {
		case i == 0:
			out = append(out, wrap[pt.role][0]...)
		case parts[i-1].role == pt.role:
			// Adjacent messages of one role make one turn.
			out = append(out, ',')
		default:
			out = append(out, wrap[parts[i-1].role][1]...)
			out = append(out, ',')
			out = append(out, wrap[pt.role][0]...)
		}
		out = append(out, pt.enc...)
	}
	out = append(out, wrap[parts[len(parts)-1].role][1]...)
	return append(out, suffix...), nil
}

// encodeHead encodes req (without messages) as the SDK would, split where
// its messages go: it encodes the request with one marker turn, and cuts
// the turn out.
func encodeHead(req provider.Request) (prefix, suffix []byte, err error) {
	params, err := buildParams(req)
	if err != nil {
		return nil, nil, err
	}
	params.Messages = []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(historyMarker))}
	whole, err := params.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	mark, err := params.Messages[0].MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	if prefix, suffix, err = provider.SplitAround(whole, mark); err != nil {
		return nil, nil, err
	}
	// See provider.StreamFirst: the SDK sets "stream" in the body.
	prefix, err = provider.StreamFirst(prefix)
	return prefix, suffix, err
}

// encodeBlocks is the JSON of m's content blocks as the SDK encodes them
// within a turn, separated by commas; empty when m has none.
func encodeBlocks(m provider.Message) ([]byte, error) {
	_, blocks, err := blocksOf(m)
	if err != nil {
		return nil, err
	}
	var out []byte
	for i, b := range blocks {
		enc, err := b.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return out, nil
}

// maxTokensOf is the request's output limit: the Messages API requires one.
func maxTokensOf(req provider.Request) int64 {
	if req.MaxTokens <= 0 {
		return DefaultMaxTokens
	}
	return int64(req.MaxTokens)
}

// buildParams translates the neutral request to Messages API parameters.
func buildParams(req provider.Request) (sdk.MessageNewParams, error) {
	if strings.TrimSpace(req.Model) == "" {
		return sdk.MessageNewParams{}, errors.New("no model name given")
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: maxTokensOf(req),
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	msgs, err := convertMessages(req.Messages)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	params.Messages = msgs
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return sdk.MessageNewParams{}, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		tool := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return params, nil
}

// convertMessages builds the Messages API turns. Tool results travel as
// tool_result blocks in a user turn, and adjacent turns of the same role are
// merged, because the API wants every result of one assistant turn in the very
// next user turn. Empty text is dropped: the API rejects empty text blocks.
func convertMessages(in []provider.Message) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	for i, m := range in {
		role, blocks, err := blocksOf(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	return out, nil
}

// blocksOf is the role of the turn m goes to and its content blocks.
func blocksOf(m provider.Message) (sdk.MessageParamRole, []sdk.ContentBlockParamUnion, error) {
	var blocks []sdk.ContentBlockParamUnion
	switch m.Role {
	case provider.RoleUser:
		for _, img := range m.Images {
			blocks = append(blocks, sdk.NewImageBlockBase64(img.MimeType, base64.StdEncoding.EncodeToString(img.Data)))
		}
		if m.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Text))
		}
		return sdk.MessageParamRoleUser, blocks, nil
	case provider.RoleAssistant:
		if m.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Text))
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if len(strings.TrimSpace(string(args))) == 0 {
				args = json.RawMessage("{}")
			}
			blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, args, tc.Name))
		}
		return sdk.MessageParamRoleAssistant, blocks, nil
	case provider.RoleTool:
		result := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID, IsError: sdk.Bool(m.IsError)}
		if m.Text != "" {
			result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Text}}}
		}
		return sdk.MessageParamRoleUser, append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &result}), nil
	}
	return "", nil, fmt.Errorf("unknown role %q", m.Role)
}

// inputSchema splits a JSON Schema object into the SDK's typed fields and the
// rest (definitions, additionalProperties...), which go through ExtraFields.
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	var schema sdk.ToolInputSchemaParam
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		schema.Properties = map[string]any{}
		return schema, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return schema, fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	if props, ok := m["properties"]; ok {
		schema.Properties = props
	} else {
		schema.Properties = map[string]any{}
	}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				schema.Required = append(schema.Required, s)
			}
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required":
			continue
		}
		if schema.ExtraFields == nil {
			schema.ExtraFields = map[string]any{}
		}
		schema.ExtraFields[k] = v
	}
	return schema, nil
}

// mapError turns SDK and transport errors into *provider.Error, with the API
// key scrubbed from the message in case the server echoed it. The SDK's own
// error text is not used: it quotes the whole response body.
func (p *Provider) mapError(err error) *provider.Error {
	var apiErr *sdk.Error
	var out *provider.Error
	if errors.As(err, &apiErr) {
		msg := apiMessage(apiErr.RawJSON())
		status := apiErr.StatusCode
		if status == 0 || status < 400 {
			// An "error" event inside a 200 stream: only its type says what broke.
			out = typedError(string(apiErr.Type()), msg)
		} else {
			var header http.Header
			if apiErr.Response != nil {
				header = apiErr.Response.Header
			}
			out = provider.APIError(status, header, "", name+": "+orStatus(msg, status))
		}
	} else {
		out = provider.TransportError(name, err)
	}
	return out.Redact(p.apiKey)
}

func orStatus(msg string, status int) string {
	if msg != "" {
		return msg
	}
	return http.StatusText(status)
}

// typedError maps the error type of an in-stream error event.
func typedError(typ, msg string) *provider.Error {
	if msg == "" {
		msg = "the server sent an error in the stream"
	}
	msg = name + ": " + msg
	var e *provider.Error
	switch typ {
	case "overloaded_error", "api_error", "timeout_error":
		e = provider.StatusError(http.StatusServiceUnavailable, msg)
	case "rate_limit_error":
		e = provider.StatusError(http.StatusTooManyRequests, msg)
	case "authentication_error", "permission_error":
		e = provider.StatusError(http.StatusUnauthorized, msg)
	case "invalid_request_error", "not_found_error":
		e = provider.StatusError(http.StatusBadRequest, msg)
	default:
		return &provider.Error{Code: provider.CodeError, Message: msg}
	}
	e.Status = 0 // the HTTP status was 200; the code carries the meaning
	return e
}

// apiMessage extracts error.message from an Anthropic error body.
func apiMessage(raw string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil {
		return ""
	}
	return body.Error.Message
}
