// Package api holds Tandem's OpenAPI 3.1 description of the HTTP API, the
// document the server serves at GET /v1/openapi.yaml. Tests in this package and
// in e2e check it against the server's router and its traffic, so it cannot
// drift from what the server does.
package api

import _ "embed"

// Spec is the OpenAPI 3.1 document of the /v1 API, in YAML: every route with its
// parameters, request and response bodies and error answers, the bearer auth
// scheme, and under components/schemas the event envelope (Event) and the data
// schema of each event type of the stream.
//
//go:embed openapi.yaml
var Spec []byte
