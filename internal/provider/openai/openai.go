// Package openai is the provider for any OpenAI-compatible Chat Completions API
// with streaming: OpenAI itself, Azure OpenAI, Ollama, vLLM, llama.cpp,
// OpenRouter and the like. It uses the official openai-go SDK.
//
// The SDK's own retries are off: the agent loop retries Retryable errors itself
// so that each attempt shows up in the session's log.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tandem-dev/tandem/internal/provider"
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

// Provider streams chat completions from an OpenAI-compatible server, or from
// an Azure OpenAI resource when the Config's Type is "azure".
type Provider struct {
	name       string // "openai" or "azure", for messages
	apiKey     string
	baseURL    string
	azure      bool
	apiVersion string
	httpClient *http.Client
	cache      *provider.EncodeCache
	chat       sdk.ChatCompletionService
}

var _ provider.Provider = (*Provider)(nil)

// New builds a provider from cfg. Type "azure" needs a BaseURL: the resource
// endpoint, e.g. https://NAME.openai.azure.com; the request's Model is then the
// deployment name.
func New(cfg provider.Config, opts ...Option) (*Provider, error) {
	p := &Provider{
		name:       provider.TypeOpenAI,
		apiKey:     strings.TrimSpace(cfg.APIKey),
		baseURL:    strings.TrimSpace(cfg.BaseURL),
		azure:      cfg.Type == provider.TypeAzure,
		apiVersion: strings.TrimSpace(cfg.AzureAPIVersion),
	}
	for _, o := range opts {
		o(p)
	}
	if p.httpClient == nil {
		p.httpClient = provider.DefaultHTTPClient()
	}
	if p.azure {
		p.name = provider.TypeAzure
		if p.baseURL == "" {
			return nil, errors.New("azure provider: base_url (the resource endpoint, e.g. https://NAME.openai.azure.com) is required")
		}
		if p.apiVersion == "" {
			p.apiVersion = provider.DefaultAzureAPIVersion
		}
	} else if p.baseURL == "" {
		p.baseURL = provider.DefaultOpenAIBaseURL
	}
	if u, err := url.Parse(p.baseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s provider: base_url %q is not an http(s) URL", p.name, p.baseURL)
	}

	// NewChatCompletionService rather than NewClient: NewClient also reads
	// OPENAI_* variables from the process environment, and a session's own
	// provider must never pick up (and send to its own base URL) the server's key.
	clientOpts := []option.RequestOption{
		option.WithHTTPClient(p.httpClient),
		option.WithMaxRetries(0),
	}
	if p.azure {
		// Azure wants the deployment in the path, api-version in the query and
		// the key in an api-key header; openai-go's azure helper package does the
		// same but pulls the Azure SDK (azcore) into the module, so it is done
		// here with plain options. The per-request base URL is set in Stream.
		clientOpts = append(clientOpts, option.WithQuery("api-version", p.apiVersion))
		if p.apiKey != "" {
			clientOpts = append(clientOpts, option.WithHeader("api-key", p.apiKey))
		}
	} else {
		clientOpts = append(clientOpts, option.WithBaseURL(p.baseURL))
		if p.apiKey != "" {
			clientOpts = append(clientOpts, option.WithAPIKey(p.apiKey))
		}
	}
	p.chat = sdk.NewChatCompletionService(clientOpts...)
	return p, nil
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, onDelta func(provider.Delta)) (provider.Response, error) {
	if onDelta == nil {
		onDelta = func(provider.Delta) {}
	}
	if err := ctx.Err(); err != nil {
		return provider.Response{}, provider.CanceledError(ctx, p.name)
	}
	body, err := p.body(req)
	if err != nil {
		return provider.Response{}, &provider.Error{Code: provider.CodeBadRequest, Message: p.name + ": " + err.Error()}
	}
	// The body replaces the (empty) params' encoding; the SDK then sets
	// "stream": true in it as it would in its own (see
	// provider.StreamFirst).
	reqOpts := []option.RequestOption{option.WithRequestBody("application/json", body)}
	if p.azure {
		reqOpts = append(reqOpts, option.WithBaseURL(azureDeploymentURL(p.baseURL, req.Model)))
	}

	stream := p.chat.NewStreaming(ctx, sdk.ChatCompletionNewParams{}, reqOpts...)
	defer func() { _ = stream.Close() }()
	resp, err := p.consume(ctx, stream, onDelta)
	if err != nil {
		return provider.Response{}, err
	}
	return resp, nil
}

// azureDeploymentURL is the base the SDK appends "chat/completions" to.
func azureDeploymentURL(endpoint, deployment string) string {
	return strings.TrimRight(endpoint, "/") + "/openai/deployments/" + url.PathEscape(deployment) + "/"
}

// toolCallAcc gathers one streamed tool call; the API sends its id and name
// in the first fragment and its arguments as string pieces, keyed by index.
type toolCallAcc struct {
	id, name string
	args     strings.Builder
}

func (p *Provider) consume(ctx context.Context, stream *ssestream.Stream[sdk.ChatCompletionChunk], onDelta func(provider.Delta)) (provider.Response, error) {
	var (
		text, reasoning strings.Builder
		calls           = map[int64]*toolCallAcc{}
		finish          string
		usage           provider.Usage
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			// With include_usage the last chunk, whose choices are empty,
			// carries the whole request's usage; the others carry null.
			usage = usageOf(chunk.Usage)
		}
		for _, choice := range chunk.Choices {
			// Tandem never asks for n>1, so only the first choice matters.
			if choice.Index != 0 {
				continue
			}
			d := choice.Delta
			if r := reasoningText(d); r != "" {
				reasoning.WriteString(r)
				onDelta(provider.Delta{Kind: provider.DeltaReasoning, Text: r})
			}
			if d.Content != "" {
				text.WriteString(d.Content)
				onDelta(provider.Delta{Kind: provider.DeltaText, Text: d.Content})
			}
			for _, tc := range d.ToolCalls {
				acc := calls[tc.Index]
				if acc == nil {
					acc = &toolCallAcc{}
					calls[tc.Index] = acc
				}
				if tc.ID != "" && acc.id == "" {
					acc.id = tc.ID
				}
				if tc.Function.Name != "" && acc.name == "" {
					acc.name = tc.Function.Name
				}
				acc.args.WriteString(tc.Function.Arguments)
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return provider.Response{Usage: usage}, provider.CanceledError(ctx, p.name)
		}
		return provider.Response{Usage: usage}, p.mapError(err)
	}
	if ctx.Err() != nil {
		return provider.Response{Usage: usage}, provider.CanceledError(ctx, p.name)
	}
	if finish == "" {
		// The SDK treats a clean EOF like [DONE]; only finish_reason proves the
		// model got to the end of its answer.
		return provider.Response{Usage: usage}, provider.TruncatedError(p.name)
	}

	resp := provider.Response{Text: text.String(), Reasoning: reasoning.String(), Usage: usage}
	indexes := make([]int64, 0, len(calls))
	for i := range calls {
		indexes = append(indexes, i)
	}
	sort.Slice(indexes, func(a, b int) bool { return indexes[a] < indexes[b] })
	for n, i := range indexes {
		acc := calls[i]
		id := acc.id
		if id == "" {
			// Some local servers omit ids; the agent needs one to pair results.
			id = fmt.Sprintf("call_%d", n+1)
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{
			ID:        id,
			Name:      acc.name,
			Arguments: provider.NormalizeArguments(acc.args.String()),
		})
	}
	resp.FinishReason = mapFinish(finish, len(resp.ToolCalls) > 0)
	return resp, nil
}

// usageOf maps Chat Completions usage, whose convention is Usage's own:
// cached and reasoning tokens are parts of the prompt and completion counts.
func usageOf(u sdk.CompletionUsage) provider.Usage {
	return provider.Usage{
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
	}
}

// mapFinish maps OpenAI finish reasons. A step with tool calls is a tool_use
// step whatever the server said, because some servers (older Ollama, some
// vLLM parsers) report "stop" after emitting tool calls; a "tool_calls" finish
// without any call has nothing to run and so ends the turn.
func mapFinish(reason string, hasCalls bool) string {
	switch {
	case reason == "length":
		return provider.FinishMaxTokens
	case hasCalls:
		return provider.FinishToolUse
	default: // "stop", "content_filter", anything new
		return provider.FinishEndTurn
	}
}

// reasoningText reads the reasoning a server streams outside the official
// schema: "reasoning_content" (DeepSeek, vLLM, llama.cpp) or "reasoning"
// (OpenRouter, newer vLLM, Ollama).
func reasoningText(d sdk.ChatCompletionChunkChoiceDelta) string {
	for _, key := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[key]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(f.Raw()), &s); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// historyMarker stands for the history in the encoding of a request's other
// parameters; a JSON string cannot hold the encoding of a message, so the
// marker's can only be found where the marker message is.
const historyMarker = "\x00tandem: the conversation goes here\x00"

// encodeFormat names this package's encoding of a message in the cache.
const encodeFormat = "openai-chat"

// body is the JSON the SDK would make of buildParams(req), byte for byte,
// made of the parameters without the history and of the history's messages,
// each encoded once and then taken from the cache.
func (p *Provider) body(req provider.Request) ([]byte, error) {
	if len(req.Messages) == 0 {
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
	encs, i, err := p.cache.EncodeAll(encodeFormat, req.Messages, encodeMessage)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", i, err)
	}
	size := len(prefix) + len(suffix) + len(encs)
	for _, enc := range encs {
		size += len(enc)
	}
	out := make([]byte, 0, size)
	out = append(out, prefix...)
	for i, enc := range encs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return append(out, suffix...), nil
}

// encodeHead encodes req (without messages) as the SDK would, split where
// its messages go: it encodes the request with one marker message, and
// cuts the marker out.
func encodeHead(req provider.Request) (prefix, suffix []byte, err error) {
	req.Messages = []provider.Message{{Role: provider.RoleUser, Text: historyMarker}}
	params, err := buildParams(req)
	if err != nil {
		return nil, nil, err
	}
	whole, err := params.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	mark, err := encodeMessage(req.Messages[0])
	if err != nil {
		return nil, nil, err
	}
	if prefix, suffix, err = provider.SplitAround(whole, mark); err != nil {
		return nil, nil, err
	}
	prefix, err = provider.StreamFirst(prefix)
	return prefix, suffix, err
}

// encodeMessage is the JSON of one message as the SDK encodes it within
// the request.
func encodeMessage(m provider.Message) ([]byte, error) {
	msg, err := convertMessage(m)
	if err != nil {
		return nil, err
	}
	return msg.MarshalJSON()
}

// buildParams translates the neutral request to Chat Completions parameters.
func buildParams(req provider.Request) (sdk.ChatCompletionNewParams, error) {
	if strings.TrimSpace(req.Model) == "" {
		return sdk.ChatCompletionNewParams{}, errors.New("no model name given")
	}
	params := sdk.ChatCompletionNewParams{
		Model: req.Model,
		// Usage comes in a last chunk only when asked for. Servers that do
		// not know the option (it is years old; Ollama, vLLM, llama.cpp and
		// Azure since 2024-10-21 take it) answer without usage.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msg, err := convertMessage(m)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		schema, err := schemaMap(t.Parameters)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		fn.Parameters = schema
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.MaxTokens > 0 {
		// max_completion_tokens, not the deprecated max_tokens, which OpenAI's
		// reasoning models reject.
		params.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
	}
	if req.ReasoningEffort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	return params, nil
}

func convertMessage(m provider.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case provider.RoleUser:
		if len(m.Images) == 0 {
			return sdk.UserMessage(m.Text), nil
		}
		var parts []sdk.ChatCompletionContentPartUnionParam
		if m.Text != "" {
			parts = append(parts, sdk.TextContentPart(m.Text))
		}
		for _, img := range m.Images {
			parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
				URL: "data:" + img.MimeType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
			}))
		}
		return sdk.UserMessage(parts), nil
	case provider.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		if m.Text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Text)
		}
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: args,
					},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case provider.RoleTool:
		content := m.Text
		if m.IsError {
			// Chat Completions has no error flag on tool results; say it in words.
			content = "Error: " + content
		}
		return sdk.ToolMessage(content, m.ToolCallID), nil
	default:
		return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

// schemaMap decodes a tool's JSON Schema; an empty one becomes an object
// schema without properties, which every server accepts.
func schemaMap(raw json.RawMessage) (shared.FunctionParameters, error) {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	return m, nil
}

// mapError turns SDK and transport errors into *provider.Error, with the API
// key scrubbed from the message in case the server echoed it.
func (p *Provider) mapError(err error) *provider.Error {
	var apiErr *sdk.Error
	var streamErr *ssestream.StreamError
	var out *provider.Error
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Message
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		out = provider.APIError(apiErr.StatusCode, header, apiErr.Code, p.name+": "+msg)
	case errors.As(err, &streamErr):
		// An error object sent inside a 200 stream (OpenRouter, vLLM do this
		// for upstream failures): the status is in the object when there is one.
		out = streamEventError(p.name, streamErr.Event.Data)
	default:
		out = provider.TransportError(p.name, err)
	}
	return out.Redact(p.apiKey)
}

// streamEventError maps a {"error": {...}} SSE payload.
func streamEventError(name string, data []byte) *provider.Error {
	var body struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &body)
	msg := body.Error.Message
	if msg == "" {
		msg = "the server sent an error in the stream"
	}
	if status, ok := body.Error.Code.(float64); ok && status >= 400 && status < 600 {
		return provider.StatusError(int(status), name+": "+msg)
	}
	if code, _ := body.Error.Code.(string); code == "context_length_exceeded" {
		e := provider.APIError(http.StatusBadRequest, nil, code, name+": "+msg)
		e.Status = 0 // the HTTP status was 200; the code carries the meaning
		return e
	}
	switch body.Error.Type {
	case "rate_limit_exceeded", "rate_limit_error":
		return provider.StatusError(http.StatusTooManyRequests, name+": "+msg)
	case "server_error", "overloaded_error", "api_error":
		e := provider.StatusError(http.StatusServiceUnavailable, name+": "+msg)
		e.Status = 0
		return e
	}
	return &provider.Error{Code: provider.CodeError, Message: name + ": " + msg}
}
