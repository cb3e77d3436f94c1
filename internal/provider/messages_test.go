package provider_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/provider"
)

// What a newcomer types gets an answer that says what to type instead.
func TestResolveMessagesSayWhatToWrite(t *testing.T) {
	_, _, err := provider.Resolve("gpt-4")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "names no provider")
	assert.Contains(t, err.Error(), "openai/gpt-4")
	assert.Contains(t, err.Error(), "openai, azure, anthropic or echo")

	_, _, err = provider.Resolve("mistral/large")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown provider "mistral"`)
	assert.Contains(t, err.Error(), "openai, azure, anthropic or echo", "every provider is listed, azure too")

	_, _, err = provider.Resolve("anthropic/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "anthropic/claude")
}

func TestKeyVariableIsWhatFromEnvReads(t *testing.T) {
	for _, typ := range []string{provider.TypeOpenAI, provider.TypeAzure, provider.TypeAnthropic} {
		v := provider.KeyVariable(typ)
		require.NotEmpty(t, v, typ)
		cfg := provider.FromEnv(typ, func(k string) string {
			if k == v {
				return "the-key"
			}
			return ""
		})
		assert.Equal(t, "the-key", cfg.APIKey, typ)
	}
	assert.Empty(t, provider.KeyVariable(provider.TypeEcho))
}
