package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// view implements store.Store on db. A *DB is the view with no fence; a
// Fenced store is one whose writes all check its lease first.
type view struct {
	db    *DB
	fence *Lease
}

// write queues stmts as one unit of the group commit.
func (v *view) write(ctx context.Context, stmts ...stmt) (rowsAffected int64, err error) {
	tag, err := v.db.batch.submitWait(ctx, v.fence, stmts...)
	if err != nil {
		return 0, statementError(err)
	}
	return tag.RowsAffected(), nil
}

// statementError gives a write's failure its store meaning.
func statementError(err error) error {
	if sqlState(err) == codeLeaseLost {
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return classify(err)
}

// ---- workspaces

const workspaceCols = `id, path, created_at, seq_reserved, recovered_through`

func scanWorkspace(r pgx.Row) (store.Workspace, error) {
	var w store.Workspace
	if err := r.Scan(&w.ID, &w.Path, &w.CreatedAt, &w.SeqReserved, &w.RecoveredThrough); err != nil {
		return store.Workspace{}, err
	}
	w.CreatedAt = utc(w.CreatedAt)
	return w, nil
}

// EnsureWorkspace implements store.Store. The insert gives way to a row
// with the same path (ON CONFLICT waits for a concurrent insert to commit),
// and the read-back, a statement of its own, sees whichever row won. An id
// already used by a different path yields store.ErrExists.
func (v *view) EnsureWorkspace(ctx context.Context, w store.Workspace) (store.Workspace, bool, error) {
	var got store.Workspace
	tags, err := v.db.direct(ctx, v.fence,
		stmt{sql: `INSERT INTO workspaces (id, path, created_at, seq_reserved) VALUES ($1, $2, $3, $4)
			ON CONFLICT (path) DO NOTHING`,
			args: []any{w.ID, w.Path, micro(w.CreatedAt), w.SeqReserved}},
		stmt{sql: `SELECT ` + workspaceCols + ` FROM workspaces WHERE path = $1`, args: []any{w.Path},
			dest: []any{&got.ID, &got.Path, &got.CreatedAt, &got.SeqReserved, &got.RecoveredThrough}},
	)
	switch {
	case err == nil && tags[1].RowsAffected() == 0:
		err = errors.New("the workspace vanished after its insert")
	case isUniqueViolation(err):
		err = fmt.Errorf("%w: %w", store.ErrExists, err)
	}
	if err != nil {
		return store.Workspace{}, false, fmt.Errorf("ensure workspace %s (%s): %w", w.ID, w.Path, statementError(err))
	}
	got.CreatedAt = utc(got.CreatedAt)
	return got, tags[0].RowsAffected() == 1, nil
}

// GetWorkspace implements store.Store.
func (v *view) GetWorkspace(ctx context.Context, id string) (store.Workspace, error) {
	w, err := scanWorkspace(v.db.queryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Workspace{}, fmt.Errorf("get workspace %s: %w", id, classify(err))
	}
	return w, nil
}

// ListWorkspaces implements store.Store. Equal creation times fall back to
// insertion order.
func (v *view) ListWorkspaces(ctx context.Context) ([]store.Workspace, error) {
	rows, err := v.db.query(ctx, `SELECT `+workspaceCols+` FROM workspaces ORDER BY created_at, ord`)
	out, err := collect(rows, err, func(r pgx.Rows) (store.Workspace, error) { return scanWorkspace(r) })
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return out, nil
}

// DeleteWorkspace implements store.Store, in one statement, like
// DeleteSession: the workspace row and, only when it was there, its
// sessions and everything they and the workspace hold, and its lease (a
// cluster's nodes then neither renew nor take it over).
func (v *view) DeleteWorkspace(ctx context.Context, id string) error {
	affected, err := v.write(ctx, stmt{sql: `
		WITH target AS (SELECT id FROM workspaces WHERE id = $1),
		s AS (SELECT id FROM sessions WHERE workspace_id IN (SELECT id FROM target)),
		m AS (DELETE FROM messages WHERE session_id IN (SELECT id FROM s)),
		a AS (DELETE FROM session_approvals WHERE session_id IN (SELECT id FROM s)),
		r AS (DELETE FROM run_attachments WHERE session_id IN (SELECT id FROM s)),
		i AS (DELETE FROM prompt_keys WHERE session_id IN (SELECT id FROM s)),
		e AS (DELETE FROM events WHERE workspace_id IN (SELECT id FROM target)),
		p AS (DELETE FROM pending WHERE workspace_id IN (SELECT id FROM target)),
		k AS (DELETE FROM checkpoints WHERE workspace_id IN (SELECT id FROM target)),
		l AS (DELETE FROM workspace_leases WHERE workspace_id IN (SELECT id FROM target)),
		d AS (DELETE FROM sessions WHERE workspace_id IN (SELECT id FROM target))
		DELETE FROM workspaces WHERE id IN (SELECT id FROM target)`,
		args: []any{id}})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete workspace %s: %w", id, err)
	}
	return nil
}

// ReserveSeq implements store.Store; store.ErrNotFound when the workspace
// does not exist.
func (v *view) ReserveSeq(ctx context.Context, workspaceID string, upTo int64) error {
	if err := v.raise(ctx, `UPDATE workspaces SET seq_reserved = GREATEST(seq_reserved, $1) WHERE id = $2`, workspaceID, upTo); err != nil {
		return fmt.Errorf("reserve seq %s/%d: %w", workspaceID, upTo, err)
	}
	return nil
}

// SetRecoveredThrough implements store.Store; store.ErrNotFound when the
// workspace does not exist.
func (v *view) SetRecoveredThrough(ctx context.Context, workspaceID string, seq int64) error {
	if err := v.raise(ctx, `UPDATE workspaces SET recovered_through = GREATEST(recovered_through, $1) WHERE id = $2`, workspaceID, seq); err != nil {
		return fmt.Errorf("set recovered through %s/%d: %w", workspaceID, seq, err)
	}
	return nil
}

// raise runs update, which raises one of the workspace's marks to n.
// PostgreSQL counts a matched row as updated even when GREATEST leaves the
// value as it was, so the not-found check stays exact.
func (v *view) raise(ctx context.Context, update, workspaceID string, n int64) error {
	affected, err := v.write(ctx, stmt{sql: update, args: []any{n, workspaceID}})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	return err
}

// ReserveBlock implements SeqBlocks.
func (v *view) ReserveBlock(ctx context.Context, workspaceID string, n int64) (first, last int64, err error) {
	if n <= 0 {
		return 0, 0, fmt.Errorf("reserve a block of %d seqs for %s: the size must be positive", n, workspaceID)
	}
	affected, err := v.write(ctx, stmt{
		sql: `UPDATE workspaces SET seq_reserved = GREATEST(seq_reserved,
				(SELECT COALESCE(MAX(seq), 0) FROM events WHERE workspace_id = $1)) + $2
			WHERE id = $1 RETURNING seq_reserved`,
		args: []any{workspaceID, n},
		dest: []any{&last},
	})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return 0, 0, fmt.Errorf("reserve %d seqs for %s: %w", n, workspaceID, err)
	}
	return last - n + 1, last, nil
}

// ---- sessions

const sessionCols = `id, workspace_id, title, model, reasoning_effort, config, created_at, updated_at, message_count,
	input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, context_tokens`

func scanSession(r pgx.Row) (store.Session, error) {
	var (
		s      store.Session
		config *string
		u      = &s.Usage
	)
	if err := r.Scan(&s.ID, &s.WorkspaceID, &s.Title, &s.Model, &s.ReasoningEffort, &config,
		&s.CreatedAt, &s.UpdatedAt, &s.MessageCount,
		&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.ReasoningTokens,
		&u.CostUSD, &s.ContextTokens); err != nil {
		return store.Session{}, err
	}
	if config != nil {
		s.Config = json.RawMessage(*config)
	}
	s.CreatedAt, s.UpdatedAt = utc(s.CreatedAt), utc(s.UpdatedAt)
	return s, nil
}

// CreateSession implements store.Store: store.ErrExists when the id is
// taken, store.ErrNotFound when the workspace does not exist.
func (v *view) CreateSession(ctx context.Context, s store.Session) error {
	_, err := v.write(ctx, stmt{sql: `
		INSERT INTO sessions (id, workspace_id, title, model, reasoning_effort, config, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		args: []any{s.ID, s.WorkspaceID, s.Title, s.Model, s.ReasoningEffort, jsonText(s.Config),
			micro(s.CreatedAt), micro(s.UpdatedAt)}})
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("create session %s: workspace %s: %w", s.ID, s.WorkspaceID, store.ErrNotFound)
	default:
		return fmt.Errorf("create session %s: %w", s.ID, err)
	}
}

// GetSession implements store.Store. A session of another workspace is
// reported as not found, so one workspace cannot reach into another.
func (v *view) GetSession(ctx context.Context, workspaceID, id string) (store.Session, error) {
	s, err := scanSession(v.db.queryRow(ctx,
		`SELECT `+sessionCols+` FROM sessions WHERE workspace_id = $1 AND id = $2`, workspaceID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("get session %s: %w", id, classify(err))
	}
	return s, nil
}

// ListSessions implements store.Store. Ties on updated_at are broken by
// created_at (newest first), then id, so the order is total and stable.
func (v *view) ListSessions(ctx context.Context, workspaceID string) ([]store.Session, error) {
	rows, err := v.db.query(ctx, `SELECT `+sessionCols+` FROM sessions
		WHERE workspace_id = $1 ORDER BY updated_at DESC, created_at DESC, id`, workspaceID)
	out, err := collect(rows, err, func(r pgx.Rows) (store.Session, error) { return scanSession(r) })
	if err != nil {
		return nil, fmt.Errorf("list sessions %s: %w", workspaceID, err)
	}
	return out, nil
}

// UpdateSession implements store.Store. It writes the mutable fields
// (title, model, reasoning effort, config, updated_at); the id, workspace
// and creation time are fixed. store.ErrNotFound when no such session.
func (v *view) UpdateSession(ctx context.Context, s store.Session) error {
	affected, err := v.write(ctx, updateSessionStmt(s))
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("update session %s: %w", s.ID, err)
	}
	return nil
}

func updateSessionStmt(s store.Session) stmt {
	return stmt{sql: `UPDATE sessions SET title = $1, model = $2, reasoning_effort = $3, config = $4, updated_at = $5
		WHERE workspace_id = $6 AND id = $7`,
		args: []any{s.Title, s.Model, s.ReasoningEffort, jsonText(s.Config), micro(s.UpdatedAt), s.WorkspaceID, s.ID}}
}

// TouchSession implements store.Store.
func (v *view) TouchSession(ctx context.Context, id string, at time.Time) error {
	affected, err := v.write(ctx, touchStmt(id, at))
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	}
	return nil
}

func touchStmt(id string, at time.Time) stmt {
	return stmt{sql: `UPDATE sessions SET updated_at = GREATEST(updated_at, $1) WHERE id = $2`, args: []any{micro(at), id}}
}

// usageStmt adds a run's usage to its session (store.SessionUsage).
func usageStmt(sessionID string, su store.SessionUsage) stmt {
	u := su.Add
	// A NULL cost adds nothing, and keeps an unknown cost unknown.
	return stmt{sql: `UPDATE sessions SET
		input_tokens = input_tokens + $1, output_tokens = output_tokens + $2,
		cache_read_tokens = cache_read_tokens + $3, cache_write_tokens = cache_write_tokens + $4,
		reasoning_tokens = reasoning_tokens + $5,
		cost_usd = CASE WHEN $6::double precision IS NULL THEN cost_usd ELSE COALESCE(cost_usd, 0) + $6 END,
		context_tokens = CASE WHEN $7::bigint > 0 THEN $7 ELSE context_tokens END
		WHERE id = $8`,
		args: []any{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.ReasoningTokens,
			u.CostUSD, su.ContextTokens, sessionID}}
}

// DeleteSession implements store.Store, in one statement: the session row
// and, only when it was in that workspace, its messages, events, pending
// requests and approvals.
func (v *view) DeleteSession(ctx context.Context, workspaceID, id string) error {
	affected, err := v.write(ctx, stmt{sql: `
		WITH target AS (SELECT id FROM sessions WHERE workspace_id = $1 AND id = $2),
		m AS (DELETE FROM messages WHERE session_id IN (SELECT id FROM target)),
		e AS (DELETE FROM events WHERE session_id IN (SELECT id FROM target)),
		p AS (DELETE FROM pending WHERE session_id IN (SELECT id FROM target)),
		a AS (DELETE FROM session_approvals WHERE session_id IN (SELECT id FROM target)),
		r AS (DELETE FROM run_attachments WHERE session_id IN (SELECT id FROM target)),
		k AS (DELETE FROM checkpoints WHERE session_id IN (SELECT id FROM target)),
		i AS (DELETE FROM prompt_keys WHERE session_id IN (SELECT id FROM target))
		DELETE FROM sessions WHERE id IN (SELECT id FROM target)`,
		args: []any{workspaceID, id}})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete session %s: %w", id, err)
	}
	return nil
}

// ---- messages

// PutMessage implements store.Store. ON CONFLICT DO UPDATE rewrites the
// row in place, so ord (the message's position) is kept, and leaves
// session_id alone: a message stays in the session it was first put in,
// which keeps the sessions' message counts exact.
func (v *view) PutMessage(ctx context.Context, m proto.Message) error {
	data, err := json.Marshal(m)
	if err == nil {
		_, err = v.write(ctx, putMessageStmt(m.ID, m.SessionID, data))
	}
	if err != nil {
		return fmt.Errorf("put message %s: %w", m.ID, err)
	}
	return nil
}

// putMessagesChunk is how many messages PutMessages writes per commit.
const putMessagesChunk = 1000

// PutMessages implements store.MessageWriter: each chunk is one unit of
// the group commit, so one transaction.
func (v *view) PutMessages(ctx context.Context, msgs []proto.Message) error {
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), putMessagesChunk)]
		msgs = msgs[len(chunk):]
		stmts := make([]stmt, len(chunk))
		for i, m := range chunk {
			data, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("put message %s: %w", m.ID, err)
			}
			stmts[i] = putMessageStmt(m.ID, m.SessionID, data)
		}
		if _, err := v.write(ctx, stmts...); err != nil {
			return fmt.Errorf("put messages of session %s: %w", chunk[0].SessionID, err)
		}
	}
	return nil
}

func putMessageStmt(id, sessionID string, data []byte) stmt {
	return stmt{sql: `INSERT INTO messages (id, session_id, data) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET data = excluded.data`,
		args: []any{id, sessionID, string(data)}}
}

// ListMessages implements store.Store.
func (v *view) ListMessages(ctx context.Context, sessionID string) ([]proto.Message, error) {
	rows, err := v.db.query(ctx, `SELECT data FROM messages WHERE session_id = $1 AND NOT rewound ORDER BY ord`, sessionID)
	out, err := collect(rows, err, func(r pgx.Rows) (proto.Message, error) {
		var (
			data []byte
			m    proto.Message
		)
		if err := r.Scan(&data); err != nil {
			return m, err
		}
		return m, json.Unmarshal(data, &m)
	})
	if err != nil {
		return nil, fmt.Errorf("list messages %s: %w", sessionID, err)
	}
	return out, nil
}

// ---- events

const eventCols = `workspace_id, seq, session_id, run_id, type, in_history, envelope`

func scanEvent(r pgx.Rows) (store.Event, error) {
	var e store.Event
	err := r.Scan(&e.WorkspaceID, &e.Seq, &e.SessionID, &e.RunID, &e.Type, &e.InHistory, &e.Envelope)
	return e, err
}

// AppendEvent implements store.Store. A seq already used in the workspace
// yields store.ErrExists: seqs are handed out once and never rewritten.
func (v *view) AppendEvent(ctx context.Context, e store.Event) error {
	return v.AppendEvents(ctx, []store.Event{e})
}

// AppendEvents implements store.Store. The events are one unit of the
// group commit: their statements share its transaction and commit or fail
// together.
func (v *view) AppendEvents(ctx context.Context, es []store.Event) error {
	if len(es) == 0 {
		return nil
	}
	msgs := store.MessagesToWrite(es)
	stmts := make([]stmt, 0, len(es)+2)
	for i, e := range es {
		if l := msgs[i]; l != nil {
			data, err := store.MessageData(l)
			if err != nil {
				return eventError(e, err)
			}
			stmts = append(stmts, putMessageStmt(l.Message.ID, l.Message.SessionID, data))
		}
		if e.Session != nil {
			stmts = append(stmts, updateSessionStmt(*e.Session))
		}
		if !e.Touch.IsZero() {
			stmts = append(stmts, touchStmt(e.SessionID, e.Touch))
		}
		if e.Usage != nil && e.SessionID != "" {
			stmts = append(stmts, usageStmt(e.SessionID, *e.Usage))
		}
		if a := e.Attachments; a != nil {
			stmts = append(stmts, stmt{sql: `INSERT INTO run_attachments (run_id, message_id, session_id, seq, data) VALUES ($1, $2, $3, $4, $5)`,
				args: []any{e.RunID, a.MessageID, e.SessionID, e.Seq, nonNil(a.Data)}})
		}
		if e.Type == proto.EventRunCompleted && e.RunID != "" {
			stmts = append(stmts, stmt{sql: `DELETE FROM run_attachments WHERE run_id = $1`, args: []any{e.RunID}})
		}
		if k := e.PromptKey; k != nil {
			stmts = append(stmts,
				stmt{sql: `DELETE FROM prompt_keys WHERE session_id = $1 AND accepted_at < $2`,
					args: []any{e.SessionID, k.At.Add(-store.PromptKeyTTL).UnixMilli()}},
				stmt{sql: `INSERT INTO prompt_keys (session_id, idem_key, run_id, accepted_at) VALUES ($1, $2, $3, $4)
					ON CONFLICT (session_id, idem_key) DO UPDATE SET run_id = excluded.run_id, accepted_at = excluded.accepted_at`,
					args: []any{e.SessionID, k.Key, e.RunID, k.At.UnixMilli()}})
		}
		stmts = append(stmts, stmt{sql: `INSERT INTO events (` + eventCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			args: []any{e.WorkspaceID, e.Seq, e.SessionID, e.RunID, e.Type, e.InHistory, nonNil(e.Envelope)}})
	}
	_, err := v.write(ctx, stmts...)
	return eventError(es[0], err)
}

// eventError wraps err, naming the (first) event it is about.
func eventError(e store.Event, err error) error {
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("append event %s/%d: %w: %w", e.WorkspaceID, e.Seq, store.ErrExists, err)
	default:
		return fmt.Errorf("append event %s/%d: %w", e.WorkspaceID, e.Seq, err)
	}
}

// WorkspaceEvents implements store.Store. An open upper bound becomes
// MaxInt64 so the query keeps one shape: a primary-key range scan.
func (v *view) WorkspaceEvents(ctx context.Context, workspaceID string, afterSeq, upToSeq int64, limit int) ([]store.Event, error) {
	if upToSeq <= 0 {
		upToSeq = math.MaxInt64
	}
	rows, err := v.db.query(ctx, `SELECT `+eventCols+` FROM events
		WHERE workspace_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT $4`,
		workspaceID, afterSeq, upToSeq, noLimit(limit))
	out, err := collect(rows, err, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("workspace events %s after %d: %w", workspaceID, afterSeq, err)
	}
	return out, nil
}

// SessionEvents implements store.Store.
func (v *view) SessionEvents(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Event, error) {
	rows, err := v.db.query(ctx, `SELECT `+eventCols+` FROM events
		WHERE session_id = $1 AND seq > $2 AND in_history ORDER BY seq LIMIT $3`,
		sessionID, afterSeq, noLimit(limit))
	out, err := collect(rows, err, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("session events %s after %d: %w", sessionID, afterSeq, err)
	}
	return out, nil
}

// RunAttachments implements store.Store.
func (v *view) RunAttachments(ctx context.Context, runID string) ([]store.Attachments, error) {
	rows, err := v.db.query(ctx, `SELECT message_id, data FROM run_attachments WHERE run_id = $1 ORDER BY seq`, runID)
	out, err := collect(rows, err, func(r pgx.Rows) (a store.Attachments, err error) {
		return a, r.Scan(&a.MessageID, &a.Data)
	})
	if err != nil {
		return nil, fmt.Errorf("attachments of run %s: %w", runID, err)
	}
	return out, nil
}

// PromptByKey implements store.Store.
func (v *view) PromptByKey(ctx context.Context, sessionID, key string, since time.Time) (string, error) {
	var runID string
	err := v.db.queryRow(ctx, `SELECT run_id FROM prompt_keys WHERE session_id = $1 AND idem_key = $2 AND accepted_at >= $3`,
		sessionID, key, since.UnixMilli()).Scan(&runID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("prompt of key in session %s: %w", sessionID, classify(err))
	}
	return runID, nil
}

// MaxSeq implements store.Store.
func (v *view) MaxSeq(ctx context.Context, workspaceID string) (int64, error) {
	var seq int64
	if err := v.db.queryRow(ctx,
		`SELECT COALESCE(MAX(seq), 0) FROM events WHERE workspace_id = $1`, workspaceID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("max seq %s: %w", workspaceID, classify(err))
	}
	return seq, nil
}

// ---- pending requests

const pendingCols = `request_id, workspace_id, session_id, run_id, kind, data, created_at, settled, resolved`

func scanPending(r pgx.Row) (store.Pending, error) {
	var (
		p    store.Pending
		data *string
	)
	if err := r.Scan(&p.RequestID, &p.WorkspaceID, &p.SessionID, &p.RunID, &p.Kind, &data, &p.CreatedAt, &p.Settled, &p.Resolved); err != nil {
		return store.Pending{}, err
	}
	if data != nil {
		p.Data = json.RawMessage(*data)
	}
	p.CreatedAt = utc(p.CreatedAt)
	return p, nil
}

// PutPending implements store.Store as an upsert by request id, so a run
// can rewrite its request without a delete first. The row is updated in
// place, keeping its place among requests created at the same instant.
func (v *view) PutPending(ctx context.Context, p store.Pending) error {
	if _, err := v.write(ctx, stmt{sql: `
		INSERT INTO pending (` + pendingCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (request_id) DO UPDATE SET
			workspace_id = excluded.workspace_id, session_id = excluded.session_id,
			run_id = excluded.run_id, kind = excluded.kind, data = excluded.data,
			created_at = excluded.created_at, settled = excluded.settled,
			resolved = excluded.resolved`,
		args: []any{p.RequestID, p.WorkspaceID, p.SessionID, p.RunID, p.Kind, jsonText(p.Data), micro(p.CreatedAt), p.Settled, p.Resolved}}); err != nil {
		return fmt.Errorf("put pending %s: %w", p.RequestID, err)
	}
	return nil
}

// SwapPending implements PendingSwapper.
func (v *view) SwapPending(ctx context.Context, old, p store.Pending) (bool, error) {
	if old.RequestID != p.RequestID {
		return false, fmt.Errorf("swap pending %s for %s: not the same request", old.RequestID, p.RequestID)
	}
	affected, err := v.write(ctx, stmt{sql: `
		UPDATE pending SET workspace_id = $2, session_id = $3, run_id = $4, kind = $5, data = $6,
			created_at = $7, settled = $8
		WHERE request_id = $1 AND data IS NOT DISTINCT FROM $9 AND settled = $10`,
		args: []any{p.RequestID, p.WorkspaceID, p.SessionID, p.RunID, p.Kind, jsonText(p.Data), micro(p.CreatedAt), p.Settled,
			jsonText(old.Data), old.Settled}})
	if err != nil {
		return false, fmt.Errorf("swap pending %s: %w", p.RequestID, err)
	}
	if affected == 1 {
		return true, nil
	}
	if _, err := v.GetPending(ctx, p.RequestID); err != nil {
		return false, fmt.Errorf("swap pending: %w", err)
	}
	return false, nil
}

// ResolvePending implements store.Store: the update's condition decides
// which answer wins, whichever node sends it (a row being updated by
// another transaction is waited for, then its condition read again).
func (v *view) ResolvePending(ctx context.Context, workspaceID, requestID string, data json.RawMessage) (bool, error) {
	affected, err := v.write(ctx, stmt{sql: `UPDATE pending SET data = $3, resolved = true
		WHERE request_id = $1 AND workspace_id = $2 AND NOT resolved`,
		args: []any{requestID, workspaceID, jsonText(data)}})
	if err != nil {
		return false, fmt.Errorf("resolve pending %s: %w", requestID, err)
	}
	if affected == 1 {
		return true, nil
	}
	return false, v.pendingExists(ctx, workspaceID, requestID)
}

// SettlePending implements store.Store.
func (v *view) SettlePending(ctx context.Context, workspaceID, requestID string) error {
	affected, err := v.write(ctx, stmt{sql: `UPDATE pending SET settled = true WHERE request_id = $1 AND workspace_id = $2`,
		args: []any{requestID, workspaceID}})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("settle pending %s: %w", requestID, err)
	}
	return nil
}

// pendingExists is nil when the workspace has the request, else
// store.ErrNotFound (or the read's error).
func (v *view) pendingExists(ctx context.Context, workspaceID, requestID string) error {
	var one int
	err := v.db.queryRow(ctx, `SELECT 1 FROM pending WHERE request_id = $1 AND workspace_id = $2`,
		requestID, workspaceID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("resolve pending %s: %w", requestID, err)
	}
	return nil
}

// DeletePending implements store.Store.
func (v *view) DeletePending(ctx context.Context, requestID string) error {
	affected, err := v.write(ctx, stmt{sql: `DELETE FROM pending WHERE request_id = $1`, args: []any{requestID}})
	if err == nil && affected == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete pending %s: %w", requestID, err)
	}
	return nil
}

// GetPending implements store.Store.
func (v *view) GetPending(ctx context.Context, requestID string) (store.Pending, error) {
	p, err := scanPending(v.db.queryRow(ctx, `SELECT `+pendingCols+` FROM pending WHERE request_id = $1`, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Pending{}, fmt.Errorf("get pending %s: %w", requestID, classify(err))
	}
	return p, nil
}

// ListPending implements store.Store. Equal creation times fall back to
// insertion order. It reads only unsettled rows, through a partial index,
// however many settled ones the workspace has.
func (v *view) ListPending(ctx context.Context, workspaceID string) ([]store.Pending, error) {
	out, err := v.listPending(ctx, `SELECT `+pendingCols+` FROM pending
		WHERE workspace_id = $1 AND NOT settled ORDER BY created_at, ord`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list pending %s: %w", workspaceID, err)
	}
	return out, nil
}

// RunPending implements store.Store.
func (v *view) RunPending(ctx context.Context, runID string) ([]store.Pending, error) {
	out, err := v.listPending(ctx, `SELECT `+pendingCols+` FROM pending
		WHERE run_id = $1 ORDER BY created_at, ord`, runID)
	if err != nil {
		return nil, fmt.Errorf("list pending of run %s: %w", runID, err)
	}
	return out, nil
}

func (v *view) listPending(ctx context.Context, query, arg string) ([]store.Pending, error) {
	rows, err := v.db.query(ctx, query, arg)
	return collect(rows, err, func(r pgx.Rows) (store.Pending, error) { return scanPending(r) })
}

// ---- approvals

// ApproveForSession implements store.Store.
func (v *view) ApproveForSession(ctx context.Context, sessionID, kind string) error {
	if _, err := v.write(ctx, stmt{sql: `INSERT INTO session_approvals (session_id, kind) VALUES ($1, $2)
		ON CONFLICT DO NOTHING`, args: []any{sessionID, kind}}); err != nil {
		return fmt.Errorf("approve %s for session %s: %w", kind, sessionID, err)
	}
	return nil
}

// SessionApprovals implements store.Store.
func (v *view) SessionApprovals(ctx context.Context, sessionID string) ([]string, error) {
	rows, err := v.db.query(ctx, `SELECT kind FROM session_approvals WHERE session_id = $1`, sessionID)
	kinds, err := collect(rows, err, func(r pgx.Rows) (k string, err error) { return k, r.Scan(&k) })
	if err != nil {
		return nil, fmt.Errorf("approvals of session %s: %w", sessionID, err)
	}
	return kinds, nil
}
