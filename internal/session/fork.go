package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/domain"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// MaxImportMessages bounds the messages of an imported session (the body
// limit bounds their size).
const MaxImportMessages = 100_000

// Fork makes a new session of the same workspace from a prefix of the
// session's history, with its settings (contract section 11).
func (s *Service) Fork(ctx context.Context, wsID, sessionID string, req proto.ForkRequest) (proto.Session, error) {
	ws, rec, err := s.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.Session{}, err
	}
	if err := apierr.CheckLen("title", req.Title, maxTitle); err != nil {
		return proto.Session{}, err
	}
	msgs, err := s.cfg.Store.ListMessages(ctx, rec.ID)
	if err != nil {
		return proto.Session{}, fmt.Errorf("list messages of %s: %w", rec.ID, err)
	}
	if req.ThroughMessageID != "" {
		i := slices.IndexFunc(msgs, func(m proto.Message) bool { return m.ID == req.ThroughMessageID })
		if i < 0 {
			return proto.Session{}, apierr.Errorf(proto.CodeMessageNotFound, "message %q not found in session %s", req.ThroughMessageID, rec.ID)
		}
		msgs = msgs[:i+1]
	}
	src := decodeSettings(rec)
	settings := Settings{
		SystemMessage:  src.SystemMessage,
		AvailableTools: src.AvailableTools,
		ExcludedTools:  src.ExcludedTools,
		PermissionMode: src.PermissionMode,
		Compaction:     src.Compaction,
		Permissions:    src.Permissions,
	}
	if settings.PermissionMode == proto.PermissionModeAllowAll && !ownerCalls(ctx) {
		// A fork is a new session: like an import, it runs tools without
		// asking only when an owner makes it (section 9 keeps widening
		// what the agent may do to owners; section 11 would copy it).
		settings.PermissionMode = proto.PermissionModeAsk
	}
	settings.Sandbox = src.Sandbox
	if !ownerCalls(ctx) {
		// As with allow_all: a member's fork of a session an owner let
		// reach more gets the defaults, not the owner's widening.
		base := s.sandboxBase(ws)
		if src.SandboxOf(base).Widens(base) {
			settings.Sandbox = nil
		}
	}
	from := &proto.ForkedFrom{SessionID: rec.ID}
	if len(msgs) > 0 {
		from.MessageID = msgs[len(msgs)-1].ID
	}
	settings.ForkedFrom = from
	title := req.Title
	if title == "" {
		title = rec.Title
	}
	return s.createCopy(ctx, ws, store.Session{Title: title, Model: rec.Model, ReasoningEffort: rec.ReasoningEffort}, settings, msgs)
}

// Export returns the session as a tandem.session.v1 document.
func (s *Service) Export(ctx context.Context, wsID, sessionID string) (proto.Export, error) {
	ws, rec, err := s.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.Export{}, err
	}
	msgs, err := s.cfg.Store.ListMessages(ctx, rec.ID)
	if err != nil {
		return proto.Export{}, fmt.Errorf("list messages of %s: %w", rec.ID, err)
	}
	settings := decodeSettings(rec)
	compaction := settings.CompactionOrDefault()
	mode := settings.PermissionMode
	if mode == "" {
		mode = "ask"
	}
	return proto.Export{
		Format:  proto.ExportFormat,
		Session: s.view(ws, rec),
		Settings: proto.ExportSettings{
			Model: rec.Model, ReasoningEffort: rec.ReasoningEffort, SystemMessage: settings.SystemMessage,
			AvailableTools: settings.AvailableTools, ExcludedTools: settings.ExcludedTools,
			PermissionMode: mode, Compaction: &compaction,
			SandboxOptions: sandboxOptions(settings.SandboxOf(s.sandboxBase(ws))),
		},
		Messages: msgs,
	}, nil
}

// Import makes a new session from an export document. Only an owner's
// import keeps permission_mode allow_all (section 9); anyone else's asks,
// as a fork does. A document that is not valid creates nothing.
func (s *Service) Import(ctx context.Context, wsID string, doc proto.Export) (proto.Session, error) {
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return proto.Session{}, err
	}
	if doc.Format != proto.ExportFormat {
		return proto.Session{}, apierr.Invalid("format must be %q, got %q", proto.ExportFormat, doc.Format)
	}
	if doc.Messages == nil {
		// An export always has its list, [] for an empty session: a
		// document without one is not an export.
		return proto.Session{}, apierr.Invalid("messages is required (an export of an empty session has [])")
	}
	st := doc.Settings
	req := proto.CreateSessionRequest{
		Title: doc.Session.Title, Model: st.Model, ReasoningEffort: st.ReasoningEffort,
		SystemMessage: st.SystemMessage, AvailableTools: st.AvailableTools, ExcludedTools: st.ExcludedTools,
		PermissionMode: st.PermissionMode,
	}
	if st.Compaction != nil {
		req.Compaction = &proto.CompactionOptions{Auto: &st.Compaction.Auto, Threshold: &st.Compaction.Threshold}
	}
	if err := s.validateCreate(ws, &req); err != nil {
		return proto.Session{}, err
	}
	if err := validMessages(doc.Messages); err != nil {
		return proto.Session{}, err
	}
	if err := validSandbox(st.SandboxOptions); err != nil {
		return proto.Session{}, err
	}
	sandboxPatch := storedPatch(SandboxPatch(st.SandboxOptions))
	if sandboxPatch != nil && !ownerCalls(ctx) && len(SandboxWidening(s.sandboxBase(ws), st.SandboxOptions)) > 0 {
		sandboxPatch = nil // the defaults, as for allow_all
	}
	if req.PermissionMode == "" || (req.PermissionMode == proto.PermissionModeAllowAll && !ownerCalls(ctx)) {
		req.PermissionMode = "ask"
	}
	if err := s.defaultModel(ws, &req); err != nil {
		return proto.Session{}, err
	}
	settings := Settings{
		SystemMessage: req.SystemMessage, AvailableTools: req.AvailableTools, ExcludedTools: req.ExcludedTools,
		PermissionMode: req.PermissionMode, Compaction: st.Compaction, Sandbox: sandboxPatch,
	}
	if doc.Session.ID != "" {
		// Stored and shown in every listing of the session: a session id,
		// not anything a body may hold (nor echoed back).
		if _, err := uuid.Parse(doc.Session.ID); err != nil {
			return proto.Session{}, apierr.Invalid("session.id must be a UUID")
		}
		settings.ImportedFrom = &proto.ImportedFrom{SessionID: doc.Session.ID}
	}
	title := req.Title
	if title == "" {
		title = DefaultTitle
	}
	return s.createCopy(ctx, ws, store.Session{Title: title, Model: req.Model, ReasoningEffort: req.ReasoningEffort}, settings, doc.Messages)
}

var (
	roles     = []string{proto.RoleUser, proto.RoleAssistant, proto.RoleTool}
	partTypes = []string{proto.PartText, proto.PartReasoning, proto.PartToolCall, proto.PartToolResult,
		proto.PartAttachment, proto.PartFinish, proto.PartSummary}
)

// validMessages checks an imported history: known roles and part types,
// tool calls' arguments objects, and a bounded count.
func validMessages(msgs []proto.Message) error {
	if len(msgs) > MaxImportMessages {
		return apierr.Invalid("messages has %d entries; at most %d are allowed", len(msgs), MaxImportMessages)
	}
	for i, m := range msgs {
		if !slices.Contains(roles, m.Role) {
			return apierr.Invalid("messages[%d].role must be user, assistant or tool, got %q", i, m.Role)
		}
		for j, p := range m.Parts {
			if !slices.Contains(partTypes, p.Type) {
				return apierr.Invalid("messages[%d].parts[%d].type %q is not a part type", i, j, p.Type)
			}
			if p.Type == proto.PartToolCall && len(p.Arguments) > 0 {
				var obj map[string]any
				if json.Unmarshal(p.Arguments, &obj) != nil || obj == nil {
					return apierr.Invalid("messages[%d].parts[%d].arguments must be a JSON object", i, j)
				}
			}
		}
	}
	return nil
}

// createCopy creates a session with the settings and a copy of msgs under
// new ids, and announces it once its whole history is stored. A failure
// removes what was written.
func (s *Service) createCopy(ctx context.Context, ws *workspace.Workspace, rec store.Session, settings Settings, msgs []proto.Message) (proto.Session, error) {
	conf, err := json.Marshal(settings)
	if err != nil {
		return proto.Session{}, fmt.Errorf("encode session settings: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	rec.ID, rec.WorkspaceID, rec.Config, rec.CreatedAt, rec.UpdatedAt = uuid.NewString(), ws.ID, conf, now, now
	if err := s.cfg.Store.CreateSession(ctx, rec); err != nil {
		return proto.Session{}, fmt.Errorf("create session: %w", err)
	}
	newIDs := make([]string, len(msgs))
	ids := make(map[string]string, len(msgs)) // old id to new, for summaries
	for i, m := range msgs {
		newIDs[i] = uuid.Must(uuid.NewV7()).String()
		ids[m.ID] = newIDs[i]
	}
	copies := make([]proto.Message, len(msgs))
	for i, m := range msgs {
		cp := m
		cp.ID, cp.SessionID, cp.Rewound = newIDs[i], rec.ID, false
		cp.Parts = slices.Clone(m.Parts)
		if cp.Parts == nil {
			cp.Parts = []proto.Part{}
		}
		for i, p := range cp.Parts {
			if p.Type == proto.PartSummary {
				cp.Parts[i].ThroughMessageID = ids[p.ThroughMessageID]
			}
		}
		copies[i] = cp
	}
	if err := s.putMessages(ctx, copies); err != nil {
		if derr := s.cfg.Store.DeleteSession(context.WithoutCancel(ctx), ws.ID, rec.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			s.log.Error("undo session copy", "session_id", rec.ID, "err", derr)
		}
		return proto.Session{}, fmt.Errorf("copy messages into session %s: %w", rec.ID, err)
	}
	if rec, err = s.cfg.Store.GetSession(ctx, ws.ID, rec.ID); err != nil {
		return proto.Session{}, fmt.Errorf("read session %s: %w", rec.ID, err)
	}
	sess := s.view(ws, rec)
	if _, err := ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionCreated, SessionID: rec.ID, Data: sess}); err != nil {
		return proto.Session{}, err
	}
	if _, err := ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionStarted, SessionID: rec.ID, Data: proto.SessionStarted{
		SessionID: rec.ID, Model: rec.Model, ReasoningEffort: rec.ReasoningEffort, Context: sess.Context,
	}}); err != nil {
		return proto.Session{}, err
	}
	return sess, nil
}

// putMessages writes a copy's messages, in few commits where the store
// can (store.MessageWriter).
func (s *Service) putMessages(ctx context.Context, msgs []proto.Message) error {
	if mw, ok := s.cfg.Store.(store.MessageWriter); ok {
		return mw.PutMessages(ctx, msgs)
	}
	for _, m := range msgs {
		if err := s.cfg.Store.PutMessage(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// AllMessages is Messages with the messages rewinds took out of the
// history, marked rewound.
func (s *Service) AllMessages(ctx context.Context, wsID, sessionID string) ([]proto.Message, error) {
	rw, ok := s.cfg.Store.(store.Rewinds)
	if !ok {
		return s.Messages(ctx, wsID, sessionID)
	}
	_, rec, err := s.LookupSettings(ctx, wsID, sessionID)
	if err != nil {
		return nil, err
	}
	msgs, err := rw.AllMessages(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", rec.ID, err)
	}
	return msgs, nil
}

// ownerCalls reports whether the call's caller has the owner role, or is
// the server itself (no authenticated caller: recovery, the domain's own
// tests).
func ownerCalls(ctx context.Context) bool {
	c, ok := domain.CallerFrom(ctx)
	return !ok || c.Role == "" || c.Role == proto.RoleOwner
}
