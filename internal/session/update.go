package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/sandbox"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// DefaultTitle is the title of a session until its first prompt names it.
const DefaultTitle = "New session"

// SetModel switches the session's model (and reasoning effort, when given);
// the next model request uses them.
func (s *Service) SetModel(ctx context.Context, wsID, sessionID string, req proto.SetModelRequest) (proto.Session, error) {
	if strings.TrimSpace(req.Model) == "" {
		return proto.Session{}, apierr.Invalid("model is required")
	}
	if err := apierr.CheckLen("model", req.Model, maxModel); err != nil {
		return proto.Session{}, err
	}
	ws, err := s.cfg.Workspaces.Get(ctx, wsID)
	if err != nil {
		return proto.Session{}, err
	}
	if err := s.validateModel(ws, req.Model); err != nil {
		return proto.Session{}, err
	}
	if req.ReasoningEffort != nil {
		// An explicit empty effort is a mistake, not a reset: omit the field
		// to keep the current one.
		if *req.ReasoningEffort == "" {
			return proto.Session{}, apierr.Invalid("reasoning_effort must be one of %s, got \"\"", strings.Join(reasoningEfforts, ", "))
		}
		if err := ValidReasoningEffort(*req.ReasoningEffort); err != nil {
			return proto.Session{}, err
		}
	}
	var previous string
	ws, rec, err := s.update(ctx, wsID, sessionID, func(rec *store.Session) bool {
		previous = rec.Model
		rec.Model = req.Model
		if req.ReasoningEffort != nil {
			rec.ReasoningEffort = *req.ReasoningEffort
		}
		return true
	}, func(_ *workspace.Workspace, rec store.Session) workspace.Draft {
		return workspace.Draft{Type: proto.EventSessionModelChanged, SessionID: rec.ID, Data: proto.SessionModelChanged{
			Model: rec.Model, PreviousModel: previous, ReasoningEffort: rec.ReasoningEffort,
		}}
	})
	if err != nil {
		return proto.Session{}, err
	}
	return s.view(ws, rec), nil
}

// NameFromPrompt gives an untitled session a title made from its first
// prompt, so lists are readable without an extra model call.
func (s *Service) NameFromPrompt(ctx context.Context, wsID, sessionID, prompt string) error {
	title := titleFrom(prompt)
	if title == "" {
		return nil
	}
	_, _, err := s.update(ctx, wsID, sessionID, func(rec *store.Session) bool {
		if rec.Title != DefaultTitle {
			return false // named meanwhile
		}
		rec.Title = title
		return true
	}, func(ws *workspace.Workspace, rec store.Session) workspace.Draft {
		return workspace.Draft{Type: proto.EventSessionUpdated, SessionID: rec.ID, Data: s.view(ws, rec)}
	})
	return err
}

// titleFrom takes the prompt's first line, cut at a word boundary.
func titleFrom(prompt string) string {
	const maxTitle = 60
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(line) <= maxTitle {
		return line
	}
	runes := []rune(line)[:maxTitle]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > maxTitle/2 {
		cut = cut[:i]
	}
	return strings.TrimSpace(cut) + "…"
}

// update applies change to the stored session under the session's write
// lock, so concurrent updates of it (a model switch, a title) never undo
// each other. The lock is the session's own: updates of other sessions,
// and the writes and emits they wait on, never hold this one up.
// change reports whether it changed anything; when it did not, nothing is
// written. announce, when not nil, makes the event that announces the
// change, which is written with it in one transaction: a crash can lose
// neither without the other.
func (s *Service) update(ctx context.Context, wsID, sessionID string, change func(*store.Session) bool, announce func(*workspace.Workspace, store.Session) workspace.Draft) (*workspace.Workspace, store.Session, error) {
	defer s.writes.Lock(sessionID)()
	ws, rec, err := s.Lookup(ctx, wsID, sessionID)
	if err != nil {
		return nil, store.Session{}, err
	}
	if !change(&rec) {
		return ws, rec, nil
	}
	rec.UpdatedAt = time.Now().UTC().Truncate(time.Microsecond)
	if announce == nil {
		err = s.cfg.Store.UpdateSession(ctx, rec)
	} else {
		d := announce(ws, rec)
		d.Session = &rec
		_, err = ws.Emit(ctx, d)
	}
	// Dropped even after an error: the write may have landed all the same.
	s.cached.drop(rec.ID)
	if err != nil {
		return nil, store.Session{}, fmt.Errorf("update session %s: %w", rec.ID, err)
	}
	s.changes.Add(1)
	return ws, rec, nil
}

// updateSettings is update for a change (which reports whether it changed
// anything) of the session's record and its stored Settings; what names
// the change in errors. Settings that cannot be read are kept, not
// overwritten.
func (s *Service) updateSettings(ctx context.Context, wsID, sessionID, what string, change func(*store.Session, *Settings) bool, announce func(*workspace.Workspace, store.Session) workspace.Draft) (*workspace.Workspace, store.Session, error) {
	var encodeErr error
	ws, rec, err := s.update(ctx, wsID, sessionID, func(rec *store.Session) bool {
		var settings Settings
		if len(rec.Config) > 0 {
			if encodeErr = json.Unmarshal(rec.Config, &settings); encodeErr != nil {
				return false // keep the stored settings rather than lose them
			}
		}
		if !change(rec, &settings) {
			return false
		}
		conf, err := json.Marshal(settings)
		if err != nil {
			encodeErr = err
			return false
		}
		rec.Config = conf
		return true
	}, announce)
	if err != nil {
		return nil, store.Session{}, err
	}
	if encodeErr != nil {
		return nil, store.Session{}, fmt.Errorf("update %s of %s: %w", what, sessionID, encodeErr)
	}
	return ws, rec, nil
}

// SetProvider replaces the session's provider settings; the API key stays in
// memory, the rest is stored.
func (s *Service) SetProvider(ctx context.Context, wsID, sessionID string, p *proto.Provider) error {
	if err := ValidProvider(p); err != nil {
		return err
	}
	stored := *p
	stored.APIKey = ""
	_, rec, err := s.updateSettings(ctx, wsID, sessionID, "provider", func(_ *store.Session, st *Settings) bool {
		st.Provider = &stored
		return true
	}, nil)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if p.APIKey != "" {
		s.keys[rec.ID] = p.APIKey
	}
	s.mu.Unlock()
	// Again, now that the key is in place: a run that read the settings
	// in between has the new provider with the old key.
	s.changes.Add(1)
	return nil
}

// applyCompaction is c with the options' fields set.
func applyCompaction(c proto.Compaction, o proto.CompactionOptions) proto.Compaction {
	if o.Auto != nil {
		c.Auto = *o.Auto
	}
	if o.Threshold != nil {
		c.Threshold = *o.Threshold
	}
	return c
}

// validCompaction refuses a threshold outside (0, 1]; nil is valid.
func validCompaction(o *proto.CompactionOptions) error {
	if o == nil || o.Threshold == nil {
		return nil
	}
	if t := *o.Threshold; !(t > 0 && t <= 1) {
		return apierr.Invalid("compaction.threshold must be above 0 and at most 1 (a fraction of the model's context window), got %v", t)
	}
	return nil
}

// Bounds of the tool lists a session may carry.
const (
	maxToolNames   = 1024
	maxToolNameLen = 256
)

func validToolList(field string, names []string) error {
	if len(names) > maxToolNames {
		return apierr.Invalid("%s has %d names; at most %d are allowed", field, len(names), maxToolNames)
	}
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			return apierr.Invalid("%s[%d] must not be empty", field, i)
		}
		if err := apierr.CheckLen(fmt.Sprintf("%s[%d]", field, i), n, maxToolNameLen); err != nil {
			return err
		}
	}
	return nil
}

// Update changes the session's title, compaction, permission mode or tool
// lists (PATCH): the fields given, checked first, so that a bad one changes
// nothing. The change and its session.updated are written together. A
// running run reads the new settings before its next model request.
func (s *Service) Update(ctx context.Context, wsID, sessionID string, req proto.UpdateSessionRequest) (proto.Session, error) {
	if req.Title != nil {
		if strings.TrimSpace(*req.Title) == "" {
			return proto.Session{}, apierr.Invalid("title must not be empty")
		}
		if err := apierr.CheckLen("title", *req.Title, maxTitle); err != nil {
			return proto.Session{}, err
		}
	}
	if err := validCompaction(req.Compaction); err != nil {
		return proto.Session{}, err
	}
	if m := req.PermissionMode; m != nil && !slices.Contains(permissionModes, *m) {
		return proto.Session{}, apierr.Invalid("permission_mode must be one of %s, got %q", strings.Join(permissionModes, ", "), *m)
	}
	if req.AvailableTools != nil {
		if err := validToolList("available_tools", *req.AvailableTools); err != nil {
			return proto.Session{}, err
		}
	}
	if req.ExcludedTools != nil {
		if err := validToolList("excluded_tools", *req.ExcludedTools); err != nil {
			return proto.Session{}, err
		}
	}
	if err := validSandbox(req.SandboxOptions); err != nil {
		return proto.Session{}, err
	}
	var widening error
	ws, rec, err := s.updateSettings(ctx, wsID, sessionID, "session", func(rec *store.Session, settings *Settings) bool {
		if patch := SandboxPatch(req.SandboxOptions); !patch.Empty() {
			ws, err := s.cfg.Workspaces.Get(ctx, wsID)
			if err != nil {
				widening = err
				return false
			}
			base := s.sandboxBase(ws)
			if widening = checkWidening(ctx, SandboxWidening(settings.SandboxOf(base), req.SandboxOptions)); widening != nil {
				return false // a refused request changes nothing
			}
			var own sandbox.Patch
			if settings.Sandbox != nil {
				own = *settings.Sandbox
			}
			own = sandbox.Patch{Mode: or(patch.Mode, own.Mode), Network: or(patch.Network, own.Network), Read: or(patch.Read, own.Read), Write: or(patch.Write, own.Write)}
			settings.Sandbox = storedPatch(own)
		}
		if req.Title != nil {
			rec.Title = *req.Title
		}
		if req.Compaction != nil {
			c := applyCompaction(settings.CompactionOrDefault(), *req.Compaction)
			settings.Compaction = &c
		}
		if req.PermissionMode != nil {
			settings.PermissionMode = *req.PermissionMode
		}
		if req.AvailableTools != nil {
			settings.AvailableTools = *req.AvailableTools
		}
		if req.ExcludedTools != nil {
			settings.ExcludedTools = *req.ExcludedTools
		}
		// Even an update that changes nothing is announced: the client
		// asked, and every client then knows the settings.
		return true
	}, func(ws *workspace.Workspace, rec store.Session) workspace.Draft {
		return workspace.Draft{Type: proto.EventSessionUpdated, SessionID: rec.ID, Data: s.view(ws, rec)}
	})
	if err == nil {
		err = widening
	}
	if err != nil {
		return proto.Session{}, err
	}
	return s.view(ws, rec), nil
}

// or is a when given, else b.
func or[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
