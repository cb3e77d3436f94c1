// Package provider is the seam between Tandem's agent loop and the language
// models behind it. The agent speaks one provider-neutral vocabulary (Message,
// Request, Response, Delta) and every backend (OpenAI-compatible servers, Azure
// OpenAI, Anthropic, the offline echo model) translates it to its own wire
// format. Keeping the interface this small lets the agent loop, its retries and
// its tests ignore which model is on the other end.
//
// The implementations live in sub-packages (provider/openai, provider/anthropic,
// provider/echo) and are put together by provider/registry; this package imports
// none of them so that they can import it.
package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// Provider types, as used in Config.Type and as the prefix of a model string.
const (
	TypeOpenAI    = "openai"
	TypeAzure     = "azure"
	TypeAnthropic = "anthropic"
	TypeEcho      = "echo"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Delta kinds; they match the contract's message.delta "kind".
const (
	DeltaText      = "text"
	DeltaReasoning = "reasoning"
)

// Finish reasons a model step can end with; they match the contract's finish part.
const (
	FinishEndTurn   = "end_turn"
	FinishToolUse   = "tool_use"
	FinishMaxTokens = "max_tokens"
)

// Message is one provider-neutral conversation entry.
type Message struct {
	Role       string     // "user", "assistant", "tool"
	Text       string     // user/assistant text; tool: the result content
	Images     []Image    // user only: image input
	ToolCalls  []ToolCall // assistant only
	ToolCallID string     // tool only: the call this answers
	ToolName   string     // tool only
	IsError    bool       // tool only
}

// Image is an image given to the model as input, raw bytes (not base64).
type Image struct {
	MimeType string
	Data     []byte
}

// ToolCall is one call the model asked for. Arguments is always a JSON object
// ("{}" when empty) so it can be stored and replayed as-is.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Tool is a tool offered to the model; Parameters is a JSON Schema object,
// shared by every request that offers the tool: a provider reads it only.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Request is one model step: the whole conversation so far plus the tools.
type Request struct {
	// Model is the model name as the provider knows it (the part of the session's
	// "PROVIDER/MODEL" string after the first "/"); for Azure the deployment name.
	Model string
	// ReasoningEffort is "", low, medium, high or xhigh. Providers that support
	// it pass it on (openai: reasoning_effort); the others ignore it.
	ReasoningEffort string
	// System is the whole system prompt, sent as one system message.
	System   string
	Messages []Message
	Tools    []Tool
	// MaxTokens caps the output; 0 means the provider's default.
	MaxTokens int
}

// Delta is a piece of streamed output.
type Delta struct {
	Kind string // DeltaText or DeltaReasoning
	Text string
}

// Response is the whole result of one model step once its stream has ended.
type Response struct {
	Text         string
	Reasoning    string
	ToolCalls    []ToolCall
	FinishReason string // FinishEndTurn, FinishToolUse or FinishMaxTokens
	// Usage is what the request consumed, as the provider reported it
	// (zero when it reported nothing; see Usage).
	Usage Usage
}

// Provider streams one model step. It calls onDelta for each text/reasoning
// delta as it arrives (from the calling goroutine, so onDelta needs no locking
// of its own), and returns the whole step when the stream ends. A canceled ctx
// makes Stream return promptly with an error that wraps ctx.Err(). Any other
// failure is a *Error. On an error, the Response holds nothing but the Usage
// the provider reported before the failure, if any (Anthropic counts the
// input at the start of its stream): a canceled request is billed too.
// Implementations are safe for concurrent use.
type Provider interface {
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// Config selects and configures a provider. APIKey is kept in memory only: the
// String, GoString and Format methods mask it so that logging a Config by
// accident cannot leak it.
type Config struct {
	Type            string // TypeOpenAI, TypeAzure, TypeAnthropic or TypeEcho
	BaseURL         string // "" means the provider's public default
	APIKey          string
	AzureAPIVersion string // azure only; "" means DefaultAzureAPIVersion
}

// Defaults used when a Config leaves a field empty.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// DefaultAzureAPIVersion is a GA Azure OpenAI data-plane version that
	// supports streaming chat completions with tools and image input.
	DefaultAzureAPIVersion = "2024-10-21"
)

// String describes the config without its API key.
func (c Config) String() string {
	key := "unset"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("provider.Config{Type:%q BaseURL:%q APIKey:%s AzureAPIVersion:%q}",
		c.Type, c.BaseURL, key, c.AzureAPIVersion)
}

// GoString keeps %#v from printing the API key.
func (c Config) GoString() string { return c.String() }

// Format keeps every fmt verb (%v, %+v, %s, ...) from printing the API key.
func (c Config) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, c.String()) }

// Resolve splits a model string "PROVIDER/MODEL" ("openai/gpt-4.1",
// "anthropic/claude-sonnet-4", "echo" or "echo/anything") into the provider
// type and the model name (everything after the first "/", so names such as
// "openai/meta-llama/Llama-3-8B" keep their own slashes). Only echo may omit
// the model name.
func Resolve(model string) (typ, name string, err error) {
	typ, name, slash := strings.Cut(strings.TrimSpace(model), "/")
	switch typ {
	case TypeEcho:
		return typ, name, nil
	case TypeOpenAI, TypeAzure, TypeAnthropic:
		if name == "" {
			return "", "", fmt.Errorf("model %q: missing the model name after %q (want PROVIDER/MODEL, e.g. %s)", model, typ+"/", example(typ))
		}
		return typ, name, nil
	case "":
		return "", "", fmt.Errorf("model %q: empty provider (want PROVIDER/MODEL, e.g. openai/gpt-4.1; providers: %s)", model, providerList)
	}
	if !slash {
		// "gpt-4": a model name where PROVIDER/MODEL was wanted.
		return "", "", fmt.Errorf("model %q names no provider: want PROVIDER/MODEL, e.g. openai/%s (providers: %s)", model, typ, providerList)
	}
	return "", "", fmt.Errorf("model %q: unknown provider %q (want %s)", model, typ, providerList)
}

// providerList names every provider type, for messages.
const providerList = "openai, azure, anthropic or echo"

func example(typ string) string {
	switch typ {
	case TypeAnthropic:
		return "anthropic/claude-sonnet-4-5"
	case TypeAzure:
		return "azure/DEPLOYMENT"
	}
	return "openai/gpt-4.1"
}

// KeyVariable is the environment variable FromEnv reads typ's API key from:
// what to tell a user whose model refused a request without a key. It is ""
// for echo, which needs none.
func KeyVariable(typ string) string {
	switch typ {
	case TypeOpenAI:
		return "OPENAI_API_KEY"
	case TypeAzure:
		return "AZURE_OPENAI_API_KEY"
	case TypeAnthropic:
		return "ANTHROPIC_API_KEY"
	}
	return ""
}

// FromEnv fills a Config for typ from the environment through getenv
// (os.Getenv when nil; tests pass a map lookup so they need no real env):
//   - openai: OPENAI_API_KEY, OPENAI_BASE_URL
//   - azure: AZURE_OPENAI_API_KEY, AZURE_OPENAI_ENDPOINT, OPENAI_API_VERSION
//     (the names the official OpenAI SDKs read for Azure)
//   - anthropic: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
//   - echo and anything else: only Type is set.
func FromEnv(typ string, getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg := Config{Type: typ}
	switch typ {
	case TypeOpenAI:
		cfg.APIKey = strings.TrimSpace(getenv(KeyVariable(typ)))
		cfg.BaseURL = strings.TrimSpace(getenv("OPENAI_BASE_URL"))
	case TypeAzure:
		cfg.APIKey = strings.TrimSpace(getenv(KeyVariable(typ)))
		cfg.BaseURL = strings.TrimSpace(getenv("AZURE_OPENAI_ENDPOINT"))
		cfg.AzureAPIVersion = strings.TrimSpace(getenv("OPENAI_API_VERSION"))
	case TypeAnthropic:
		cfg.APIKey = strings.TrimSpace(getenv(KeyVariable(typ)))
		cfg.BaseURL = strings.TrimSpace(getenv("ANTHROPIC_BASE_URL"))
	}
	return cfg
}

// NormalizeArguments turns the argument text a model produced into a JSON
// object, because ToolCall.Arguments is stored and re-sent verbatim and a
// malformed json.RawMessage would break every later marshal of the history.
// Empty input becomes "{}"; anything that is not a JSON object is kept, as a
// string, under the key "_raw" so the tool can report what went wrong and the
// model can try again.
func NormalizeArguments(raw string) json.RawMessage {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trimmed), &obj); err == nil && obj != nil {
		return json.RawMessage(trimmed)
	}
	wrapped, _ := json.Marshal(map[string]string{"_raw": raw})
	return wrapped
}

// Bounds of DefaultHTTPClient's transport.
const (
	// responseHeaderTimeout bounds the wait for a server that accepted the
	// connection but never answers; a streaming server sends its headers
	// at once.
	responseHeaderTimeout = 5 * time.Minute
	// maxIdleConnsPerHost is how many connections to one model server wait
	// idle for the next request: each session streaming at once holds one,
	// so this many sessions can take turns without a new handshake (the
	// default transport keeps 2).
	maxIdleConnsPerHost = 32
	// maxIdleConns bounds the idle connections of one client in all.
	maxIdleConns = 64
	// idleConnTimeout closes a connection nobody used for that long.
	idleConnTimeout = 90 * time.Second
)

// DefaultHTTPClient makes a new HTTP client for providers: the default
// transport's settings (proxy from the environment, dial and TLS timeouts,
// HTTP/2) with a bound on the wait for response headers and on the
// connections it keeps idle. Each call makes a new transport and a new
// pool of connections: share the client (package registry does) rather
// than make one per request. Its waits let go of the calling run's compute
// slot (PauseTransport).
func DefaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{Transport: PauseTransport(nil)}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = responseHeaderTimeout
	t.MaxIdleConns = maxIdleConns
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.IdleConnTimeout = idleConnTimeout
	return &http.Client{Transport: PauseTransport(t)}
}
