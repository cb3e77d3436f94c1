package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
)

func TestResolve(t *testing.T) {
	cases := []struct {
		in, typ, name string
	}{
		{"openai/gpt-4.1", "openai", "gpt-4.1"},
		{"anthropic/claude-sonnet-4", "anthropic", "claude-sonnet-4"},
		{"openai/meta-llama/Llama-3-8B", "openai", "meta-llama/Llama-3-8B"},
		{"azure/my-deployment", "azure", "my-deployment"},
		{"echo", "echo", ""},
		{"echo/anything", "echo", "anything"},
	}
	for _, c := range cases {
		typ, name, err := provider.Resolve(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.typ, typ, c.in)
		require.Equal(t, c.name, name, c.in)
	}
	for _, bad := range []string{"", "gpt-4.1", "mistral/large", "openai", "openai/", "/gpt"} {
		_, _, err := provider.Resolve(bad)
		require.Error(t, err, bad)
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"OPENAI_API_KEY":        "sk-openai",
		"OPENAI_BASE_URL":       "http://localhost:11434/v1",
		"ANTHROPIC_API_KEY":     "sk-ant",
		"ANTHROPIC_BASE_URL":    "https://proxy.example",
		"AZURE_OPENAI_API_KEY":  "az-key",
		"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com",
		"OPENAI_API_VERSION":    "2025-01-01-preview",
	}
	getenv := func(k string) string { return env[k] }

	require.Equal(t, provider.Config{Type: "openai", APIKey: "sk-openai", BaseURL: "http://localhost:11434/v1"},
		provider.FromEnv("openai", getenv))
	require.Equal(t, provider.Config{Type: "anthropic", APIKey: "sk-ant", BaseURL: "https://proxy.example"},
		provider.FromEnv("anthropic", getenv))
	require.Equal(t, provider.Config{Type: "azure", APIKey: "az-key", BaseURL: "https://r.openai.azure.com", AzureAPIVersion: "2025-01-01-preview"},
		provider.FromEnv("azure", getenv))
	require.Equal(t, provider.Config{Type: "echo"}, provider.FromEnv("echo", getenv))
	require.Equal(t, provider.Config{Type: "openai"}, provider.FromEnv("openai", func(string) string { return "" }))
}

func TestConfigNeverPrintsKey(t *testing.T) {
	cfg := provider.Config{Type: "openai", APIKey: "sk-very-secret-key", BaseURL: "https://x"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		out := fmt.Sprintf(verb, cfg)
		require.NotContains(t, out, "sk-very-secret-key", verb)
		require.Contains(t, out, "https://x", verb)
	}
	out := fmt.Sprintf("%v", &cfg)
	require.NotContains(t, out, "sk-very-secret-key")
}

func TestStatusError(t *testing.T) {
	cases := []struct {
		status    int
		code      string
		retryable bool
	}{
		{401, provider.CodeAuth, false},
		{403, provider.CodeAuth, false},
		{429, provider.CodeRateLimited, true},
		{500, provider.CodeUnavailable, true},
		{502, provider.CodeUnavailable, true},
		{529, provider.CodeUnavailable, true},
		{400, provider.CodeBadRequest, false},
		{404, provider.CodeBadRequest, false},
		{422, provider.CodeBadRequest, false},
		{418, provider.CodeError, false},
	}
	for _, c := range cases {
		e := provider.StatusError(c.status, "")
		require.Equal(t, c.code, e.Code, c.status)
		require.Equal(t, c.retryable, e.Retryable, c.status)
		require.Equal(t, c.status, e.Status)
		require.NotEmpty(t, e.Message)
	}
	e := provider.StatusError(401, "bad key")
	require.Equal(t, "model_auth (HTTP 401): bad key", e.Error())

	wrapped := fmt.Errorf("step 2: %w", e)
	got, ok := provider.AsError(wrapped)
	require.True(t, ok)
	require.Same(t, e, got)
}

func TestTransportError(t *testing.T) {
	e := provider.TransportError("openai", &net.OpError{Op: "dial", Err: errors.New("connection refused")})
	require.Equal(t, provider.CodeUnavailable, e.Code)
	require.True(t, e.Retryable)

	e = provider.TransportError("openai", fmt.Errorf("read: %w", io.ErrUnexpectedEOF))
	require.Equal(t, provider.CodeUnavailable, e.Code)

	e = provider.TransportError("openai", errors.New("invalid character 'x'"))
	require.Equal(t, provider.CodeError, e.Code)
	require.False(t, e.Retryable)
}

func TestRedact(t *testing.T) {
	e := (&provider.Error{Code: provider.CodeAuth, Message: "Incorrect API key provided: sk-secret-123"}).Redact("sk-secret-123", "")
	require.NotContains(t, e.Message, "sk-secret-123")
	require.Contains(t, e.Message, "[redacted]")
}

func TestCanceledError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := provider.CanceledError(ctx, "echo")
	require.ErrorIs(t, err, context.Canceled)
	_, ok := provider.AsError(err)
	require.False(t, ok, "a cancel is not a model failure")
}

func TestNormalizeArguments(t *testing.T) {
	require.JSONEq(t, `{}`, string(provider.NormalizeArguments("")))
	require.JSONEq(t, `{}`, string(provider.NormalizeArguments("  ")))
	require.JSONEq(t, `{"a":1}`, string(provider.NormalizeArguments(`{"a":1}`)))
	for _, bad := range []string{`{"a":`, `[1,2]`, `"x"`, `null`} {
		out := provider.NormalizeArguments(bad)
		var m map[string]string
		require.NoError(t, json.Unmarshal(out, &m), bad)
		require.Equal(t, bad, m["_raw"])
	}
}
