package tui

import (
	"encoding/json"
	"fmt"

	tea "charm.land/bubbletea/v2"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// resolvedData is permission.resolved's data with the optional name of
// who answered (section 9).
type resolvedData struct {
	proto.PermissionResolved
	ResolvedByName string `json:"resolved_by_name,omitempty"`
}

// presenceData is client.attached/detached's data with the optional name.
type presenceData struct {
	proto.ClientPresence
	Name string `json:"name,omitempty"`
}

// event applies one event of the stream.
func (m Model) event(ev proto.Event) (tea.Model, tea.Cmd) {
	switch ev.Type {
	case proto.EventStreamOpened:
		reconnect := m.conn == "reconnecting…"
		m.conn = "live"
		m.flash = ""
		if reconnect {
			// A permission asked while the stream was down is in the
			// pending list, if the replay did not carry it.
			return m, m.refreshPending()
		}
		return m, nil
	case proto.EventStreamReset:
		m.flash = "missed events while away; reloaded the session"
		return m.switchTo(m.sess)
	case proto.EventStreamEvicted:
		m.conn = "reconnecting…"
		return m, nil
	case proto.EventClientAttached, proto.EventClientDetached:
		if d, err := client.DecodeData[presenceData](ev); err == nil {
			m.clients = d.Clients
			if d.Name != "" {
				m.tr.names[d.ClientID] = d.Name
			}
		}
		return m, nil
	case proto.EventWorkspaceClosing:
		if d, err := client.DecodeData[proto.WorkspaceClosing](ev); err == nil {
			m.flash = "the server is closing the workspace (" + d.Reason + ")"
		}
		return m, nil
	}
	if a := ev.Actor; a != nil && a.ClientID != "" && a.Name != "" {
		// Who caused the event (section 9): the status line's "working
		// (NAME)" and the notices name people rather than client ids.
		m.tr.names[a.ClientID] = a.Name
	}
	if ev.SessionID != m.sess.ID || m.sess.ID == "" {
		return m, nil
	}
	if m.loading {
		if len(m.early) >= maxEarly {
			// Too many to keep: a history loaded after them says what
			// they said.
			m.early, m.stale = nil, true
		}
		m.early = append(m.early, ev)
		return m, nil
	}
	switch ev.Type {
	case proto.EventSessionUpdated:
		if s, err := client.DecodeData[proto.Session](ev); err == nil {
			m.sess = s
		}
	case proto.EventSessionRewound:
		return m.rewound(ev)
	case proto.EventSessionDeleted:
		m.tr.notice(entryError, "this session was deleted; /sessions picks another, /new starts one")
	case proto.EventSessionModelChanged:
		if d, err := client.DecodeData[proto.SessionModelChanged](ev); err == nil {
			m.sess.Model, m.sess.ReasoningEffort = d.Model, d.ReasoningEffort
			m.tr.notice(entryNotice, fmt.Sprintf("model: %s → %s", d.PreviousModel, d.Model))
		}
	case proto.EventSessionLog:
		if d, err := client.DecodeData[proto.SessionLog](ev); err == nil && d.Level != "info" && d.Level != "debug" {
			m.tr.notice(entryNotice, "["+d.Level+"] "+d.Message)
		}
	case proto.EventRunAccepted:
		d, err := client.DecodeData[proto.RunAccepted](ev)
		if err != nil {
			break
		}
		m.runBy[d.RunID] = d.ClientID
		switch d.State {
		case proto.RunQueued:
			m.queue = append(m.queue, queued{runID: d.RunID, prompt: d.Prompt, clientID: d.ClientID})
		case proto.RunSteered:
			m.tr.notice(entrySteer, m.tr.who(d.ClientID, "")+" steered the run: "+d.Prompt)
		case proto.RunRunning:
			m.active = d.RunID
		}
	case proto.EventRunStarted:
		m.active = ev.RunID
		m.dropQueued(ev.RunID)
	case proto.EventRunCompleted:
		d, err := client.DecodeData[proto.RunCompleted](ev)
		if err != nil {
			break
		}
		if m.active == d.RunID {
			m.active = ""
		}
		m.dropQueued(d.RunID)
		switch d.Outcome {
		case proto.OutcomeCanceled:
			// A message cut by the cancel says "· canceled" already.
			if !m.tr.shows(d.RunID, proto.FinishCanceled) {
				m.tr.notice(entryNotice, "run canceled")
			}
		case proto.OutcomeError:
			msg := "the run failed"
			if d.Error != nil {
				msg += ": " + d.Error.Code + ": " + d.Error.Message
			}
			m.tr.notice(entryError, msg)
		case proto.OutcomeInterrupted:
			m.tr.notice(entryNotice, "run interrupted")
		}
		return m, m.refreshSession()
	case proto.EventMessageCreated, proto.EventMessageUpdated:
		if d, err := client.DecodeData[proto.Message](ev); err == nil {
			m.tr.upsert(d, "")
		}
	case proto.EventMessageDelta:
		if d, err := client.DecodeData[proto.MessageDelta](ev); err == nil {
			m.tr.delta(d)
		}
	case proto.EventToolStarted:
		if d, err := client.DecodeData[proto.ToolStarted](ev); err == nil {
			m.tr.setTool(d.ToolCallID, func(ts *toolState) { ts.state = "running" })
		}
	case proto.EventToolFinished:
		if d, err := client.DecodeData[proto.ToolFinished](ev); err == nil {
			m.tr.setTool(d.ToolCallID, func(ts *toolState) {
				ts.state = "done"
				if d.IsError {
					ts.state = "failed"
				}
				if ts.result == nil {
					ts.result = &proto.Part{Type: proto.PartToolResult, ToolCallID: d.ToolCallID, Content: d.Content, IsError: d.IsError}
				}
			})
			if d.Permission != "" {
				m.tr.notice(entryNotice, d.Name+": "+d.Permission)
			}
		}
	case proto.EventPermissionRequested:
		if d, err := client.DecodeData[proto.PermissionRequest](ev); err == nil {
			for _, p := range m.perms {
				if p.RequestID == d.RequestID {
					return m, nil
				}
			}
			m.perms = append(m.perms, d)
			m.notePermissionDiff(d)
			m.syncDialog()
		}
	case proto.EventPermissionResolved:
		if d, err := client.DecodeData[resolvedData](ev); err == nil {
			m.permissionResolved(d)
		}
	case proto.EventSessionCompactionStarted:
		m.tr.notice(entryNotice, "compacting the conversation…")
	case proto.EventSessionCompactionCompleted:
		if d, err := client.DecodeData[proto.CompactionCompleted](ev); err == nil {
			m.tr.notice(entryNotice, fmt.Sprintf("conversation summarized: %s → %s tokens", count(d.TokensBefore), count(d.TokensAfter)))
		}
	}
	return m, nil
}

func (m *Model) dropQueued(runID string) {
	for i, q := range m.queue {
		if q.runID == runID {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
}

// permissionResolved closes the request's dialog, wherever it was answered,
// and says who answered and how.
func (m *Model) permissionResolved(d resolvedData) {
	var req *proto.PermissionRequest
	for i, p := range m.perms {
		if p.RequestID == d.RequestID {
			req = &m.perms[i]
			m.perms = append(m.perms[:i:i], m.perms[i+1:]...)
			break
		}
	}
	what := "permission"
	if req != nil {
		what = req.ToolName
		m.tr.setTool(req.ToolCallID, func(ts *toolState) {
			if ts.state == "waiting for permission" {
				ts.state = d.Result
			}
		})
	}
	by := ""
	if d.ResolvedBy != "" || d.ResolvedByName != "" {
		by = " by " + m.tr.who(d.ResolvedBy, d.ResolvedByName)
	}
	line := fmt.Sprintf("%s: %s%s", what, d.Result, by)
	if d.Feedback != "" {
		line += ": " + d.Feedback
	}
	m.tr.notice(entryNotice, line)
	if m.dlg != nil && m.dlg.req.RequestID == d.RequestID {
		m.flash = line
	}
	m.syncDialog()
}

func (m Model) refreshSession() tea.Cmd {
	api, ws, sid := m.cfg.API, m.ws.ID, m.sess.ID
	return func() tea.Msg {
		ctx, cancel := contextWithTimeout()
		defer cancel()
		s, err := api.GetSession(ctx, ws, sid)
		return sessionMsg{sess: s, err: err, what: ""}
	}
}

var _ = json.Marshal
