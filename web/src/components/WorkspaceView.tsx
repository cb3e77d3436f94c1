import { useEffect, useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import { sortedSessions, pendingPermissions, isBusy } from '../lib/state';
import { personOf, useController, shortId } from './context';
import { SessionView } from './SessionView';
import { Icon } from './Icon';

const connLabel = {
  connecting: 'Connecting',
  live: 'Live',
  reconnecting: 'Reconnecting',
  offline: 'Offline',
} as const;

export function ConnIndicator({ state }: { state: AppState }) {
  const label = state.syncing && state.conn === 'live' ? 'Syncing' : connLabel[state.conn];
  return (
    <span
      class={`conn conn-${state.syncing && state.conn === 'live' ? 'syncing' : state.conn}`}
      role="status"
      aria-live="polite"
      data-testid="conn"
      data-state={state.conn}
      title={state.connDetail ?? (state.conn === 'live' ? 'Receiving live events' : 'Events missed while away are replayed on reconnect')}
    >
      <span class="dot" aria-hidden="true" />
      {label}
    </span>
  );
}

function Presence({ state }: { state: AppState }) {
  const ws = state.ws;
  if (!ws) return null;
  const others = ws.clients.ids.filter((id) => id !== state.clientId);
  const label = (id: string) => personOf(state, id) ?? shortId(id);
  const count = Math.max(ws.clients.count, others.length + 1);
  return (
    <span class="presence" data-testid="presence" title={['you (' + shortId(state.clientId) + ')', ...others.map(label)].join(', ')}>
      <Icon name="users" /> {count} attached
      {others.length > 0 && <span class="muted small"> · {others.slice(0, 3).map(label).join(', ')}{others.length > 3 ? '…' : ''}</span>}
    </span>
  );
}

function McpBadge({ state }: { state: AppState }) {
  const [open, setOpen] = useState(false);
  const servers = Object.values(state.ws?.mcp ?? {}).filter((m) => !m.session_id || m.session_id === state.sessionId);
  if (servers.length === 0) return null;
  const failed = servers.filter((s) => s.status === 'failed').length;
  return (
    <span class="mcp">
      <button type="button" class={`chip ${failed ? 'chip-error' : ''}`} aria-expanded={open} onClick={() => setOpen(!open)}>
        MCP {servers.filter((s) => s.status === 'connected').length}/{servers.length}
      </button>
      {open && (
        <ul class="popover" aria-label="MCP servers">
          {servers.map((s) => (
            <li key={s.name}>
              <strong>{s.name}</strong> <span class={`status status-${s.status}`}>{s.status}</span>
              {s.tools.length > 0 && <div class="muted small">{s.tools.join(', ')}</div>}
              {s.error && <div class="error small">{s.error}</div>}
            </li>
          ))}
        </ul>
      )}
    </span>
  );
}

export function WorkspaceView({ state }: { state: AppState }) {
  const c = useController();
  const [drawer, setDrawer] = useState(false);
  const ws = state.ws;
  const sessions = ws ? sortedSessions(ws) : [];
  const current = state.sessionId && ws?.sessions[state.sessionId];

  useEffect(() => {
    if (!drawer) return;
    // Capture, so that closing the drawer takes the Esc before the session
    // view reads it as "cancel the run".
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return;
      e.preventDefault();
      setDrawer(false);
    };
    addEventListener('keydown', onKey, true);
    return () => removeEventListener('keydown', onKey, true);
  }, [drawer]);

  return (
    <div class={`layout ${drawer ? 'drawer-open' : ''}`}>
      <header class="topbar">
        <button type="button" class="icon menu-btn" aria-label="Sessions" aria-expanded={drawer} onClick={() => setDrawer(!drawer)}>
          <Icon name="menu" />
        </button>
        <a href="#/" class="brand" title="All workspaces">
          Tandem
        </a>
        <span class="ws-path" title={ws?.workspace.path}>
          {ws?.workspace.path ?? '…'}
        </span>
        <span class="spacer" />
        <McpBadge state={state} />
        <Presence state={state} />
        <ConnIndicator state={state} />
      </header>
      {ws?.closing && (
        <div class="banner" role="status">
          The workspace is closing ({ws.closing}). It reopens when this page reconnects.
        </div>
      )}
      <nav class="sidebar" aria-label="Sessions">
        <div class="sidebar-head">
          <button
            type="button"
            class="primary"
            onClick={() => {
              setDrawer(false);
              void c.createSession();
            }}
          >
            + New session
          </button>
        </div>
        <ul class="session-list">
          {sessions.map((s) => {
            const st = ws!.sessions[s.id];
            const waiting = pendingPermissions(st).length;
            return (
              <li key={s.id}>
                <a
                  href={`#/w/${state.workspaceId}/s/${s.id}`}
                  class={`session-item ${s.id === state.sessionId ? 'active' : ''}`}
                  aria-current={s.id === state.sessionId ? 'page' : undefined}
                  onClick={() => setDrawer(false)}
                >
                  <span class="title">{s.title || 'Untitled session'}</span>
                  <span class="meta muted small">
                    {isBusy(st) && <span class="busy-dot" title="Working" aria-label="working" />}
                    {waiting > 0 && (
                      <span class="badge" title="Permissions waiting">
                        {waiting}
                      </span>
                    )}
                    {s.model} · {new Date(s.updated_at).toLocaleString()}
                  </span>
                </a>
              </li>
            );
          })}
          {ws && sessions.length === 0 && <li class="muted pad">No session yet.</li>}
        </ul>
      </nav>
      <div class="scrim" onClick={() => setDrawer(false)} />
      <main class="main">
        {current ? (
          <SessionView key={current.session.id} state={state} session={current} />
        ) : (
          <div class="empty">
            {ws ? (
              <>
                {state.sessionId && ws.deleted[state.sessionId] && <p role="status">This session was deleted.</p>}
                <p>Pick a session, or start a new one.</p>
                <button type="button" class="primary" onClick={() => void c.createSession()}>
                  + New session
                </button>
              </>
            ) : (
              <p aria-busy="true">Loading the workspace…</p>
            )}
          </div>
        )}
      </main>
    </div>
  );
}
