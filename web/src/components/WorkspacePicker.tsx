import { useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import type { Me } from '../lib/types';
import { useController } from './context';

export function WorkspacePicker({ state }: { state: AppState }) {
  const c = useController();
  const [path, setPath] = useState('');
  return (
    <main class="center-screen">
      <div class="card picker">
        <h1>Tandem</h1>
        {state.me && (
          <p class="signed-in muted small" data-testid="signed-in">
            Signed in as <strong>{state.me.name}</strong> ({state.me.role}) ·{' '}
            <button type="button" class="link" onClick={() => c.changeToken()}>
              change token
            </button>
          </p>
        )}
        <p class="muted">
          Pick a workspace, or open one by the absolute path of a project directory on the server's machine.
          {state.health && (
            <>
              {' '}
              Server {state.health.version}, default model <code>{state.health.default_model}</code>.
            </>
          )}
        </p>
        {state.me && <WhereToOpen me={state.me} />}
        <form
          class="row"
          onSubmit={(e) => {
            e.preventDefault();
            if (path.trim()) void c.openPath(path);
          }}
        >
          <label class="sr-only" for="ws-path">
            Workspace path
          </label>
          <input
            id="ws-path"
            placeholder="/home/you/project"
            value={path}
            spellcheck={false}
            onInput={(e) => setPath((e.target as HTMLInputElement).value)}
          />
          <button type="submit" class="primary" disabled={!path.trim()}>
            Open
          </button>
        </form>
        <ul class="ws-list" aria-label="Workspaces">
          {state.workspaces.map((w) => (
            <li key={w.id}>
              <a href={`#/w/${w.id}`} class="ws-item">
                <span class="path">{w.path}</span>
                <span class="muted small">
                  {w.missing ? 'missing: its directory is gone' : w.open ? `open · ${w.clients} attached` : 'closed'}
                </span>
              </a>
              {w.missing && state.me?.role === 'owner' && (
                <button
                  type="button"
                  class="link small"
                  aria-label={`Forget ${w.path}`}
                  onClick={() => void c.forgetWorkspace(w.id)}
                >
                  forget
                </button>
              )}
            </li>
          ))}
          {state.workspaces.length === 0 && <li class="muted">No workspace yet.</li>}
        </ul>
      </div>
    </main>
  );
}

/** Where this person may open a workspace (contract section 9): the server refuses the rest, and says why. */
function WhereToOpen({ me }: { me: Me }) {
  const roots = me.workspace_roots ?? [];
  let text;
  if (me.role === 'owner') {
    text = <>As an owner you may open any directory but the server's data dir.</>;
  } else if (me.role === 'viewer') {
    text = <>As a viewer you may watch the workspaces below, not open new ones.</>;
  } else if (roots.length === 0) {
    text = <>This server gives members no workspace roots: work in the workspaces an owner opened (below).</>;
  } else {
    text = (
      <>
        You may open workspaces inside{' '}
        {roots.map((r, i) => (
          <span key={r}>
            {i > 0 && ', '}
            <code>{r}</code>
          </span>
        ))}
        , or one listed below.
      </>
    );
  }
  return (
    <p class="muted small" data-testid="where-to-open">
      {text}
    </p>
  );
}
