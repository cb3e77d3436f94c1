package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/api"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/proto"
)

// The OpenAPI document (api/openapi.yaml) is checked against the server on all
// e2e traffic: every env's client validates each /v1 request and response
// against it, and the test fails on any disagreement.

// uuidFormat is the canonical UUID form the spec's format: uuid stands for.
// kin-openapi does not check format uuid unless told how.
var uuidFormat = openapi3.NewRegexpFormatValidator(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

var schemaOptions = []openapi3.SchemaValidationOption{
	openapi3.WithStringFormatValidator("uuid", uuidFormat),
	openapi3.SetSchemaErrorMessageCustomizer(schemaError),
}

// schemaError keeps a schema error to its reason and place; the default
// message dumps the whole schema and value.
func schemaError(err *openapi3.SchemaError) string {
	return fmt.Sprintf("%s (at /%s)", err.Reason, strings.Join(err.JSONPointer(), "/"))
}

type openAPISpec struct {
	doc    *openapi3.T
	router routers.Router
}

var (
	specOnce   sync.Once
	loadedSpec *openAPISpec
	specErr    error
)

// spec loads, validates and routes the document once per test binary.
func spec(t *testing.T) *openAPISpec {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.Spec)
		if err != nil {
			specErr = fmt.Errorf("load api/openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			specErr = fmt.Errorf("validate api/openapi.yaml: %w", err)
			return
		}
		// The document names the default address; tests listen anywhere.
		doc.Servers = nil
		router, err := gorillamux.NewRouter(doc)
		if err != nil {
			specErr = fmt.Errorf("route api/openapi.yaml: %w", err)
			return
		}
		loadedSpec = &openAPISpec{doc: doc, router: router}
	})
	require.NoError(t, specErr)
	return loadedSpec
}

// schema returns the named schema of components/schemas.
func (s *openAPISpec) schema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	ref := s.doc.Components.Schemas[name]
	require.NotNil(t, ref, "components/schemas/%s", name)
	return ref.Value
}

// visit validates a JSON value (raw bytes) against a component schema the way
// openapi3filter does for an OpenAPI 3.1 document.
func (s *openAPISpec) visit(schema *openapi3.Schema, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	opts := append([]openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()}, schemaOptions...)
	return schema.VisitJSON(v, opts...)
}

// validatingTransport checks every /v1 exchange against the spec:
//   - a request the spec rejects must get a 4xx;
//   - every response must be one the spec lists for its operation and status,
//     body included (an SSE stream's body is checked by TestEventsMatchTheSpec);
//   - an unknown path must answer 404 not_found and a known path with a method
//     the spec does not list 405 method_not_allowed, with the error body;
//   - no 5xx but 503 (the contract: a bad request never yields a 500);
//   - a request whose credentials the spec accepts is never a 401.
type validatingTransport struct {
	spec *openAPISpec
	base *http.Transport

	mu       sync.Mutex
	failures []string
}

// newValidatingTransport returns the transport of an env's client; failures
// are reported when the test ends.
func newValidatingTransport(t *testing.T) *validatingTransport {
	t.Helper()
	vt := &validatingTransport{spec: spec(t), base: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(func() {
		vt.base.CloseIdleConnections()
		vt.mu.Lock()
		defer vt.mu.Unlock()
		for _, f := range vt.failures {
			t.Errorf("OpenAPI: %s", f)
		}
	})
	return vt
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (vt *validatingTransport) CloseIdleConnections() { vt.base.CloseIdleConnections() }

func (vt *validatingTransport) fail(req *http.Request, format string, args ...any) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	vt.failures = append(vt.failures, fmt.Sprintf("%s %s: ", req.Method, req.URL.RequestURI())+fmt.Sprintf(format, args...))
}

func (vt *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, "/v1") {
		return vt.base.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	out := req.Clone(req.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := vt.base.RoundTrip(out)
	if err != nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		vt.check(req, body, resp, nil)
		return resp, nil
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	vt.check(req, body, resp, raw)
	return resp, nil
}

// check validates one exchange; raw is nil for an event stream, whose frames
// are not read here.
func (vt *validatingTransport) check(orig *http.Request, body []byte, resp *http.Response, raw []byte) {
	ctx := context.Background()
	req := orig.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if req.Header.Get("Content-Type") == "" && len(body) > 0 {
		// The server decodes a body as JSON whatever its Content-Type says.
		req.Header.Set("Content-Type", "application/json")
	}
	status := resp.StatusCode
	if status >= 500 && status != http.StatusServiceUnavailable {
		vt.fail(orig, "server error %d: %s", status, clip(raw))
	}

	route, params, err := vt.spec.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		vt.expectError(orig, resp, raw, http.StatusNotFound, proto.CodeNotFound, "a path the spec does not list")
		return
	case errors.Is(err, routers.ErrMethodNotAllowed):
		vt.expectError(orig, resp, raw, http.StatusMethodNotAllowed, proto.CodeMethodNotAllowed, "a method the spec does not list")
		return
	case err != nil:
		vt.fail(orig, "find route: %v", err)
		return
	}

	opts := &openapi3filter.Options{
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		SkipSettingDefaults:               true,
		MultiError:                        true,
		AuthenticationFunc:                authenticate,
		SchemaValidationOptions:           schemaOptions,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr == nil && len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		// kin-openapi decodes the first JSON value and ignores what follows;
		// application/json is one JSON document.
		reqErr = errors.New("the body is not one JSON document")
	}
	switch {
	case reqErr != nil && status < 400:
		vt.fail(orig, "the spec rejects the request (%v) but the server answered %d; body %s", reqErr, status, clip(body))
	case reqErr == nil && status == http.StatusUnauthorized:
		vt.fail(orig, "the spec accepts the request's credentials but the server answered 401: %s", clip(raw))
	case reqErr == nil && status == http.StatusBadRequest && bytes.Contains(raw, []byte(`"`+proto.CodeInvalidJSON+`"`)):
		vt.fail(orig, "the spec accepts the body as JSON but the server answered invalid_json: %s; body %s", clip(raw), clip(body))
	}

	if raw == nil {
		if status != http.StatusOK {
			vt.fail(orig, "an event stream with status %d", status)
		}
		for _, h := range []string{"Cache-Control", "X-Accel-Buffering"} {
			if err := validateHeader(route, status, h, resp.Header.Get(h)); err != nil {
				vt.fail(orig, "stream header %s: %v", h, err)
			}
		}
		return
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: resp.Header, Options: opts}
	rin.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil {
		vt.fail(orig, "response %d does not match the spec: %v\nbody: %s", status, err, clip(raw))
	}
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	const max = 2000
	if len(b) <= max {
		return string(b)
	}
	return fmt.Sprintf("%s... (%d bytes)", b[:max], len(b))
}

// validateHeader checks a response header against the one the spec declares.
func validateHeader(route *routers.Route, status int, name, value string) error {
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value.Headers[name] == nil {
		return fmt.Errorf("not in the spec")
	}
	schema := resp.Value.Headers[name].Value.Schema.Value
	return schema.VisitJSON(value, openapi3.EnableJSONSchema2020())
}

// expectError checks an answer to a request the spec has no operation for.
func (vt *validatingTransport) expectError(req *http.Request, resp *http.Response, raw []byte, status int, code, what string) {
	if resp.StatusCode != status {
		vt.fail(req, "%s answered %d, want %d: %s", what, resp.StatusCode, status, clip(raw))
		return
	}
	if err := vt.spec.visit(vt.spec.doc.Components.Schemas["Error"].Value, raw); err != nil {
		vt.fail(req, "error body does not match the spec's Error: %v\nbody: %s", err, clip(raw))
		return
	}
	var eb proto.ErrorBody
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code != code {
		vt.fail(req, "%s answered code %q, want %q", what, eb.Error.Code, code)
	}
}

// authenticate is the spec's security check: the bearer header, or for the
// event stream the access_token query parameter, must hold the test token
// or a person's secret (section 9; whether it is live is the server's to say).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	switch in.SecuritySchemeName {
	case "bearerAuth":
		if h := r.Header.Get("Authorization"); h == "Bearer "+testToken || strings.HasPrefix(h, "Bearer "+auth.SecretPrefix) {
			return nil
		}
	case "accessToken":
		if q := r.URL.Query().Get("access_token"); q == testToken || strings.HasPrefix(q, auth.SecretPrefix) {
			return nil
		}
	}
	return in.NewError(nil)
}

// eventData is the contract's table of event types, by the name of their data
// schema in components/schemas.
var eventData = map[string]string{
	proto.EventSessionCreated:             "Session",
	proto.EventSessionUpdated:             "Session",
	proto.EventSessionDeleted:             "SessionDeleted",
	proto.EventSessionStarted:             "SessionStarted",
	proto.EventSessionResumed:             "SessionResumed",
	proto.EventSessionModelChanged:        "SessionModelChanged",
	proto.EventSessionLog:                 "SessionLog",
	proto.EventSessionIdle:                "Empty",
	proto.EventRunAccepted:                "RunAccepted",
	proto.EventRunStarted:                 "RunStarted",
	proto.EventRunCompleted:               "RunCompleted",
	proto.EventMessageCreated:             "Message",
	proto.EventMessageUpdated:             "Message",
	proto.EventMessageDelta:               "MessageDelta",
	proto.EventToolStarted:                "ToolStarted",
	proto.EventToolFinished:               "ToolFinished",
	proto.EventPermissionRequested:        "PermissionRequest",
	proto.EventPermissionResolved:         "PermissionResolved",
	proto.EventToolRequested:              "ToolCallRequest",
	proto.EventToolResolved:               "ToolResolved",
	proto.EventClientAttached:             "ClientPresence",
	proto.EventClientDetached:             "ClientPresence",
	proto.EventWorkspaceClosing:           "WorkspaceClosing",
	proto.EventMCPServerStatus:            "McpServerStatus",
	proto.EventSessionCompactionStarted:   "CompactionStarted",
	proto.EventSessionCompactionCompleted: "CompactionCompleted",
	proto.EventStreamOpened:               "StreamOpened",
	proto.EventStreamReset:                "StreamReset",
	proto.EventStreamEvicted:              "StreamEvicted",
}

func isControl(typ string) bool {
	return typ == proto.EventStreamOpened || typ == proto.EventStreamReset || typ == proto.EventStreamEvicted
}

// checkFrame validates one SSE frame: the parsed frame against the stream's
// StreamFrame schema, its data against the contentSchema of the frame variant
// that matched, and for an event the envelope against the variant Event's
// discriminator picks and its data against the contract's data schema.
func (s *openAPISpec) checkFrame(t *testing.T, f frame) {
	t.Helper()
	name, ok := eventData[f.Event]
	if !assert.True(t, ok, "frame of an event type the contract does not list: %+v", f) {
		return
	}
	parsed := map[string]string{"event": f.Event, "data": f.Data}
	if f.ID != "" {
		parsed["id"] = f.ID
	}
	raw, err := json.Marshal(parsed)
	require.NoError(t, err)
	var matched []*openapi3.SchemaRef
	for _, v := range s.schema(t, "StreamFrame").OneOf {
		if s.visit(withoutContentSchema(v.Value), raw) == nil {
			matched = append(matched, v)
		}
	}
	if !assert.Len(t, matched, 1, "exactly one StreamFrame variant matches %s", raw) {
		assert.NoError(t, s.visit(s.schema(t, "StreamFrame"), raw), "frame %s", raw)
		return
	}
	content := matched[0].Value.Properties["data"].Value.ContentSchema
	require.NotNil(t, content, "%s: data has a contentSchema", matched[0].Ref)
	assert.NoError(t, s.visit(content.Value, []byte(f.Data)), "%s data against %s: %s", f.Event, content.Ref, f.Data)

	if isControl(f.Event) {
		assert.Equal(t, "#/components/schemas/"+name, content.Ref, "%s frames carry %s", f.Event, name)
		return
	}
	assert.Equal(t, "#/components/schemas/Event", content.Ref, "event frames carry an Event")
	// The variant Event's discriminator picks for the type; the check against
	// Event itself above explains a failure with every variant, this one not.
	variant, ok := s.schema(t, "Event").Discriminator.Mapping[f.Event]
	if assert.True(t, ok, "Event has a variant for %s", f.Event) {
		vname := strings.TrimPrefix(variant.Ref, "#/components/schemas/")
		assert.NoError(t, s.visit(s.schema(t, vname), []byte(f.Data)), "%s envelope against %s: %s", f.Event, vname, f.Data)
	}
	var env proto.Event
	require.NoError(t, json.Unmarshal([]byte(f.Data), &env))
	assert.Equal(t, f.Event, env.Type, "event: is the envelope's type")
	assert.Equal(t, f.ID, strconv.FormatInt(env.Seq, 10), "id: is the envelope's seq")
	assert.NoError(t, s.visit(s.schema(t, name), env.Data), "%s data against %s: %s", f.Event, name, env.Data)
}

// withoutContentSchema returns a frame schema whose data keeps its type but
// drops its contentSchema. JSON Schema 2020-12 does not assert contentSchema
// (checkFrame checks the data against it itself), and leaving it out spares
// compiling the whole Event schema for every variant tried.
func withoutContentSchema(frame *openapi3.Schema) *openapi3.Schema {
	data := frame.Properties["data"]
	if data == nil || data.Value.ContentSchema == nil {
		return frame
	}
	d := *data.Value
	d.ContentSchema = nil
	f := *frame
	f.Properties = maps.Clone(frame.Properties)
	f.Properties["data"] = &openapi3.SchemaRef{Value: &d}
	return &f
}

// recorder keeps every frame a test reads from a stream.
type recorder struct {
	s      *stream
	frames []frame
}

func (r *recorder) until(typ string) frame {
	r.s.t.Helper()
	f, seen := r.s.until(typ)
	r.frames = append(r.frames, seen...)
	r.frames = append(r.frames, f)
	return f
}

func (r *recorder) data(typ string, v any) {
	r.s.t.Helper()
	require.NoError(r.s.t, json.Unmarshal(r.until(typ).envelope(r.s.t).Data, v))
}

// Every frame of a stream that sees the whole contract happen (echo runs with
// deltas, reasoning, a model error and a cancel, attachments, a permission
// flow, a client tool call, resume, model change, logs, presence, a delete
// and the workspace closing) matches the spec's schemas, and every event
// type of the contract's table shows up.
func TestEventsMatchTheSpec(t *testing.T) {
	e := startEnv(t, withConfigFile(t, `{
		"mcp_servers": {"t": `+stdioServer("serve")+`},
		"permissions": [{"tool": "mcp__t__echo", "decision": "allow"}]
	}`))
	sp := spec(t)
	require.NoError(t, os.WriteFile(filepath.Join(e.workDir, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o600))
	ws := e.createWorkspace()
	aID := newClientID()
	rec := &recorder{s: e.openStream(ws.ID, aID, "")}
	rec.until(proto.EventClientAttached)

	tool := proto.ToolSpec{Name: "lookup", Description: "look a word up", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	sess := e.createSession(ws.ID, map[string]any{"client_id": aID, "tools": []proto.ToolSpec{tool}})
	rec.until(proto.EventSessionStarted)
	other := e.createSession(ws.ID, map[string]any{"title": "other", "reasoning_effort": "low", "permission_mode": "deny_all"})
	rec.until(proto.EventSessionStarted)

	var s proto.Session
	e.must(http.StatusOK, "PUT", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/model", ws.ID, sess.ID),
		map[string]any{"model": "echo/other", "reasoning_effort": "high"}, &s)
	rec.until(proto.EventSessionModelChanged)
	e.log(ws.ID, sess.ID, "kept line", false)
	rec.until(proto.EventSessionLog)
	e.log(ws.ID, sess.ID, "fleeting line", true)
	rec.until(proto.EventSessionLog)

	// A plain echo run: deltas, title, idle.
	acc := e.prompt(ws.ID, sess.ID, "hello there from the spec test")
	var rc proto.RunCompleted
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc.RunID, rc.RunID)
	rec.until(proto.EventSessionIdle)

	// A prompt steered into a running run.
	accS := e.prompt(ws.ID, sess.ID, "/slow 30 20")
	rec.until(proto.EventMessageDelta)
	var steered proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+ws.ID+"/agent",
		map[string]any{"session_id": sess.ID, "prompt": "and then?", "client_id": aID, "delivery": "steer"}, &steered)
	require.Equal(t, proto.RunSteered, steered.State)
	require.Equal(t, accS.RunID, steered.RunID)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, accS.RunID, rc.RunID)

	// Reasoning deltas, attachments, a model error.
	var acc2 proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{
		"session_id": sess.ID, "prompt": "/think deep thoughts", "client_id": aID,
		"attachments": []map[string]any{
			{"type": "file", "path": "notes.txt", "line_range": map[string]int{"start": 2, "end": 3}},
			{"type": "blob", "data": "aGVsbG8=", "mime_type": "text/plain", "display_name": "hello.txt"},
		},
	}, &acc2)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc2.RunID, rc.RunID)
	acc3 := e.prompt(ws.ID, sess.ID, "/fail model_bad_request no such model")
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc3.RunID, rc.RunID)
	require.Equal(t, proto.OutcomeError, rc.Outcome)

	// A permission flow on a built-in tool.
	acc4 := e.prompt(ws.ID, sess.ID, `/tool write {"path": "out.txt", "content": "approved"}`)
	var pr proto.PermissionRequest
	rec.data(proto.EventPermissionRequested, &pr)
	var pending proto.PendingWork
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/pending", ws.ID, sess.ID), nil, &pending)
	var list proto.PermissionList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/permissions", nil, &list)
	var st proto.AgentStatus
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/agent/sessions/%s", ws.ID, sess.ID), nil, &st)
	status, _, _ := e.answerPermission(ws.ID, pr.RequestID, aID, proto.DecisionApproveOnce, "")
	require.Equal(t, http.StatusOK, status)
	rec.until(proto.EventPermissionResolved)
	rec.until(proto.EventToolFinished)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc4.RunID, rc.RunID)

	// A client tool: its permission, then the call a client answers.
	acc5 := e.prompt(ws.ID, sess.ID, `/tool lookup {"q": "tandem"}`)
	rec.data(proto.EventPermissionRequested, &pr)
	require.Equal(t, proto.PermissionCustomTool, pr.Kind)
	status, _, _ = e.answerPermission(ws.ID, pr.RequestID, aID, proto.DecisionApproveSession, "")
	require.Equal(t, http.StatusOK, status)
	var tr proto.ToolCallRequest
	rec.data(proto.EventToolRequested, &tr)
	require.Equal(t, http.StatusOK, e.answerTool(ws.ID, tr.RequestID, aID, "a bicycle for two"))
	rec.until(proto.EventToolResolved)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc5.RunID, rc.RunID)

	// An MCP server's tool, allowed by a rule (the server started with
	// the session's first run); the servers' list.
	acc8 := e.prompt(ws.ID, sess.ID, `/tool mcp__t__echo {"text": "over MCP"}`)
	var tf proto.ToolFinished
	rec.data(proto.EventToolFinished, &tf)
	require.Equal(t, proto.ResultApprovedByRule, tf.Permission)
	require.Equal(t, "over MCP", tf.Content)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc8.RunID, rc.RunID)
	var servers proto.MCPServerList
	e.must(http.StatusOK, "GET", "/v1/workspaces/"+ws.ID+"/mcp", nil, &servers)
	require.Len(t, servers.Servers, 1)

	// Settings changed, and a compaction on demand (echo's summary).
	e.must(http.StatusOK, "PATCH", fmt.Sprintf("/v1/workspaces/%s/sessions/%s", ws.ID, sess.ID),
		map[string]any{"title": "patched", "compaction": map[string]any{"threshold": 0.7}}, &s)
	rec.until(proto.EventSessionUpdated)
	var acc9 proto.PromptAccepted
	e.must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/compact", ws.ID, sess.ID), nil, &acc9)
	rec.until(proto.EventSessionCompactionStarted)
	rec.until(proto.EventSessionCompactionCompleted)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc9.RunID, rc.RunID)
	require.Equal(t, proto.OutcomeEndTurn, rc.Outcome)

	// A denied permission (deny_all) and a canceled run in the other session.
	acc6 := e.prompt(ws.ID, other.ID, `/tool bash {"command": "echo hi"}`)
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, acc6.RunID, rc.RunID)
	acc7 := e.prompt(ws.ID, other.ID, "/slow 100 50")
	rec.until(proto.EventMessageDelta)
	assert.Equal(t, []string{acc7.RunID}, e.cancel(ws.ID, other.ID))
	rec.data(proto.EventRunCompleted, &rc)
	require.Equal(t, proto.OutcomeCanceled, rc.Outcome)

	// Another client comes, resumes, leaves.
	bID := newClientID()
	b := e.openStream(ws.ID, bID, "&session_id="+sess.ID)
	rec.until(proto.EventClientAttached)
	e.resume(ws.ID, sess.ID, proto.ResumeRequest{ClientID: bID, ContinuePendingWork: true})
	rec.until(proto.EventSessionResumed)
	b.close()
	rec.until(proto.EventClientDetached)

	// A resume point beyond the head gets a reset.
	c := e.openStream(ws.ID, newClientID(), "", lastEventID(1<<40))
	opened := c.next()
	sp.checkFrame(t, opened)
	reset := c.next()
	require.Equal(t, proto.EventStreamReset, reset.Event)
	sp.checkFrame(t, reset)
	c.close()

	// The session history and messages through REST (checked by the transport).
	var hist proto.EventList
	e.must(http.StatusOK, "GET", fmt.Sprintf("/v1/workspaces/%s/sessions/%s/events", ws.ID, sess.ID), nil, &hist)
	require.NotEmpty(t, hist.Events)
	e.messages(ws.ID, sess.ID)

	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID+"/sessions/"+other.ID, nil, nil)
	rec.until(proto.EventSessionDeleted)
	e.must(http.StatusNoContent, "DELETE", "/v1/workspaces/"+ws.ID, nil, nil)
	rec.until(proto.EventWorkspaceClosing)
	rec.frames = append(rec.frames, rec.s.ended()...)

	seen := map[string]bool{}
	for _, f := range rec.frames {
		seen[f.Event] = true
		sp.checkFrame(t, f)
	}
	var missing []string
	for typ := range eventData {
		if !seen[typ] && typ != proto.EventStreamReset && typ != proto.EventStreamEvicted {
			missing = append(missing, typ)
		}
	}
	sort.Strings(missing)
	assert.Empty(t, missing, "event types the test did not see")
}

// The server serves the spec it embeds, without a token.
func TestServesTheSpec(t *testing.T) {
	e := startEnv(t)
	resp, err := e.client.Get(e.ts.URL + "/v1/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	assert.Equal(t, api.Spec, raw)
}
