package api_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/api"
	"github.com/tandem-dev/tandem/internal/httpapi"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	require.NoError(t, err)
	return doc
}

// The document loads as OpenAPI 3.1 and passes kin-openapi's validation with
// every check on: examples and defaults against their schemas, formats and
// patterns, and all errors at once rather than the first.
func TestSpecIsValidOpenAPI31(t *testing.T) {
	doc := load(t)
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	assert.True(t, doc.IsOpenAPI31OrLater())
	err := doc.Validate(context.Background(),
		openapi3.EnableMultiError(),
		openapi3.EnableExamplesValidation(),
		openapi3.EnableSchemaDefaultsValidation(),
		openapi3.EnableSchemaFormatValidation(),
		openapi3.EnableSchemaPatternValidation(),
		openapi3.ProhibitExtensionsWithRef(),
	)
	require.NoError(t, err)
}

// chiParam matches a path parameter of either syntax, so chi's {wid} and the
// spec's {workspace_id} compare equal.
var chiParam = regexp.MustCompile(`\{[^}]*\}`)

func normalize(method, pattern string) string {
	pattern = chiParam.ReplaceAllString(pattern, "{}")
	if len(pattern) > 1 {
		pattern = strings.TrimSuffix(pattern, "/")
	}
	return method + " " + pattern
}

// Every route the server registers is in the spec, and every operation of the
// spec is a route of the server.
func TestSpecCoversEveryRouteAndNothingElse(t *testing.T) {
	h := httpapi.New(httpapi.Config{}).Handler()
	routes, ok := h.(chi.Routes)
	require.True(t, ok, "httpapi's handler is a chi router")
	served := map[string]bool{}
	require.NoError(t, chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		served[normalize(method, route)] = true
		return nil
	}))

	documented := map[string]bool{}
	for path, item := range load(t).Paths.Map() {
		for method := range item.Operations() {
			documented[normalize(method, path)] = true
		}
	}
	assert.Equal(t, sorted(served), sorted(documented), "server routes (left) and spec operations (right) differ")
	assert.Len(t, documented, 41) // 27 of v1.1, 5 of section 9 (me, tokens x3, audit), 6 of section 11, 2 sign-in codes, forget a workspace
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Clip(out)
}

// Every event type of the contract's table has its variant in Event's
// discriminator mapping, with its data schema under components.
func TestEveryEventTypeHasADataSchema(t *testing.T) {
	doc := load(t)
	event := doc.Components.Schemas["Event"]
	require.NotNil(t, event)
	require.NotNil(t, event.Value.Discriminator)
	mapping := event.Value.Discriminator.Mapping
	for typ, data := range eventData {
		ref, ok := mapping[typ]
		if !assert.True(t, ok, "Event has a variant for %s", typ) {
			continue
		}
		name := strings.TrimPrefix(ref.Ref, "#/components/schemas/")
		variant := doc.Components.Schemas[name]
		require.NotNil(t, variant, "%s: %s exists", typ, name)
		d := variant.Value.Properties["data"]
		require.NotNil(t, d, "%s: %s has a data property", typ, name)
		assert.Equal(t, "#/components/schemas/"+data, d.Ref, "%s: data schema", typ)
		assert.NotNil(t, doc.Components.Schemas[data], "%s: %s exists", typ, data)
	}
	assert.Len(t, mapping, len(eventData), "no event type beyond the contract's")
}

// eventData is the contract's table of event types and their data, by the
// name of the data schema in components/schemas.
var eventData = map[string]string{
	"session.created":              "Session",
	"session.updated":              "Session",
	"session.deleted":              "SessionDeleted",
	"session.started":              "SessionStarted",
	"session.resumed":              "SessionResumed",
	"session.model_changed":        "SessionModelChanged",
	"session.log":                  "SessionLog",
	"session.idle":                 "Empty",
	"run.accepted":                 "RunAccepted",
	"run.started":                  "RunStarted",
	"run.completed":                "RunCompleted",
	"session.compaction_started":   "CompactionStarted",
	"session.compaction_completed": "CompactionCompleted",
	"session.rewound":              "SessionRewound",
	"message.created":              "Message",
	"message.updated":              "Message",
	"message.delta":                "MessageDelta",
	"tool.started":                 "ToolStarted",
	"tool.finished":                "ToolFinished",
	"permission.requested":         "PermissionRequest",
	"permission.resolved":          "PermissionResolved",
	"tool.requested":               "ToolCallRequest",
	"tool.resolved":                "ToolResolved",
	"client.attached":              "ClientPresence",
	"client.detached":              "ClientPresence",
	"workspace.closing":            "WorkspaceClosing",
	"mcp.server_status":            "McpServerStatus",
}
