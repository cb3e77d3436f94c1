import { render } from 'preact';
import { expect, test } from 'vitest';
import { applyEvent, newWorkspaceState } from '../lib/state';
import { env, time } from '../lib/testing';
import type { AppState } from '../lib/controller';
import { TokenScreen } from './TokenScreen';
import { WorkspacePicker } from './WorkspacePicker';
import { Ctl, who } from './context';
import { Controller } from '../lib/controller';
import { Api } from '../lib/api';

const appState = (over: Partial<AppState>): AppState =>
  ({ auth: 'ok', workspaces: [], conn: 'open', syncing: false, toasts: [], clientId: 'me', models: [], ...over }) as AppState;

test('names replace client ids: from the attached list, client.attached and the actors of events', () => {
  let ws = newWorkspaceState({
    id: 'w',
    path: '/p',
    open: true,
    clients: 2,
    created_at: time(0),
    attached: [{ client_id: 'c-alice', name: 'alice', since: time(0) }],
  });
  expect(ws.names).toEqual({ 'c-alice': 'alice' });
  expect(ws.clients.ids).toEqual(['c-alice']);
  ws = applyEvent(ws, { ...env(1, 'client.attached', { client_id: 'c-bob', clients: 3, name: 'bob' }) });
  ws = applyEvent(ws, { ...env(2, 'run.accepted', { run_id: 'r', state: 'running', position: 0 }), actor: { token_id: 't', name: 'carol', client_id: 'c-carol' } });
  const st = appState({ ws });
  expect(who(st, 'c-alice')).toBe('alice');
  expect(who(st, 'c-bob')).toBe('bob');
  expect(who(st, 'c-carol')).toBe('carol');
  expect(who(st, 'me')).toBe('you');
  expect(who(st, 'c-zed0000')).toBe('client c-ze');
  // Signed in as alice: alice's other client is told apart by its id.
  expect(who({ ...st, me: { token_id: 't', name: 'alice', role: 'member' } }, 'c-alice')).toBe('client c-al');
});

test('the token screen says who the current token belongs to', () => {
  const root = document.createElement('div');
  render(<TokenScreen state={appState({ auth: 'needed', me: { token_id: 't', name: 'alice', role: 'member' } })} />, root);
  expect(root.querySelector('[data-testid="signed-in-as"]')?.textContent).toBe('Signed in as alice (member). Paste another token to switch.');
  render(<TokenScreen state={appState({ auth: 'needed' })} />, root);
  expect(root.querySelector('[data-testid="signed-in-as"]')).toBeNull();
  render(null, root);
});

test('the workspace picker says who is signed in, and changing the token goes back to the token screen', () => {
  const c = new Controller({ api: new Api('tok'), clientId: 'me', schedule: (f) => f(), route: { get: () => '', set: () => {} } });
  const root = document.createElement('div');
  const st = appState({ me: { token_id: 't', name: 'bob', role: 'viewer' } });
  render(
    <Ctl.Provider value={c}>
      <WorkspacePicker state={st} />
    </Ctl.Provider>,
    root,
  );
  expect(root.querySelector('[data-testid="signed-in"]')?.textContent).toContain('Signed in as bob (viewer)');
  (root.querySelector('[data-testid="signed-in"] button') as HTMLButtonElement).click();
  expect(c.state.auth).toBe('needed');
  render(null, root);
});

test('the workspace picker tells each role where it may open a workspace', () => {
  const c = new Controller({ api: new Api('tok'), clientId: 'me', schedule: (f) => f(), route: { get: () => '', set: () => {} } });
  const root = document.createElement('div');
  const where = (me: AppState['me']) => {
    render(
      <Ctl.Provider value={c}>
        <WorkspacePicker state={appState({ me })} />
      </Ctl.Provider>,
      root,
    );
    return root.querySelector('[data-testid="where-to-open"]')?.textContent;
  };
  expect(where({ token_id: 't', name: 'm', role: 'member', workspace_roots: ['/srv/a', '/srv/b'] })).toBe('You may open workspaces inside /srv/a, /srv/b, or one listed below.');
  expect(where({ token_id: 't', name: 'm', role: 'member', workspace_roots: [] })).toContain('no workspace roots');
  expect(where({ token_id: 't', name: 'o', role: 'owner', workspace_roots: [] })).toContain('any directory but the server');
  expect(where({ token_id: 't', name: 'v', role: 'viewer' })).toContain('not open new ones');
  render(null, root);
});

test('the workspace picker offers an owner to forget a workspace whose directory is gone, and nobody else', () => {
  const c = new Controller({ api: new Api('tok'), clientId: 'me', schedule: (f) => f(), route: { get: () => '', set: () => {} } });
  const forgot: string[] = [];
  c.forgetWorkspace = async (wid: string) => {
    forgot.push(wid);
  };
  const root = document.createElement('div');
  const workspaces = [
    { id: 'gone', path: '/tmp/scratch', open: false, clients: 0, created_at: time(0), missing: true },
    { id: 'here', path: '/src/app', open: false, clients: 0, created_at: time(0) },
  ];
  const show = (role: 'owner' | 'member') => {
    render(
      <Ctl.Provider value={c}>
        <WorkspacePicker state={appState({ me: { token_id: 't', name: 'x', role }, workspaces })} />
      </Ctl.Provider>,
      root,
    );
    return [...root.querySelectorAll('.ws-list button')] as HTMLButtonElement[];
  };
  expect(root.textContent).toBe('');
  expect(show('member')).toHaveLength(0);
  expect(root.textContent).toContain('missing');
  const buttons = show('owner');
  expect(buttons.map((b) => b.getAttribute('aria-label'))).toEqual(['Forget /tmp/scratch']);
  buttons[0].click();
  expect(forgot).toEqual(['gone']);
  render(null, root);
});
