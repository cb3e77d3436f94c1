import { render } from 'preact';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Api } from '../lib/api';
import { Controller } from '../lib/controller';
import { WorkspaceStream } from '../lib/stream';
import { FakeEventSource, env, message, session, time } from '../lib/testing';
import type { Session, Usage } from '../lib/types';
import { Ctl, useAppState } from './context';
import { SessionHeader } from './SessionHeader';
import { parseThreshold, percent } from './CompactionSettings';
import { OWNER_ONLY, parsePaths, widenings } from './SandboxSettings';

const W = '00000000-0000-4000-8000-000000000001';
const S = '00000000-0000-4000-8000-000000000002';

const usage = (input: number, output: number, cost?: number): Usage => ({
  input_tokens: input,
  output_tokens: output,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  reasoning_tokens: 0,
  ...(cost !== undefined ? { cost_usd: cost } : {}),
});

type Reply = { status: number; body?: unknown };

/** a server holding one open workspace with session S; patch answers PATCH .../sessions/S. */
function server(sess: Session, patch: (body: any) => Reply, extra: Record<string, unknown> = {}) {
  const patches: any[] = [];
  const routes: Record<string, unknown> = {
    '/v1/health': { status: 'ok', version: '1', default_model: 'echo' },
    '/v1/workspaces': { workspaces: [{ id: W, path: '/p', open: true, clients: 1, created_at: time(0) }] },
    [`/v1/workspaces/${W}`]: { id: W, path: '/p', open: true, clients: 1, created_at: time(0) },
    [`/v1/workspaces/${W}/sessions`]: { sessions: [sess] },
    [`/v1/workspaces/${W}/sessions/${S}`]: sess,
    [`/v1/workspaces/${W}/permissions`]: { permissions: [] },
    [`/v1/workspaces/${W}/sessions/${S}/messages`]: { messages: [] },
    [`/v1/workspaces/${W}/sessions/${S}/events`]: { events: [] },
    [`/v1/workspaces/${W}/sessions/${S}/pending`]: { permissions: [], tool_calls: [] },
    [`/v1/workspaces/${W}/agent/sessions/${S}`]: { busy: false, active_run_id: null, queued: [] },
    ...extra,
  };
  const f = async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const path = String(input).split('?')[0];
    let r: Reply = { status: 404, body: { error: { code: 'not_found', message: 'no route' } } };
    if (init.method === 'PATCH' && path === `/v1/workspaces/${W}/sessions/${S}`) {
      const body = JSON.parse(String(init.body));
      patches.push(body);
      r = patch(body);
    } else if (init.method === 'GET' && path in routes) r = { status: 200, body: routes[path] };
    return new Response(r.body === undefined ? null : JSON.stringify(r.body), { status: r.status });
  };
  return { fetch: f as typeof fetch, patches };
}

function Page({ c }: { c: Controller }) {
  const st = useAppState(c);
  const s = st.ws?.sessions[S];
  return <Ctl.Provider value={c}>{s ? <SessionHeader state={st} session={s} /> : null}</Ctl.Provider>;
}

const settle = async (n = 10) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setTimeout(r, 0));
};

let root: HTMLElement;

async function open(sess: Session, patch: (body: any) => Reply = () => ({ status: 500 }), extra: Record<string, unknown> = {}) {
  const srv = server(sess, patch, extra);
  const c = new Controller({
    api: new Api('tok', '', srv.fetch),
    clientId: 'me',
    schedule: (f) => f(),
    newStream: (o) => new WorkspaceStream({ ...o, EventSourceImpl: FakeEventSource as unknown as typeof EventSource }),
    route: { get: () => `#/w/${W}/s/${S}`, set: () => {} },
  });
  await c.start();
  const es = FakeEventSource.last();
  es.emit('stream.opened', { head_seq: 1 });
  await settle();
  expect(c.state.syncing).toBe(false);
  render(<Page c={c} />, root);
  await settle();
  return { c, es, patches: srv.patches };
}

const q = <T extends Element = HTMLElement>(sel: string) => root.querySelector(sel) as T | null;
const testid = (id: string) => q(`[data-testid="${id}"]`)?.textContent ?? null;

async function type(el: HTMLInputElement, value: string) {
  el.value = value;
  el.dispatchEvent(new Event('input', { bubbles: true }));
  await settle(2); // rendered, as between keystrokes and a click
}

function button(name: string) {
  const b = [...root.querySelectorAll('button')].find((x) => x.textContent?.trim() === name);
  if (!b) throw new Error(`no button ${name}: ${root.innerHTML}`);
  return b;
}

async function openSettings() {
  button('⋯').click();
  await settle(2);
  button('Compaction settings…').click();
  await settle(2);
  const form = q<HTMLFormElement>('form[aria-label="Compaction settings"]');
  expect(form).not.toBeNull();
  return {
    auto: form!.querySelector('input[type="checkbox"]') as HTMLInputElement,
    threshold: form!.querySelector('input.threshold') as HTMLInputElement,
  };
}

beforeEach(() => {
  FakeEventSource.reset();
  root = document.createElement('div');
  document.body.appendChild(root);
});
afterEach(() => {
  render(null, root);
  root.remove();
});

describe('SessionHeader', () => {
  it('moves the usage and context fill with each model step, not only when the run ends', async () => {
    const sess = session(S, { usage: usage(1000, 100, 0.01), context: { cwd: '/p', tokens: 1100, window: 10000 } });
    const { es } = await open(sess);
    expect(testid('usage')).toBe('1.0k in · 100 out · $0.010');
    expect(testid('context-fill')).toContain('1.1k/10k (11%)');

    const r = { session_id: S, run_id: 'r1' };
    es.event(env(2, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'other' }, r));
    es.event(env(3, 'message.created', message('a1', 'assistant', [], 3, { session_id: S, run_id: 'r1' }), r));
    es.event(env(4, 'message.updated', message('a1', 'assistant', [{ type: 'text', text: 'x' }], 4, { session_id: S, run_id: 'r1', usage: usage(3000, 400, 0.02) }), r));
    await settle();
    // The run goes on; its first step is counted and the context is what it read and wrote.
    expect(testid('usage')).toBe('4.0k in · 500 out · $0.030');
    expect(testid('context-fill')).toContain('3.4k/10k (34%)');
  });

  it('edits the compaction settings, checks the threshold, shows what the server refused, and follows other clients', async () => {
    let refuse = true;
    let current = session(S);
    const { es, patches } = await open(current, (body) => {
      if (refuse) {
        refuse = false;
        return { status: 400, body: { error: { code: 'invalid_request', message: 'compaction.threshold must be above 0 and at most 1' } } };
      }
      current = { ...current, updated_at: time(50), compaction: { ...current.compaction, ...body.compaction } };
      return { status: 200, body: current };
    });
    expect(testid('auto-compaction-off')).toBeNull();
    expect(testid('compaction-threshold')).toBeNull();
    const f = await openSettings();
    expect(f.auto.checked).toBe(true);
    expect(f.threshold.value).toBe('80');

    // Another client turns auto-compaction off at 60%: the open form and the header follow.
    es.event(env(2, 'session.updated', session(S, { updated_at: time(20), compaction: { auto: false, threshold: 0.6 } })));
    await settle();
    expect(f.auto.checked).toBe(false);
    expect(f.threshold.value).toBe('60');
    expect(testid('auto-compaction-off')).toBe('auto-compaction off');

    // Out of range: said here, nothing sent.
    for (const bad of ['0', '150', 'lots', '']) {
      await type(f.threshold, bad);
      button('Save').click();
      await settle(2);
      expect(testid('compaction-error')).toMatch(/above 0 and at most 100/);
    }
    expect(patches).toEqual([]);

    // The server refuses: its words are shown and the form stays open.
    f.auto.click();
    await type(f.threshold, '65');
    button('Save').click();
    await settle();
    expect(patches).toEqual([{ compaction: { auto: true, threshold: 0.65 } }]);
    expect(testid('compaction-error')).toBe('compaction.threshold must be above 0 and at most 1');
    expect(f.threshold.value).toBe('65'); // the user's edit is kept

    // Again, taken: the form closes and the header says when the session compacts.
    button('Save').click();
    await settle();
    expect(patches).toHaveLength(2);
    expect(q('form[aria-label="Compaction settings"]')).toBeNull();
    expect(testid('auto-compaction-off')).toBeNull();
    expect(testid('compaction-threshold')).toBe('compacts at 65%');
  });

  it('reads and writes thresholds as percentages of the window', () => {
    expect([parseThreshold('80'), parseThreshold(' 12.5 % '), parseThreshold('100'), parseThreshold('0,5')]).toEqual([0.8, 0.125, 1, 0.005]);
    for (const bad of ['0', '-1', '100.1', 'abc', '', 'Infinity']) expect(typeof parseThreshold(bad)).toBe('string');
    expect([percent(0.8), percent(0.333), percent(1), percent(0.65)]).toEqual(['80', '33.3', '100', '65']);
  });
});

const sandboxed = (extra: Partial<Session> = {}) =>
  session(S, { sandbox: 'read-only', sandbox_network: false, sandbox_read: ['/opt/sdk'], sandbox_write: ['/var/cache/go'], ...extra });
const me = (role: 'owner' | 'member' | 'viewer') => ({ '/v1/me': { token_id: 't', name: role, role } });

async function openSandbox() {
  button('⋯').click();
  await settle(2);
  button('Sandbox settings…').click();
  await settle(2);
  const form = q<HTMLFormElement>('form[aria-label="Sandbox settings"]');
  expect(form).not.toBeNull();
  const mode = (m: string) => form!.querySelector(`input[name="sandbox-mode"][value="${m}"]`) as HTMLInputElement;
  return {
    form: form!,
    workspace: mode('workspace'),
    readOnly: mode('read-only'),
    off: mode('off'),
    network: form!.querySelector('input[name="sandbox-network"]') as HTMLInputElement,
    read: form!.querySelector('textarea[name="sandbox-read"]') as HTMLTextAreaElement,
    write: form!.querySelector('textarea[name="sandbox-write"]') as HTMLTextAreaElement,
  };
}

describe('sandbox settings', () => {
  it('counts as widening what section 12 counts: a wider mode, the network, an added path', () => {
    const cur = { sandbox: 'read-only' as const, sandbox_network: false, sandbox_read: ['/a'], sandbox_write: ['/b'] };
    expect(widenings(cur, cur)).toEqual([]);
    expect(widenings(cur, { ...cur, sandbox: 'workspace' })).toEqual(['mode workspace']);
    expect(widenings(cur, { ...cur, sandbox: 'off' })).toEqual(['mode off']);
    expect(widenings({ ...cur, sandbox: 'workspace' }, { ...cur, sandbox: 'off' })).toEqual(['mode off']);
    expect(widenings({ ...cur, sandbox: 'off' }, { ...cur, sandbox: 'workspace' })).toEqual([]);
    expect(widenings({ ...cur, sandbox: 'workspace' }, cur)).toEqual([]);
    expect(widenings(cur, { ...cur, sandbox_network: true })).toEqual(['network']);
    expect(widenings({ ...cur, sandbox_network: true }, cur)).toEqual([]);
    expect(widenings(cur, { ...cur, sandbox_read: ['/a', '/c'], sandbox_write: ['/d'] })).toEqual(['read /c', 'write /d']);
    expect(widenings(cur, { ...cur, sandbox_read: [], sandbox_write: [] })).toEqual([]);
    // What the lists already cover adds nothing: a path inside one, a readable path inside a writable one.
    expect(widenings(cur, { ...cur, sandbox_read: ['/a/x', '/b/y/../z', '/b'], sandbox_write: ['/b/c/'] })).toEqual([]);
    expect(widenings(cur, { ...cur, sandbox_read: ['/ab', '/a/../etc'], sandbox_write: ['/a'] })).toEqual(['read /ab', 'read /a/../etc', 'write /a']);
    expect(parsePaths(' /a \n\n/b\n/a')).toEqual(['/a', '/b']);
    expect(parsePaths('/a\nrel/b')).toBe('Not an absolute path: rel/b');
  });

  it('shows the mode the commands run under, unconfined when off, and warns when the server cannot confine', async () => {
    await open(sandboxed(), undefined, { '/v1/health': { status: 'ok', version: '1', default_model: 'echo', sandbox: { available: true, mechanism: 'landlock' } } });
    expect(testid('sandbox-badge')).toBe('sandbox: read-only');
    expect(testid('sandbox-warning')).toBeNull();
    render(null, root);

    await open(sandboxed({ sandbox: 'workspace', sandbox_network: true }), undefined, {
      '/v1/health': { status: 'ok', version: '1', default_model: 'echo', sandbox: { available: false, mechanism: 'none', reason: 'no landlock' } },
    });
    expect(testid('sandbox-badge')).toBe('sandbox: workspace + network');
    expect(testid('sandbox-warning')).toContain('cannot confine');
    expect(q('[data-testid="sandbox-warning"]')!.getAttribute('title')).toContain('no landlock');
    render(null, root);

    // Off runs unconfined anyway: nothing is refused, so no warning.
    await open(sandboxed({ sandbox: 'off' }), undefined, { '/v1/health': { status: 'ok', version: '1', default_model: 'echo', sandbox: { available: false, mechanism: 'none' } } });
    expect(testid('sandbox-badge')).toBe('unconfined');
    expect(testid('sandbox-warning')).toBeNull();
  });

  it('lets a member only narrow: wider choices are disabled, an added path is stopped, the server refusal is shown', async () => {
    let current = sandboxed({ sandbox: 'workspace' });
    const { patches } = await open(
      current,
      (body) => {
        current = { ...current, ...body, updated_at: time(60) };
        return { status: 200, body: current };
      },
      me('member'),
    );
    const f = await openSandbox();
    expect(f.workspace.checked).toBe(true);
    expect(f.readOnly.disabled).toBe(false);
    expect(f.off.disabled).toBe(true);
    expect(f.off.parentElement!.getAttribute('title')).toBe(OWNER_ONLY);
    expect(f.network.disabled).toBe(true);
    expect(f.read.value).toBe('/opt/sdk');
    expect(f.write.value).toBe('/var/cache/go');

    // An added path: said here, nothing sent.
    f.read.value = '/opt/sdk\n/home/me/.ssh';
    f.read.dispatchEvent(new Event('input', { bubbles: true }));
    await settle(2);
    button('Save').click();
    await settle();
    expect(testid('sandbox-error')).toBe(`${OWNER_ONLY}: read /home/me/.ssh.`);
    expect(patches).toEqual([]);

    // Narrowing: read-only, a path removed.
    f.readOnly.click();
    f.read.value = '';
    f.read.dispatchEvent(new Event('input', { bubbles: true }));
    await settle(2);
    button('Save').click();
    await settle();
    expect(patches).toEqual([{ sandbox: 'read-only', sandbox_network: false, sandbox_read: [], sandbox_write: ['/var/cache/go'] }]);
    expect(q('form[aria-label="Sandbox settings"]')).toBeNull();
    expect(testid('sandbox-badge')).toBe('sandbox: read-only');

    // Now workspace is wider than what the session runs under.
    const g = await openSandbox();
    expect(g.readOnly.checked).toBe(true);
    expect(g.workspace.disabled).toBe(true);
    expect(g.off.disabled).toBe(true);
  });

  it('lets an owner widen, and shows what the server refused as it said it', async () => {
    let refuse = true;
    let current = sandboxed();
    const { patches } = await open(
      current,
      (body) => {
        if (refuse) {
          refuse = false;
          return { status: 400, body: { error: { code: 'invalid_request', message: 'sandbox_write: /proc is not allowed' } } };
        }
        current = { ...current, ...body, updated_at: time(60) };
        return { status: 200, body: current };
      },
      me('owner'),
    );
    const f = await openSandbox();
    for (const x of [f.workspace, f.readOnly, f.off, f.network]) expect(x.disabled).toBe(false);
    f.off.click();
    f.network.click();
    await settle(2);
    button('Save').click();
    await settle();
    expect(patches).toEqual([{ sandbox: 'off', sandbox_network: true, sandbox_read: ['/opt/sdk'], sandbox_write: ['/var/cache/go'] }]);
    expect(testid('sandbox-error')).toBe('sandbox_write: /proc is not allowed');
    button('Save').click();
    await settle();
    expect(patches).toHaveLength(2);
    expect(testid('sandbox-badge')).toBe('unconfined');
  });

  it('shows a viewer the settings without a way to change them', async () => {
    await open(sandboxed(), undefined, me('viewer'));
    const f = await openSandbox();
    expect(f.form.querySelector('fieldset')!.disabled).toBe(true);
    expect([...f.form.querySelectorAll('button')].map((b) => b.textContent)).toEqual(['Close']);
  });
});
