package copilot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/tandem-dev/tandem/proto"
)

// handlers are the methods the bridge serves; anything else is
// "method not found".
var handlers = map[string]func(c *conn, ctx context.Context, params json.RawMessage) (any, error){
	"connect":                  (*conn).connect,
	"ping":                     (*conn).ping,
	"runtime.shutdown":         func(*conn, context.Context, json.RawMessage) (any, error) { return nil, nil },
	"session.create":           (*conn).create,
	"session.resume":           (*conn).resume,
	"session.send":             (*conn).sendPrompt,
	"session.abort":            (*conn).abort,
	"session.destroy":          (*conn).destroy,
	"session.delete":           (*conn).deleteSession,
	"session.list":             (*conn).list,
	"session.getMetadata":      (*conn).metadata,
	"session.getLastId":        (*conn).lastID,
	"session.getMessages":      (*conn).messages,
	"session.log":              (*conn).logMessage,
	"session.model.switchTo":   (*conn).switchModel,
	"session.model.getCurrent": (*conn).currentModel,
	"session.eventLog.registerInterest": func(*conn, context.Context, json.RawMessage) (any, error) {
		return map[string]any{"handle": "tandem"}, nil
	},
	"session.permissions.handlePendingPermissionRequest": (*conn).answerPermission,
	"session.permissions.pendingRequests":                (*conn).pendingPermissions,
	"session.tools.handlePendingToolCall":                (*conn).answerToolCall,
}

func (c *conn) dispatch(req request) (any, error) {
	h, ok := handlers[req.Method]
	if !ok {
		return nil, errorf(codeMethodNotFound, "Unhandled method %s", req.Method)
	}
	c.mu.Lock()
	connected := c.connected
	c.mu.Unlock()
	if !connected && c.srv.cfg.Authenticate != nil && req.Method != "connect" {
		return nil, errNotConnected
	}
	params := req.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	return h(c, c.ctx, params)
}

// errNotConnected refuses a request sent before a successful connect.
var errNotConnected = errorf(codeInvalidRequest, "connect first, with a Tandem token")

func decode(params json.RawMessage, v any) error {
	if err := json.Unmarshal(params, v); err != nil {
		return errorf(codeInvalidParams, "invalid params: %v", err)
	}
	return nil
}

func (c *conn) connect(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Token string `json:"token"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if auth := c.srv.cfg.Authenticate; auth != nil {
		c.mu.Lock()
		connected := c.connected
		c.mu.Unlock()
		if !connected {
			if p.Token == "" {
				return nil, errorf(codeInvalidRequest, "connect needs a token: a Tandem token (tandem token create)")
			}
			b, err := auth(ctx, c.clientID, p.Token)
			if err != nil {
				return nil, errorf(codeInvalidRequest, "invalid connection token: %v", err)
			}
			c.mu.Lock()
			if c.connected { // a concurrent connect won
				c.mu.Unlock()
				b.Close()
			} else {
				c.backend, c.connected = b, true
				c.mu.Unlock()
			}
		}
	}
	c.mu.Lock()
	c.connected = true
	c.mu.Unlock()
	return map[string]any{"ok": true, "protocolVersion": ProtocolVersion, "version": c.srv.cfg.Version}, nil
}

func (c *conn) ping(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(params, &p)
	return map[string]any{"message": "pong: " + p.Message, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "protocolVersion": ProtocolVersion}, nil
}

// readsAsk are the permission rules of the Copilot profile: its view (a
// file: Tandem's view; a directory: ls) asks a read permission.
var readsAsk = []proto.PermissionRule{
	{Tool: "view", Decision: "ask"},
	{Tool: "ls", Decision: "ask"},
}

// sessionParams are the parts of session.create and session.resume the
// bridge maps onto Tandem.
type sessionParams struct {
	SessionID       string `json:"sessionId"`
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoningEffort"`
	Tools           []struct {
		Name           string          `json:"name"`
		Description    string          `json:"description"`
		Parameters     json.RawMessage `json:"parameters"`
		SkipPermission bool            `json:"skipPermission"`
	} `json:"tools"`
	SystemMessage  *proto.SystemMessage `json:"systemMessage"`
	AvailableTools []string             `json:"availableTools"`
	ExcludedTools  []string             `json:"excludedTools"`
	Provider       *struct {
		Type    string `json:"type"`
		BaseURL string `json:"baseUrl"`
		APIKey  string `json:"apiKey"`
	} `json:"provider"`
	WorkingDirectory    string `json:"workingDirectory"`
	RequestPermission   bool   `json:"requestPermission"`
	ContinuePendingWork bool   `json:"continuePendingWork"`
	DefaultAgent        *struct {
		ExcludedTools []string `json:"excludedTools"`
	} `json:"defaultAgent"`
}

func (p sessionParams) session() string { return p.SessionID }

func (p *sessionParams) tools() []proto.ToolSpec {
	out := make([]proto.ToolSpec, 0, len(p.Tools))
	for _, t := range p.Tools {
		out = append(out, proto.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters, SkipPermission: t.SkipPermission})
	}
	return out
}

func (p *sessionParams) provider() *proto.Provider {
	if p.Provider == nil {
		return nil
	}
	typ := p.Provider.Type
	if typ == "" {
		typ = "openai"
	}
	return &proto.Provider{Type: typ, BaseURL: p.Provider.BaseURL, APIKey: p.Provider.APIKey}
}

// tandemModel names an SDK model as Tandem does.
func (s *Server) tandemModel(m string) string {
	if m == "" || strings.Contains(m, "/") {
		return m
	}
	return s.cfg.ModelPrefix + m
}

// sdkModel names a Tandem model as the SDK does.
func (s *Server) sdkModel(m string) string {
	if p := s.cfg.ModelPrefix; p != "" {
		return strings.TrimPrefix(m, p)
	}
	return m
}

func (c *conn) create(ctx context.Context, params json.RawMessage) (any, error) {
	var p sessionParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	b, err := c.backendFor()
	if err != nil {
		return nil, err
	}
	dir := p.WorkingDirectory
	if dir == "" {
		dir = c.srv.cfg.Cwd
	}
	ws, err := b.OpenWorkspace(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	model := p.Model
	if model == "" {
		model = c.srv.cfg.Model
	}
	excluded := p.ExcludedTools
	if p.DefaultAgent != nil {
		excluded = append(excluded, p.DefaultAgent.ExcludedTools...)
	}
	req := proto.CreateSessionRequest{
		ID: p.SessionID, Model: c.srv.tandemModel(model), ReasoningEffort: p.ReasoningEffort,
		SystemMessage: p.SystemMessage, AvailableTools: p.AvailableTools, ExcludedTools: excluded,
		Provider: p.provider(), ClientID: c.clientID, Tools: p.tools(),
	}
	if p.RequestPermission {
		// The Copilot CLI asks before its view reads a file or lists a
		// directory, and apps that handle permissions expect to be asked.
		req.Permissions = readsAsk
	}
	if req.ID == "" {
		req.ID = uuid.NewString()
	}
	if req.Provider == nil {
		req.Provider = c.srv.provider(req.ID)
	}
	if gw := c.srv.cfg.Gateway; gw != nil && p.SystemMessage != nil {
		gw.SetSystemMode(req.ID, p.SystemMessage.Mode)
	}
	sess, err := b.CreateSession(ctx, ws.ID, req)
	if err != nil {
		return nil, err
	}
	c.srv.remember(sess.ID, ws.ID)
	if err := c.attach(ctx, b, ws.ID, sess.ID, 0); err != nil {
		return nil, err
	}
	return map[string]any{"sessionId": sess.ID, "workspacePath": ws.Path, "capabilities": capabilities()}, nil
}

func capabilities() map[string]any {
	return map[string]any{"ui": map[string]any{"elicitation": false, "mcpApps": false}}
}

// locate finds the workspace of a session: the connection's attachment,
// else a search of every workspace.
func (c *conn) locate(ctx context.Context, b Backend, sessionID string) (string, error) {
	c.mu.Lock()
	a, ok := c.sessions[sessionID]
	c.mu.Unlock()
	if ok {
		return a.wsID, nil
	}
	if wsID, ok := c.srv.workspaceOf(sessionID); ok {
		if _, err := b.Session(ctx, wsID, sessionID); err == nil {
			return wsID, nil
		}
		c.srv.remember(sessionID, "")
	}
	wss, err := b.Workspaces(ctx)
	if err != nil {
		return "", err
	}
	for _, ws := range wss {
		if _, err := b.Session(ctx, ws.ID, sessionID); err == nil {
			c.srv.remember(sessionID, ws.ID)
			return ws.ID, nil
		} else if !errors.Is(err, ErrNotFound) {
			return "", err
		}
	}
	return "", errorf(codeInternal, "Session not found: %s", sessionID)
}

func (c *conn) resume(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, lookupErr, err := anySession[sessionParams](c, ctx, params)
	if err != nil {
		return nil, err
	}
	if lookupErr != nil {
		return nil, lookupErr
	}
	hist, err := b.History(ctx, wsID, p.SessionID, 0)
	if err != nil {
		return nil, err
	}
	var after int64
	if n := len(hist); n > 0 {
		after = hist[n-1].Seq
	}
	if !p.ContinuePendingWork {
		if err := c.interruptOrphans(ctx, b, wsID, p.SessionID); err != nil {
			return nil, err
		}
	}
	// The events up to now are history the client reads with getMessages;
	// it sees live what the resume brings and everything after.
	c.detach(p.SessionID)
	if err := c.attach(ctx, b, wsID, p.SessionID, after); err != nil {
		return nil, err
	}
	prov := p.provider()
	if prov == nil {
		prov = c.srv.provider(p.SessionID)
	}
	res, err := c.resumeRetrying(ctx, b, wsID, p.SessionID, proto.ResumeRequest{
		ClientID: c.clientID, Tools: p.tools(), ContinuePendingWork: p.ContinuePendingWork, Provider: prov,
	})
	if err != nil {
		c.detach(p.SessionID)
		if errors.Is(err, ErrNotFound) {
			return nil, errorf(codeInternal, "Session not found: %s", p.SessionID)
		}
		return nil, err
	}
	if p.Model != "" && c.srv.tandemModel(p.Model) != res.Session.Model {
		if _, err := b.SetModel(ctx, wsID, p.SessionID, proto.SetModelRequest{Model: c.srv.tandemModel(p.Model)}); err != nil {
			return nil, err
		}
	}
	ws, err := c.workspacePath(ctx, b, wsID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"sessionId": p.SessionID, "workspacePath": ws, "capabilities": capabilities()}, nil
}

// orphanWait bounds how long a resume waits for the run it interrupted to
// end, so that the session is idle when the resume looks at it.
const orphanWait = 2 * time.Second

// interruptOrphans ends the session's run when it waits on a client tool
// whose every owner is gone, as the Copilot CLI does for a resume that does
// not continue pending work: nobody is left to answer the call, so the run
// stops with the call interrupted, and the resume finds the session idle
// (session_was_active false) with a request that answers no more. Tandem
// itself keeps such a run answerable (any client may answer a tool call);
// this is the Copilot protocol's reading of a cold resume, and only its
// clients get it.
func (c *conn) interruptOrphans(ctx context.Context, b Backend, wsID, sessionID string) error {
	pend, err := b.Pending(ctx, wsID, sessionID)
	if err != nil || len(pend.ToolCalls) == 0 {
		return nil // the resume answers a missing session itself
	}
	wss, err := b.Workspaces(ctx)
	if err != nil {
		return err
	}
	here := map[string]bool{}
	for _, ws := range wss {
		if ws.ID == wsID {
			for _, a := range ws.Attached {
				here[a.ClientID] = true
			}
		}
	}
	orphaned := false
	for _, tc := range pend.ToolCalls {
		if !slices.ContainsFunc(tc.OwnerClientIDs, func(id string) bool { return here[id] }) {
			orphaned = true
		}
	}
	if !orphaned {
		return nil
	}
	if err := b.Cancel(ctx, wsID, sessionID); err != nil {
		return err
	}
	deadline := time.Now().Add(orphanWait)
	for time.Now().Before(deadline) {
		s, err := b.Session(ctx, wsID, sessionID)
		if err != nil || !s.Busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// toolConflictWait is how long a resume waits for a client that left to
// give up its tools: a client that drops its connection and comes back with
// the same tools finds them held until the server notices it is gone.
const toolConflictWait = 15 * time.Second

func (c *conn) resumeRetrying(ctx context.Context, b Backend, wsID, sessionID string, req proto.ResumeRequest) (proto.ResumeResponse, error) {
	deadline := time.Now().Add(toolConflictWait)
	for {
		res, err := b.Resume(ctx, wsID, sessionID, req)
		if err == nil || !errors.Is(err, ErrToolConflict) || time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// provider is the model endpoint of a session created or resumed here.
func (s *Server) provider(sessionID string) *proto.Provider {
	if gw := s.cfg.Gateway; gw != nil {
		return &proto.Provider{Type: "openai", BaseURL: gw.BaseURL(sessionID), APIKey: gw.Key()}
	}
	if s.cfg.Provider != nil {
		pr := *s.cfg.Provider
		return &pr
	}
	return nil
}

func (c *conn) workspacePath(ctx context.Context, b Backend, wsID string) (string, error) {
	wss, err := b.Workspaces(ctx)
	if err != nil {
		return "", err
	}
	for _, ws := range wss {
		if ws.ID == wsID {
			return ws.Path, nil
		}
	}
	return "", nil
}

// attached returns the workspace of a session this connection has created
// or resumed; the protocol's per-session methods work only on those.
func (c *conn) attached(sessionID string) (Backend, string, error) {
	c.mu.Lock()
	a, ok := c.sessions[sessionID]
	c.mu.Unlock()
	if !ok {
		return nil, "", errorf(codeInternal, "Session not found: %s", sessionID)
	}
	b, err := c.backendFor()
	return b, a.wsID, err
}

type sessionRef struct {
	SessionID string `json:"sessionId"`
}

func (r sessionRef) session() string { return r.SessionID }

// onSession decodes a per-session method's params into P and finds the
// session they name among the connection's attachments; every such method
// begins so.
func onSession[P interface{ session() string }](c *conn, params json.RawMessage) (p P, b Backend, wsID string, err error) {
	if err = decode(params, &p); err != nil {
		return p, nil, "", err
	}
	b, wsID, err = c.attached(p.session())
	return p, b, wsID, err
}

// anySession decodes params into P and finds the workspace of the session
// they name, attached here or not. err is a decode or Backend failure;
// lookupErr is the session's not being found, which each caller answers
// its own way.
func anySession[P interface{ session() string }](c *conn, ctx context.Context, params json.RawMessage) (p P, b Backend, wsID string, lookupErr, err error) {
	if err = decode(params, &p); err != nil {
		return p, nil, "", nil, err
	}
	if b, err = c.backendFor(); err != nil {
		return p, nil, "", nil, err
	}
	wsID, lookupErr = c.locate(ctx, b, p.session())
	return p, b, wsID, lookupErr, nil
}

// attachmentParam is an attachment of session.send, in any of its shapes.
type attachmentParam struct {
	Type        string `json:"type"`
	Path        string `json:"path"`
	FilePath    string `json:"filePath"`
	DisplayName string `json:"displayName"`
	LineRange   *struct {
		Start int `json:"start"`
		End   int `json:"end"`
	} `json:"lineRange"`
	Data          string `json:"data"`
	MimeType      string `json:"mimeType"`
	Text          string `json:"text"`
	Title         string `json:"title"`
	URL           string `json:"url"`
	Number        int64  `json:"number"`
	State         string `json:"state"`
	ReferenceType string `json:"referenceType"`

	raw json.RawMessage
}

// sendParams are the params of session.send.
type sendParams struct {
	sessionRef
	Prompt         string            `json:"prompt"`
	Attachments    []json.RawMessage `json:"attachments"`
	AgentMode      string            `json:"agentMode"`
	Mode           string            `json:"mode"`
	RequestHeaders map[string]string `json:"requestHeaders"`
}

func (c *conn) sendPrompt(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[sendParams](c, params)
	if err != nil {
		return nil, err
	}
	if len(p.RequestHeaders) > maxRequestHeaders || len(p.Attachments) > maxAttachments {
		return nil, errorf(codeInvalidParams, "at most %d request headers and %d attachments", maxRequestHeaders, maxAttachments)
	}
	for k, v := range p.RequestHeaders {
		if len(k)+len(v) > maxHeaderBytes {
			return nil, errorf(codeInvalidParams, "request header %.64q is over %d bytes", k, maxHeaderBytes)
		}
	}
	if gw := c.srv.cfg.Gateway; gw != nil {
		gw.SetHeaders(p.SessionID, p.RequestHeaders)
	}
	req := proto.PromptRequest{SessionID: p.SessionID, Prompt: p.Prompt, ClientID: c.clientID}
	if p.Mode == "immediate" {
		req.Delivery = proto.DeliverySteer
	}
	var atts []attachmentParam
	for _, raw := range p.Attachments {
		var a attachmentParam
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, errorf(codeInvalidParams, "invalid attachment: %v", err)
		}
		a.raw = raw
		switch a.Type {
		case "file", "directory", "selection", "github_reference":
			atts = append(atts, a)
		case "blob":
			req.Attachments = append(req.Attachments, proto.Attachment{Type: "blob", Data: a.Data, MimeType: a.MimeType, DisplayName: a.DisplayName})
			if a.DisplayName != "" {
				// The CLI names an image beside it.
				req.Prompt += "\n" + a.DisplayName
			}
		default:
			return nil, errorf(codeInvalidParams, "unknown attachment type %q", a.Type)
		}
	}
	req.Prompt = promptWithAttachments(req.Prompt, atts)
	acc, err := b.Prompt(ctx, wsID, req)
	if err != nil {
		return nil, err
	}
	if len(p.Attachments) > 0 || p.AgentMode != "" || req.Prompt != p.Prompt {
		c.srv.extras.put(acc.RunID, extra{content: p.Prompt, attachments: p.Attachments, agentMode: p.AgentMode})
	}
	return map[string]any{"messageId": acc.RunID}, nil
}

// Bounds of a send's extras.
const (
	maxRequestHeaders = 64
	maxHeaderBytes    = 8 << 10
	maxAttachments    = 100
)

// promptSeparator is what the Copilot CLI puts between a prompt and the
// blocks that describe its attachments.
const promptSeparator = "\n\n\n\n"

// promptWithAttachments words a prompt's file, directory, selection and
// GitHub reference attachments as the Copilot CLI does: files and
// directories are named (the model reads them with its tools), selections
// and references are quoted.
func promptWithAttachments(prompt string, atts []attachmentParam) string {
	var tagged, refs, selections []string
	for _, a := range atts {
		switch a.Type {
		case "file":
			n := countLines(a.Path)
			if a.LineRange != nil {
				tagged = append(tagged, fmt.Sprintf("* %s (line %s of %d lines)", a.Path, lineSpan(a.LineRange.Start, a.LineRange.End), n))
			} else {
				tagged = append(tagged, fmt.Sprintf("* %s (%d lines)", a.Path, n))
			}
		case "directory":
			tagged = append(tagged, fmt.Sprintf("* %s (%d items)", a.Path, countEntries(a.Path)))
		case "selection":
			var sel struct {
				Selection struct {
					Start struct{ Line int } `json:"start"`
					End   struct{ Line int } `json:"end"`
				} `json:"selection"`
			}
			_ = json.Unmarshal(a.raw, &sel)
			name := a.DisplayName
			if name == "" {
				name = filepath.Base(a.FilePath)
			}
			selections = append(selections, fmt.Sprintf("<ide_selection>\nThe user has the following text selected in their IDE. This may or may not be related to their request.\nFile: %s (line %s)\n```\n%s\n```\n</ide_selection>",
				name, lineSpan(sel.Selection.Start.Line+1, sel.Selection.End.Line+1), a.Text))
		case "github_reference":
			refs = append(refs, fmt.Sprintf("#%d - %s [%s] [%s] (%s)", a.Number, a.Title, a.ReferenceType, a.State, a.URL))
		}
	}
	out := prompt
	if len(selections) > 0 {
		out = strings.Join(selections, "\n") + promptSeparator + out
	}
	if len(tagged) > 0 {
		out += promptSeparator + "<tagged_files>\n" + strings.Join(tagged, "\n") + "\n</tagged_files>"
	}
	if len(refs) > 0 {
		out += promptSeparator + "<github_references>\n" + strings.Join(refs, "\n") + "\n</github_references>"
	}
	return out
}

func lineSpan(start, end int) string {
	if end <= start {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d-%d", start, end)
}

// maxCountBytes bounds how much of a file is read to count its lines.
const maxCountBytes = 64 << 20

func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	// Counted a buffer at a time: a send may name many large files, and
	// each handler of a connection may be counting at once.
	r := io.LimitReader(f, maxCountBytes)
	buf := make([]byte, 32<<10)
	n, last := 0, byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err != nil {
			break
		}
	}
	if last != '\n' {
		n++
	}
	return n
}

func countEntries(path string) int {
	entries, err := os.ReadDir(path)
	if err != nil {
		return 0
	}
	return len(entries)
}

func (c *conn) abort(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[sessionRef](c, params)
	if err != nil {
		return nil, err
	}
	if err := b.Cancel(ctx, wsID, p.SessionID); err != nil {
		return nil, err
	}
	return map[string]any{"success": true}, nil
}

func (c *conn) destroy(ctx context.Context, params json.RawMessage) (any, error) {
	var p sessionRef
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	c.detach(p.SessionID)
	return map[string]any{"success": true}, nil
}

func (c *conn) deleteSession(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, lookupErr, err := anySession[sessionRef](c, ctx, params)
	if err != nil {
		return nil, err
	}
	if lookupErr != nil {
		return map[string]any{"success": false, "error": lookupErr.Error()}, nil
	}
	c.detach(p.SessionID)
	c.srv.remember(p.SessionID, "")
	if err := b.DeleteSession(ctx, wsID, p.SessionID); err != nil {
		return map[string]any{"success": false, "error": err.Error()}, nil
	}
	if gw := c.srv.cfg.Gateway; gw != nil {
		gw.Forget(p.SessionID)
	}
	return map[string]any{"success": true}, nil
}

// metadataOf is a session in the shape of session.list.
func (c *conn) metadataOf(s proto.Session) map[string]any {
	return map[string]any{
		"sessionId": s.ID, "startTime": s.CreatedAt.UTC().Format(time.RFC3339Nano),
		"modifiedTime": s.UpdatedAt.UTC().Format(time.RFC3339Nano), "summary": s.Title,
		"isRemote": false, "context": map[string]any{"cwd": s.Context.Cwd},
	}
}

func (c *conn) allSessions(ctx context.Context) ([]proto.Session, error) {
	b, err := c.backendFor()
	if err != nil {
		return nil, err
	}
	wss, err := b.Workspaces(ctx)
	if err != nil {
		return nil, err
	}
	var all []proto.Session
	for _, ws := range wss {
		list, err := b.Sessions(ctx, ws.ID)
		if err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	return all, nil
}

func (c *conn) list(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Filter *struct {
			Cwd string `json:"cwd"`
		} `json:"filter"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	all, err := c.allSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, s := range all {
		if p.Filter != nil && p.Filter.Cwd != "" && filepath.Clean(p.Filter.Cwd) != filepath.Clean(s.Context.Cwd) {
			continue
		}
		out = append(out, c.metadataOf(s))
	}
	return map[string]any{"sessions": out}, nil
}

func (c *conn) metadata(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, lookupErr, err := anySession[sessionRef](c, ctx, params)
	if err != nil {
		return nil, err
	}
	if lookupErr != nil {
		return map[string]any{}, nil // unknown: no session, no error
	}
	s, err := b.Session(ctx, wsID, p.SessionID)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return map[string]any{}, nil
		}
		return nil, err
	}
	return map[string]any{"session": c.metadataOf(s)}, nil
}

func (c *conn) lastID(ctx context.Context, params json.RawMessage) (any, error) {
	all, err := c.allSessions(ctx)
	if err != nil {
		return nil, err
	}
	var last *proto.Session
	for i := range all {
		if last == nil || all[i].UpdatedAt.After(last.UpdatedAt.Time) {
			last = &all[i]
		}
	}
	if last == nil {
		return map[string]any{}, nil
	}
	return map[string]any{"sessionId": last.ID}, nil
}

func (c *conn) messages(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[sessionRef](c, params)
	if err != nil {
		return nil, err
	}
	hist, err := b.History(ctx, wsID, p.SessionID, 0)
	if err != nil {
		return nil, err
	}
	tr := newTranslator(p.SessionID, c.srv.cfg.Version, c.srv.sdkModel, c.srv.extras)
	events := []Event{}
	for _, ev := range hist {
		for _, e := range tr.translate(ev) {
			if !e.Ephemeral {
				events = append(events, e)
			}
		}
	}
	return map[string]any{"events": events}, nil
}

// logParams are the params of session.log.
type logParams struct {
	sessionRef
	Message   string `json:"message"`
	Level     string `json:"level"`
	Ephemeral bool   `json:"ephemeral"`
}

func (c *conn) logMessage(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[logParams](c, params)
	if err != nil {
		return nil, err
	}
	level := p.Level
	if level == "" {
		level = "info"
	}
	seq, err := b.Log(ctx, wsID, p.SessionID, proto.LogRequest{Level: level, Message: p.Message, Ephemeral: p.Ephemeral})
	if err != nil {
		return nil, err
	}
	// The id of the event the line became, as the session's stream gives
	// it (a log line is one protocol event).
	return map[string]any{"eventId": eventID(p.SessionID, seq, 0)}, nil
}

// switchModelParams are the params of session.model.switchTo.
type switchModelParams struct {
	sessionRef
	ModelID         string  `json:"modelId"`
	ReasoningEffort *string `json:"reasoningEffort"`
}

func (c *conn) switchModel(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[switchModelParams](c, params)
	if err != nil {
		return nil, err
	}
	s, err := b.SetModel(ctx, wsID, p.SessionID, proto.SetModelRequest{Model: c.srv.tandemModel(p.ModelID), ReasoningEffort: p.ReasoningEffort})
	if err != nil {
		return nil, err
	}
	return map[string]any{"modelId": c.srv.sdkModel(s.Model), "deferred": false}, nil
}

func (c *conn) currentModel(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[sessionRef](c, params)
	if err != nil {
		return nil, err
	}
	s, err := b.Session(ctx, wsID, p.SessionID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"modelId": c.srv.sdkModel(s.Model)}, nil
}

// permissionAnswerParams are the params of handlePendingPermissionRequest.
type permissionAnswerParams struct {
	sessionRef
	RequestID string `json:"requestId"`
	Result    struct {
		Kind     string `json:"kind"`
		Feedback string `json:"feedback"`
	} `json:"result"`
}

func (c *conn) answerPermission(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[permissionAnswerParams](c, params)
	if err != nil {
		return nil, err
	}
	var decision string
	switch p.Result.Kind {
	case "approve-once", "approved":
		decision = proto.DecisionApproveOnce
	case "approve-for-session", "approved-for-session", "approve-for-location", "approve-permanently":
		decision = proto.DecisionApproveSession
	case "no-result":
		// This client leaves the decision to another.
		return map[string]any{"success": false}, nil
	default:
		decision = proto.DecisionReject
	}
	res, err := b.AnswerPermission(ctx, wsID, p.RequestID, proto.PermissionAnswer{ClientID: c.clientID, Decision: decision, Feedback: p.Result.Feedback})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return map[string]any{"success": false}, nil
		}
		return nil, err
	}
	return map[string]any{"success": res.Resolved}, nil
}

func (c *conn) pendingPermissions(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[sessionRef](c, params)
	if err != nil {
		return nil, err
	}
	pw, err := b.Pending(ctx, wsID, p.SessionID)
	if err != nil {
		return nil, err
	}
	items := []map[string]any{}
	for _, r := range pw.Permissions {
		items = append(items, map[string]any{"requestId": r.RequestID, "request": permissionRequest(r)})
	}
	return map[string]any{"items": items}, nil
}

// toolCallAnswerParams are the params of handlePendingToolCall.
type toolCallAnswerParams struct {
	sessionRef
	RequestID string          `json:"requestId"`
	Result    json.RawMessage `json:"result"`
	Error     *string         `json:"error"`
}

func (c *conn) answerToolCall(ctx context.Context, params json.RawMessage) (any, error) {
	p, b, wsID, err := onSession[toolCallAnswerParams](c, params)
	if err != nil {
		return nil, err
	}
	ans := proto.ToolCallAnswer{ClientID: c.clientID}
	switch {
	case p.Error != nil:
		ans.Error = p.Error
	case len(p.Result) > 0 && p.Result[0] == '"':
		var s string
		if err := json.Unmarshal(p.Result, &s); err != nil {
			return nil, errorf(codeInvalidParams, "invalid result: %v", err)
		}
		ans.Result = &s
	case len(p.Result) > 0 && string(p.Result) != "null":
		var r struct {
			Text       string  `json:"textResultForLlm"`
			ResultType string  `json:"resultType"`
			Error      *string `json:"error"`
		}
		if err := json.Unmarshal(p.Result, &r); err != nil {
			return nil, errorf(codeInvalidParams, "invalid result: %v", err)
		}
		if r.ResultType == "failure" || r.ResultType == "rejected" || r.ResultType == "denied" {
			msg := r.Text
			if r.Error != nil && msg == "" {
				msg = *r.Error
			}
			ans.Error = &msg
		} else {
			ans.Result = &r.Text
		}
	default:
		empty := ""
		ans.Result = &empty
	}
	res, err := b.AnswerToolCall(ctx, wsID, p.RequestID, ans)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return map[string]any{"success": false}, nil
		}
		return nil, err
	}
	return map[string]any{"success": res.Resolved}, nil
}
