// Package session manages sessions: their settings, history and the events that
// announce them. Runs are the coordinator's; this package asks it for run state
// through the Runtime interface.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/config"
	"github.com/tandem-dev/tandem/internal/keylock"
	"github.com/tandem-dev/tandem/internal/models"
	"github.com/tandem-dev/tandem/internal/prompt"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/rules"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// Runtime is what the session layer needs from whoever runs the agent.
type Runtime interface {
	// State reports whether the session has an active run and how many are queued.
	State(workspaceID, sessionID string) (busy bool, queued int)
	// Forget fences the session before a delete: from the call on it takes
	// no new run. It cancels the session's runs and resolves its pending
	// requests as canceled, and returns once they are finished or a short
	// bound has passed. done must be called when the delete is over;
	// deleted reports whether it removed the session from the store.
	Forget(ctx context.Context, ws *workspace.Workspace, sessionID string) (done func(deleted bool))
}

type idleRuntime struct{}

func (idleRuntime) State(string, string) (bool, int) { return false, 0 }
func (idleRuntime) Forget(context.Context, *workspace.Workspace, string) func(bool) {
	return func(bool) {}
}

// Settings are a session's persisted settings (store.Session.Config). The
// provider's API key is not among them: it lives in memory only. Nor are
// the session's own MCP servers, whose URL, command, args, env and header
// values may each hold a token: only their names are stored, the servers
// themselves live in memory (MCPServers), and after a restart a client
// gives them again with a resume.
type Settings struct {
	SystemMessage  *proto.SystemMessage `json:"system_message,omitempty"`
	AvailableTools []string             `json:"available_tools,omitempty"`
	ExcludedTools  []string             `json:"excluded_tools,omitempty"`
	PermissionMode string               `json:"permission_mode,omitempty"`
	Provider       *proto.Provider      `json:"provider,omitempty"`
	// MCPServerNames names the session's own MCP servers.
	MCPServerNames []string `json:"mcp_server_names,omitempty"`
	// Compaction is nil for proto.DefaultCompaction.
	Compaction *proto.Compaction `json:"compaction,omitempty"`
	// ForkedFrom and ImportedFrom say where a fork or an import came from.
	ForkedFrom   *proto.ForkedFrom   `json:"forked_from,omitempty"`
	ImportedFrom *proto.ImportedFrom `json:"imported_from,omitempty"`
	// Permissions are the session's own rules, before the configuration's.
	Permissions []rules.Rule `json:"permissions,omitempty"`
	// Sandbox are the session's own sandbox values, over the
	// configuration's (SandboxOf); nil keeps the configuration's.
	Sandbox *sandbox.Patch `json:"sandbox,omitempty"`
}

// CompactionOrDefault is the session's compaction settings.
func (s Settings) CompactionOrDefault() proto.Compaction {
	if s.Compaction == nil {
		return proto.DefaultCompaction
	}
	return *s.Compaction
}

// decodeSettings reads a stored session's settings; a record it cannot
// read has the defaults.
func decodeSettings(rec store.Session) Settings {
	var settings Settings
	if len(rec.Config) > 0 {
		_ = json.Unmarshal(rec.Config, &settings)
	}
	return settings
}

// ToolRegistry keeps the tools clients offer in sessions.
type ToolRegistry interface {
	Register(workspaceID, sessionID, clientID string, specs []proto.ToolSpec) error
}

// Config configures a Service.
type Config struct {
	// Tools registers client tools offered on create; nil refuses them.
	Tools      ToolRegistry
	Store      store.Store
	Workspaces *workspace.Manager
	// Configs gives each workspace its configuration: the default model of
	// its sessions and the providers a model string may name. nil is the
	// empty configuration.
	Configs *config.Loader
	// ModelOverride is --model or TANDEM_MODEL: when set, the model of
	// sessions created without one, whatever the configuration files say.
	ModelOverride string
	// Runtime tells which sessions run and stops them on delete; nil: none ever runs.
	Runtime Runtime
	Logger  *slog.Logger
}

// Service implements the session routes.
type Service struct {
	cfg Config
	log *slog.Logger

	// writes serializes the read-modify-write updates of each stored
	// session (see update); sessions never wait for each other.
	writes keylock.Map[string]
	// changes counts the updates of sessions' settings (see Changes).
	changes atomic.Uint64
	// cached serves LookupSettings.
	cached *cache

	mu sync.Mutex
	// keys holds per-session provider API keys: memory only, by contract.
	keys map[string]string
	// mcp holds each session's own MCP servers: memory only (see Settings).
	mcp map[string]map[string]config.MCPServer
	// members are the clients that created, resumed or prompted a session, so
	// attached_clients can count the ones still attached; each is kept with
	// the tick of its last join (see joinLocked).
	members map[string]map[string]uint64
	joins   uint64
}

// Changes counts the changes to any session's settings (model, provider and
// its key, system message, tools, title). A run that read its session's
// settings, and later finds the count unchanged, still has them current:
// it need not read the session again before each model step.
func (s *Service) Changes() uint64 { return s.changes.Load() }

// SweepIdle forgets the session records no request read since the previous
// sweep. Its caller calls it every few minutes, so that memory comes back
// once the load is gone; the cache's bounds hold it down under load.
func (s *Service) SweepIdle() { s.cached.sweep() }

// NewService returns a Service.
func NewService(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Runtime == nil {
		cfg.Runtime = idleRuntime{}
	}
	return &Service{
		cfg:     cfg,
		log:     cfg.Logger,
		cached:  newCache(),
		keys:    make(map[string]string),
		mcp:     make(map[string]map[string]config.MCPServer),
		members: make(map[string]map[string]uint64),
	}
}

func (s *Service) rt() Runtime { return s.cfg.Runtime }

// Limits of client strings that go into events (each event's data is at
// most 1 MiB, contract section 1); over them a request is 413
// body_too_large.
const (
	// MaxLogMessage bounds a client's log line.
	MaxLogMessage = 64 << 10
	maxTitle      = 1 << 10
	maxModel      = 256
)

var (
	reasoningEfforts = []string{"low", "medium", "high", "xhigh"}
	permissionModes  = []string{"ask", "allow_all", "deny_all"}
	providerTypes    = []string{"openai", "azure", "anthropic"}
	logLevels        = []string{"info", "warning", "error"}
)

// ValidReasoningEffort rejects efforts the contract does not name; "" is allowed.
func ValidReasoningEffort(effort string) error {
	if effort != "" && !slices.Contains(reasoningEfforts, effort) {
		return apierr.Invalid("reasoning_effort must be one of %s, got %q", strings.Join(reasoningEfforts, ", "), effort)
	}
	return nil
}

// Create creates a session in the workspace.
func (s *Service) Create(ctx context.Context, wsID string, req proto.CreateSessionRequest) (proto.Session, error) {
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return proto.Session{}, err
	}
	if err := s.validateCreate(ws, &req); err != nil {
		return proto.Session{}, err
	}
	servers, err := ParseMCPServers(req.MCPServers)
	if err != nil {
		return proto.Session{}, err
	}
	if req.ID == "" {
		req.ID = uuid.NewString()
	}
	if err := s.defaultModel(ws, &req); err != nil {
		return proto.Session{}, err
	}
	settings := Settings{
		SystemMessage:  req.SystemMessage,
		AvailableTools: req.AvailableTools,
		ExcludedTools:  req.ExcludedTools,
		PermissionMode: req.PermissionMode,
	}
	if settings.PermissionMode == "" {
		settings.PermissionMode = "ask"
	}
	if patch := SandboxPatch(req.SandboxOptions); !patch.Empty() {
		if err := checkWidening(ctx, SandboxWidening(s.sandboxBase(ws), req.SandboxOptions)); err != nil {
			return proto.Session{}, err
		}
		settings.Sandbox = storedPatch(patch)
	}
	if settings.Permissions, err = sessionRules(req.Permissions); err != nil {
		return proto.Session{}, err
	}
	if req.Compaction != nil {
		c := applyCompaction(proto.DefaultCompaction, *req.Compaction)
		settings.Compaction = &c
	}
	settings.MCPServerNames = serverNames(servers)
	var apiKey string
	if req.Provider != nil {
		p := *req.Provider
		apiKey, p.APIKey = p.APIKey, ""
		settings.Provider = &p
	}
	conf, err := json.Marshal(settings)
	if err != nil {
		return proto.Session{}, fmt.Errorf("encode session settings: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	title := req.Title
	if title == "" {
		title = DefaultTitle
	}
	rec := store.Session{
		ID:              req.ID,
		WorkspaceID:     ws.ID,
		Title:           title,
		Model:           req.Model,
		ReasoningEffort: req.ReasoningEffort,
		Config:          conf,
		CreatedAt:       now,
		UpdatedAt:       now,
	}
	if err := s.cfg.Store.CreateSession(ctx, rec); err != nil {
		if errors.Is(err, store.ErrExists) {
			return proto.Session{}, apierr.Errorf(proto.CodeAlreadyExists, "session %s already exists", req.ID)
		}
		return proto.Session{}, fmt.Errorf("create session %s: %w", req.ID, err)
	}
	if len(req.Tools) > 0 {
		var err error = apierr.Invalid("this server takes no client tools")
		if s.cfg.Tools != nil {
			err = s.cfg.Tools.Register(ws.ID, rec.ID, req.ClientID, req.Tools)
		}
		if err != nil {
			// Undo the create: a refused request changes nothing.
			derr := s.cfg.Store.DeleteSession(context.WithoutCancel(ctx), ws.ID, rec.ID)
			s.cached.drop(rec.ID) // a prompt may have found it meanwhile
			if derr != nil {
				s.log.Error("undo session create", "session_id", rec.ID, "err", derr)
			}
			return proto.Session{}, err
		}
	}
	s.mu.Lock()
	if apiKey != "" {
		s.keys[rec.ID] = apiKey
	}
	if len(servers) > 0 {
		s.mcp[rec.ID] = servers
	}
	if req.ClientID != "" {
		s.joinLocked(ws, rec.ID, req.ClientID)
	}
	s.mu.Unlock()

	sess := s.view(ws, rec)
	if _, err := ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionCreated, SessionID: rec.ID, Data: sess}); err != nil {
		return proto.Session{}, err
	}
	if _, err := ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionStarted, SessionID: rec.ID, Data: proto.SessionStarted{
		SessionID:       rec.ID,
		Model:           rec.Model,
		ReasoningEffort: rec.ReasoningEffort,
		Context:         sess.Context,
	}}); err != nil {
		return proto.Session{}, err
	}
	return sess, nil
}

// defaultModel gives a request without a model the workspace's default.
func (s *Service) defaultModel(ws *workspace.Workspace, req *proto.CreateSessionRequest) error {
	if req.Model != "" {
		return nil
	}
	cfg, err := s.config(ws)
	if err != nil {
		return err
	}
	req.Model = cfg.DefaultModel(s.cfg.ModelOverride)
	return nil
}

// config is the workspace's configuration; an invalid workspace file is
// 400 invalid_config naming it.
func (s *Service) config(ws *workspace.Workspace) (*config.Config, error) {
	if s.cfg.Configs == nil {
		return nil, nil
	}
	cfg, err := s.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		return nil, InvalidConfig(err)
	}
	return cfg, nil
}

// InvalidConfig is the contract's error for an invalid configuration file:
// 400 invalid_config, its message every problem found (file, key, why).
func InvalidConfig(err error) error {
	return apierr.Errorf(proto.CodeInvalidConfig, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
}

// validateModel refuses a model string the workspace's configuration cannot
// name.
func (s *Service) validateModel(ws *workspace.Workspace, model string) error {
	cfg, err := s.config(ws)
	if err != nil {
		return err
	}
	if err := cfg.CheckModel(model); err != nil {
		return apierr.Invalid("%v", err)
	}
	return nil
}

func (s *Service) validateCreate(ws *workspace.Workspace, req *proto.CreateSessionRequest) error {
	if err := apierr.CheckLen("title", req.Title, maxTitle); err != nil {
		return err
	}
	if err := apierr.CheckLen("model", req.Model, maxModel); err != nil {
		return err
	}
	if req.ID != "" {
		if _, err := uuid.Parse(req.ID); err != nil {
			return apierr.Invalid("id must be a UUID, got %q", req.ID)
		}
	}
	if req.ClientID != "" {
		if _, err := uuid.Parse(req.ClientID); err != nil {
			return apierr.Invalid("client_id must be a UUID, got %q", req.ClientID)
		}
	}
	if req.Model != "" {
		if err := s.validateModel(ws, req.Model); err != nil {
			return err
		}
	}
	if err := ValidReasoningEffort(req.ReasoningEffort); err != nil {
		return err
	}
	if req.PermissionMode != "" && !slices.Contains(permissionModes, req.PermissionMode) {
		return apierr.Invalid("permission_mode must be one of %s, got %q", strings.Join(permissionModes, ", "), req.PermissionMode)
	}
	if err := ValidProvider(req.Provider); err != nil {
		return err
	}
	if err := prompt.Validate(req.SystemMessage); err != nil {
		return err
	}
	if err := validCompaction(req.Compaction); err != nil {
		return err
	}
	if err := validSandbox(req.SandboxOptions); err != nil {
		return err
	}
	if len(req.Tools) > 0 && req.ClientID == "" {
		return apierr.Invalid("tools need a client_id: they belong to the client that offers them")
	}
	return nil
}

// ValidProvider checks a session provider override; nil is valid.
func ValidProvider(p *proto.Provider) error {
	if p != nil && !slices.Contains(providerTypes, p.Type) {
		return apierr.Invalid("provider.type must be one of %s, got %q", strings.Join(providerTypes, ", "), p.Type)
	}
	return nil
}

// OtherClientAttached reports whether a client of the session other than
// clientID has an open stream.
func (s *Service) OtherClientAttached(ws *workspace.Workspace, sessionID, clientID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.members[sessionID] {
		if id != clientID && ws.HasClient(id) {
			return true
		}
	}
	return false
}

// Join records that clientID works in the session (for attached_clients).
func (s *Service) Join(ws *workspace.Workspace, sessionID, clientID string) {
	s.mu.Lock()
	s.joinLocked(ws, sessionID, clientID)
	s.mu.Unlock()
}

// maxMembers bounds the clients a session remembers. Every process of the
// CLI and every page load is a client of its own, so a long-lived session
// prompted by one `tandem run` after another would otherwise remember a
// client per run, for as long as the server lives.
const maxMembers = 64

// joinLocked adds clientID to the session's members. Past the bound it
// forgets the members with no open stream on ws, which attached_clients
// does not count (a client that comes back resumes or prompts, and joins
// again), then, if that is not enough, the ones that joined longest ago.
func (s *Service) joinLocked(ws *workspace.Workspace, sessionID, clientID string) {
	m := s.members[sessionID]
	if m == nil {
		m = make(map[string]uint64)
		s.members[sessionID] = m
	}
	s.joins++
	m[clientID] = s.joins
	if len(m) <= maxMembers {
		return
	}
	// A new map: one that only had keys deleted keeps its size.
	kept := make(map[string]uint64, maxMembers)
	for id, tick := range m {
		if id == clientID || ws.HasClient(id) {
			kept[id] = tick
		}
	}
	for len(kept) > maxMembers {
		oldest := ""
		for id, tick := range kept {
			if id != clientID && (oldest == "" || tick < kept[oldest]) {
				oldest = id
			}
		}
		delete(kept, oldest)
	}
	s.members[sessionID] = kept
}

// MaxMCPServers bounds a session's own MCP servers.
const MaxMCPServers = 32

// ParseMCPServers reads a request's mcp_servers with the configuration
// file's rules; absent, null or {} is none. A bad one is 400
// invalid_argument naming the key.
func ParseMCPServers(raw json.RawMessage) (map[string]config.MCPServer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	servers, err := config.ParseMCPServers("mcp_servers", raw)
	if err != nil {
		return nil, apierr.Invalid("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if len(servers) > MaxMCPServers {
		return nil, apierr.Invalid("mcp_servers has %d servers; at most %d are allowed", len(servers), MaxMCPServers)
	}
	if len(servers) == 0 {
		return nil, nil
	}
	return servers, nil
}

func serverNames(servers map[string]config.MCPServer) []string {
	if len(servers) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(servers))
}

// MCPServers returns the session's own MCP servers; ok is false when they
// are not in memory (the server restarted since they were given).
func (s *Service) MCPServers(sessionID string) (servers map[string]config.MCPServer, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	servers, ok = s.mcp[sessionID]
	return servers, ok
}

// SetMCPServers replaces the session's own MCP servers (a resume's
// mcp_servers, already parsed); their names are stored, the servers kept
// in memory.
func (s *Service) SetMCPServers(ctx context.Context, wsID, sessionID string, servers map[string]config.MCPServer) error {
	names := serverNames(servers)
	_, rec, err := s.updateSettings(ctx, wsID, sessionID, "MCP servers", func(_ *store.Session, st *Settings) bool {
		if slices.Equal(st.MCPServerNames, names) {
			return false
		}
		st.MCPServerNames = names
		return true
	}, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if len(servers) > 0 {
		s.mcp[rec.ID] = servers
	} else {
		delete(s.mcp, rec.ID)
	}
	s.mu.Unlock()
	s.changes.Add(1)
	return nil
}

// APIKey returns the session's provider API key, kept in memory only.
func (s *Service) APIKey(sessionID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[sessionID]
}

// catalog is the model catalog of the workspace's configuration; the
// server's when the workspace's file is invalid (a session is still shown).
func (s *Service) catalog(ws *workspace.Workspace) *models.Catalog {
	if s.cfg.Configs == nil {
		return (*config.Config)(nil).Catalog()
	}
	cfg, err := s.cfg.Configs.Workspace(ws.Path)
	if err != nil {
		return s.cfg.Configs.Server().Catalog()
	}
	return cfg.Catalog()
}

// view turns a stored session into its API form with run-time fields.
func (s *Service) view(ws *workspace.Workspace, rec store.Session) proto.Session {
	return s.viewWith(ws, rec, s.catalog(ws))
}

// viewWith is view with the workspace's model catalog.
func (s *Service) viewWith(ws *workspace.Workspace, rec store.Session, cat *models.Catalog) proto.Session {
	busy, queued := s.rt().State(ws.ID, rec.ID)
	s.mu.Lock()
	attached := 0
	for id := range s.members[rec.ID] {
		if ws.HasClient(id) {
			attached++
		}
	}
	s.mu.Unlock()
	settings := decodeSettings(rec)
	return proto.Session{
		ID:              rec.ID,
		WorkspaceID:     rec.WorkspaceID,
		Title:           rec.Title,
		Model:           rec.Model,
		ReasoningEffort: rec.ReasoningEffort,
		CreatedAt:       proto.Time{Time: rec.CreatedAt},
		UpdatedAt:       proto.Time{Time: rec.UpdatedAt},
		MessageCount:    rec.MessageCount,
		Busy:            busy,
		Queued:          queued,
		AttachedClients: attached,
		Context:         s.context(ws, rec, settings, cat),
		Usage:           rec.Usage,
		Compaction:      settings.CompactionOrDefault(),
		PermissionMode:  settings.PermissionMode,
		ForkedFrom:      settings.ForkedFrom,
		ImportedFrom:    settings.ImportedFrom,
		SandboxSettings: sandboxView(settings.SandboxOf(s.sandboxBase(ws))),
	}
}

// context is the session's context: its size as its last run left it,
// or, for a session that never ran, an estimate of its system prompt
// (without the project's instructions and the tools' definitions, which
// would take reading the workspace). Estimates are approximate (about
// provider.BytesPerToken bytes a token).
func (s *Service) context(ws *workspace.Workspace, rec store.Session, settings Settings, cat *models.Catalog) proto.SessionContext {
	c := proto.SessionContext{Cwd: ws.Path, Tokens: rec.ContextTokens}
	if c.Tokens == 0 {
		c.Tokens = provider.EstimateText(prompt.Build(settings.SystemMessage, prompt.Env{
			WorkspacePath: ws.Path, OS: runtime.GOOS, Date: time.Now(),
		}))
	}
	if w, ok := cat.Window(rec.Model); ok {
		c.Window = &w
	}
	return c
}

// Lookup returns the workspace and stored session, or the contract's 404s.
// It reads the store: the record is current in every field.
func (s *Service) Lookup(ctx context.Context, wsID, sessionID string) (*workspace.Workspace, store.Session, error) {
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return nil, store.Session{}, err
	}
	if _, err := uuid.Parse(sessionID); err != nil {
		return nil, store.Session{}, apierr.Errorf(proto.CodeSessionNotFound, "session %q not found", sessionID)
	}
	epoch := s.cached.begin()
	rec, err := s.cfg.Store.GetSession(ctx, ws.ID, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, store.Session{}, apierr.Errorf(proto.CodeSessionNotFound, "session %s not found", sessionID)
	}
	if err != nil {
		return nil, store.Session{}, fmt.Errorf("get session %s: %w", sessionID, err)
	}
	s.cached.put(epoch, rec)
	return ws, rec, nil
}

// LookupSettings is Lookup for callers that need the session to exist and
// its settings (title, model, reasoning effort, config), not its UpdatedAt
// or MessageCount, which may be old. It answers from memory when it can:
// the routes that take a prompt, a cancel or a log line make this read
// before they answer, and it was the only read of a prompt's 202.
func (s *Service) LookupSettings(ctx context.Context, wsID, sessionID string) (*workspace.Workspace, store.Session, error) {
	rec, ok := s.cached.get(sessionID)
	if !ok {
		return s.Lookup(ctx, wsID, sessionID)
	}
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return nil, store.Session{}, err
	}
	if rec.WorkspaceID != ws.ID {
		// A session never moves, so it is not in this workspace.
		return nil, store.Session{}, apierr.Errorf(proto.CodeSessionNotFound, "session %s not found", sessionID)
	}
	return ws, rec, nil
}

// Get returns one session.
func (s *Service) Get(ctx context.Context, wsID, sessionID string) (proto.Session, error) {
	ws, rec, err := s.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return proto.Session{}, err
	}
	return s.view(ws, rec), nil
}

// List returns the workspace's sessions, most recently updated first.
func (s *Service) List(ctx context.Context, wsID string) ([]proto.Session, error) {
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return nil, err
	}
	recs, err := s.cfg.Store.ListSessions(ctx, ws.ID)
	if err != nil {
		return nil, fmt.Errorf("list sessions of %s: %w", ws.ID, err)
	}
	out := make([]proto.Session, len(recs))
	cat := s.catalog(ws)
	for i, rec := range recs {
		out[i] = s.viewWith(ws, rec, cat)
	}
	return out, nil
}

// Last returns the id of the most recently updated session, nil when none.
func (s *Service) Last(ctx context.Context, wsID string) (*string, error) {
	list, err := s.List(ctx, wsID)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[0].ID, nil
}

// Delete cancels the session's work and removes it with its history.
func (s *Service) Delete(ctx context.Context, wsID, sessionID string) error {
	ws, rec, err := s.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return err
	}
	// Once decided, the delete is finished even if its client goes away:
	// a half-done one would leave the session fenced.
	ctx = context.WithoutCancel(ctx)
	done := s.rt().Forget(ctx, ws, rec.ID)
	err = s.cfg.Store.DeleteSession(ctx, ws.ID, rec.ID)
	// The record leaves the cache before the coordinator lets the session
	// go, so a prompt that finds no fence reads the store.
	s.cached.drop(rec.ID)
	done(err == nil)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Errorf(proto.CodeSessionNotFound, "session %s not found", sessionID)
		}
		return fmt.Errorf("delete session %s: %w", rec.ID, err)
	}
	s.mu.Lock()
	delete(s.keys, rec.ID)
	delete(s.mcp, rec.ID)
	delete(s.members, rec.ID)
	s.mu.Unlock()
	_, err = ws.Emit(ctx, workspace.Draft{Type: proto.EventSessionDeleted, SessionID: rec.ID, Data: proto.SessionDeleted{SessionID: rec.ID}})
	return err
}

// ForgetWorkspace closes the workspace and removes it with its sessions
// and all they hold: each session is fenced as a delete fences it (its
// runs canceled, its pending requests resolved), then the store forgets
// the workspace in one transaction.
func (s *Service) ForgetWorkspace(ctx context.Context, wsID string) error {
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return err
	}
	// As a session's delete, a forget once decided is finished.
	ctx = context.WithoutCancel(ctx)
	// Closed first, so that no run starts while the sessions are fenced.
	ws.Close(workspace.ReasonForgotten)
	recs, err := s.cfg.Store.ListSessions(ctx, ws.ID)
	if err != nil {
		return fmt.Errorf("forget workspace %s: %w", ws.ID, err)
	}
	dones := make([]func(bool), len(recs))
	for i, rec := range recs {
		dones[i] = s.rt().Forget(ctx, ws, rec.ID)
	}
	err = s.cfg.Workspaces.Forget(ctx, ws)
	for i, rec := range recs {
		s.cached.drop(rec.ID)
		dones[i](err == nil)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, rec := range recs {
		delete(s.keys, rec.ID)
		delete(s.mcp, rec.ID)
		delete(s.members, rec.ID)
	}
	s.mu.Unlock()
	return nil
}

// Messages returns the session's history, oldest first.
func (s *Service) Messages(ctx context.Context, wsID, sessionID string) ([]proto.Message, error) {
	_, rec, err := s.LookupSettings(ctx, wsID, sessionID)
	if err != nil {
		return nil, err
	}
	msgs, err := s.cfg.Store.ListMessages(ctx, rec.ID)
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", rec.ID, err)
	}
	return msgs, nil
}

// MaxEventPage bounds one page of GET .../events.
const MaxEventPage = 1000

// Events returns a page of the session's persisted events.
func (s *Service) Events(ctx context.Context, wsID, sessionID string, after int64, limit int) ([]proto.Event, error) {
	_, rec, err := s.LookupSettings(ctx, wsID, sessionID)
	if err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, apierr.Invalid("after must be >= 0")
	}
	if limit < 0 {
		return nil, apierr.Invalid("limit must be > 0")
	}
	if limit == 0 || limit > MaxEventPage {
		limit = MaxEventPage
	}
	recs, err := s.cfg.Store.SessionEvents(ctx, rec.ID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", rec.ID, err)
	}
	out := make([]proto.Event, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Envelope, &out[i]); err != nil {
			return nil, fmt.Errorf("decode event %d of %s: %w", r.Seq, rec.ID, err)
		}
	}
	return out, nil
}

// Log records a client's log line in the session.
func (s *Service) Log(ctx context.Context, wsID, sessionID string, req proto.LogRequest) (int64, error) {
	ws, rec, err := s.LookupSettings(ctx, wsID, sessionID)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(logLevels, req.Level) {
		return 0, apierr.Invalid("level must be one of %s, got %q", strings.Join(logLevels, ", "), req.Level)
	}
	if strings.TrimSpace(req.Message) == "" {
		return 0, apierr.Invalid("message is required")
	}
	if err := apierr.CheckLen("message", req.Message, MaxLogMessage); err != nil {
		return 0, err
	}
	ev, err := ws.Emit(ctx, workspace.Draft{
		Type:      proto.EventSessionLog,
		SessionID: rec.ID,
		Data:      proto.SessionLog{Level: req.Level, Message: req.Message},
		Ephemeral: req.Ephemeral,
	})
	if err != nil {
		return 0, err
	}
	return ev.Seq, nil
}

// maxSessionRules bounds a session's own permission rules.
const maxSessionRules = 100

// sessionRules checks a session's own permission rules: at most
// maxSessionRules, each one that compiles, and none that allows. A rule
// that allows widens what the agent does without asking, which is the
// configuration file's (the server owner's) to say, not a session's.
func sessionRules(in []proto.PermissionRule) ([]rules.Rule, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > maxSessionRules {
		return nil, apierr.Invalid("permissions: %d rules, at most %d", len(in), maxSessionRules)
	}
	out := make([]rules.Rule, len(in))
	for i, r := range in {
		out[i] = rules.Rule{Tool: r.Tool, Command: r.Command, Path: r.Path, Decision: r.Decision}
		if r.Decision == rules.Allow {
			return nil, apierr.Invalid("permissions[%d].decision: a session's rules may ask or deny; allow rules belong in the configuration file", i)
		}
		if err := out[i].Check(); err != nil {
			return nil, apierr.Invalid("permissions[%d].%v", i, err)
		}
	}
	return out, nil
}
