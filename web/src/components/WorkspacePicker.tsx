import { useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
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
                  {w.open ? `open · ${w.clients} attached` : 'closed'}
                </span>
              </a>
            </li>
          ))}
          {state.workspaces.length === 0 && <li class="muted">No workspace yet.</li>}
        </ul>
      </div>
    </main>
  );
}
