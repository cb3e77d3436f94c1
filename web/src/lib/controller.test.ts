import { beforeEach, describe, expect, it } from 'vitest';
import { Api } from './api';
import { Controller, parseRoute } from './controller';
import { sessionUsage } from './state';
import { WorkspaceStream } from './stream';
import { FakeEventSource, env, message, session, time } from './testing';

const W = '00000000-0000-4000-8000-000000000001';
const S = '00000000-0000-4000-8000-000000000002';

type Route = (url: string, init: RequestInit) => { status: number; body?: unknown } | undefined;

function fakeFetch(routes: Route[], log: string[]) {
  return async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = String(input);
    log.push(`${init.method} ${url}`);
    for (const r of routes) {
      const res = r(url, init);
      if (res) return new Response(res.body === undefined ? null : JSON.stringify(res.body), { status: res.status });
    }
    return new Response(JSON.stringify({ error: { code: 'not_found', message: 'no route' } }), { status: 404 });
  };
}

const get = (path: string, body: unknown): Route => (url, init) => (init.method === 'GET' && url.split('?')[0] === path ? { status: 200, body } : undefined);

function setup(opts: { token?: string; routes?: Route[]; hash?: string; fetch?: (f: typeof fetch) => typeof fetch } = {}) {
  FakeEventSource.reset();
  const log: string[] = [];
  let hash = opts.hash ?? `#/w/${W}/s/${S}`;
  const msgs = [message('u1', 'user', [{ type: 'text', text: 'hi' }], 3, { session_id: S })];
  const routes: Route[] = [
    ...(opts.routes ?? []),
    get('/v1/health', { status: 'ok', version: '1', default_model: 'echo' }),
    get('/v1/workspaces', { workspaces: [{ id: W, path: '/p', open: true, clients: 1, created_at: time(0) }] }),
    get(`/v1/workspaces/${W}`, { id: W, path: '/p', open: true, clients: 1, created_at: time(0) }),
    get(`/v1/workspaces/${W}/sessions`, { sessions: [session(S)] }),
    get(`/v1/workspaces/${W}/permissions`, { permissions: [] }),
    get(`/v1/workspaces/${W}/sessions/${S}/messages`, { messages: msgs }),
    get(`/v1/workspaces/${W}/sessions/${S}/events`, { events: [] }),
    get(`/v1/workspaces/${W}/sessions/${S}/pending`, { permissions: [], tool_calls: [] }),
    get(`/v1/workspaces/${W}/agent/sessions/${S}`, { busy: false, active_run_id: null, queued: [] }),
  ];
  const base = fakeFetch(routes, log) as typeof fetch;
  const api = new Api(opts.token ?? 'tok', '', opts.fetch ? opts.fetch(base) : base);
  const c = new Controller({
    api,
    clientId: 'me',
    schedule: (f) => f(),
    startRetries: [0, 0, 0],
    newStream: (o) => new WorkspaceStream({ ...o, EventSourceImpl: FakeEventSource as unknown as typeof EventSource }),
    route: { get: () => hash, set: (h) => void (hash = h) },
  });
  return { c, log, msgs };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe('Controller', () => {
  beforeEach(() => FakeEventSource.reset());

  it('asks for a token when it has none', async () => {
    const { c } = setup({ token: '' });
    await c.start();
    expect(c.state.auth).toBe('needed');
  });

  it('says clearly when the token is refused', async () => {
    const { c } = setup({
      token: 'wrong',
      routes: [(url) => (url.startsWith('/v1/workspaces') ? { status: 401, body: { error: { code: 'unauthorized', message: 'missing or wrong bearer token' } } } : undefined)],
    });
    await c.start();
    expect(c.state.auth).toBe('refused');
    expect(c.state.authMessage).toMatch(/refused this token/);
  });

  it('tries again when the server cannot be reached at first, instead of asking for a token', async () => {
    let failures = 2;
    const { c } = setup({
      hash: '',
      fetch: (f) => async (input, init) => {
        if (String(input) === '/v1/workspaces' && failures-- > 0) throw new TypeError('Failed to fetch');
        return f(input, init);
      },
    });
    await c.start();
    expect(c.state.auth).toBe('ok');
    expect(c.state.workspaces).toHaveLength(1);
  });

  it('gives up with the reason once the server stays unreachable', async () => {
    const { c } = setup({
      hash: '',
      fetch: () => async () => {
        throw new TypeError('Failed to fetch');
      },
    });
    await c.start();
    expect(c.state.auth).toBe('needed');
    expect(c.state.authMessage).toMatch(/Failed to fetch|reach/);
  });

  it('opens the routed workspace, streams with the token and client id, and folds events in after the snapshot', async () => {
    const { c, log } = setup();
    await c.start();
    const es = FakeEventSource.last();
    expect(es.url).toBe(`/v1/workspaces/${W}/events?client_id=me&access_token=tok`);
    es.emit('stream.opened', { head_seq: 3 });
    // An event that arrives while the snapshot is fetched waits for it.
    const s = { session_id: S, run_id: 'r1' };
    es.event(env(4, 'run.accepted', { run_id: 'r1', state: 'running', client_id: 'other' }, s));
    es.event(env(5, 'message.created', message('u2', 'user', [{ type: 'text', text: 'next' }], 5, { session_id: S, run_id: 'r1' }), s));
    expect(c.state.syncing).toBe(true);
    for (let i = 0; i < 10 && c.state.syncing; i++) await settle();
    expect(c.state.syncing).toBe(false);
    const st = c.state.ws!.sessions[S];
    expect(st.loaded).toBe(true);
    expect(st.messages.map((m) => m.id)).toEqual(['u1', 'u2']);
    expect(st.runs.r1.clientId).toBe('other');
    expect(log.filter((l) => l.includes('/messages'))).toHaveLength(1);
  });

  it('refetches over REST after stream.reset', async () => {
    const { c, log } = setup();
    await c.start();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 3 });
    for (let i = 0; i < 10 && c.state.syncing; i++) await settle();
    const before = log.filter((l) => l.endsWith('/sessions')).length;
    es.emit('stream.reset', { head_seq: 90 });
    for (let i = 0; i < 10 && c.state.syncing; i++) await settle();
    await settle();
    expect(log.filter((l) => l.endsWith('/sessions')).length).toBe(before + 1);
  });

  it('sends a steer as delivery steer, and a steered 202 adds no run of its own', async () => {
    const bodies: any[] = [];
    const { c } = setup({
      routes: [
        (url, init) => {
          if (init.method !== 'POST' || url !== `/v1/workspaces/${W}/agent`) return undefined;
          bodies.push(JSON.parse(String(init.body)));
          return { status: 202, body: { run_id: 'r1', session_id: S, state: 'steered', position: 0 } };
        },
      ],
    });
    await c.start();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 3 });
    for (let i = 0; i < 10 && c.state.syncing; i++) await settle();
    es.event(env(4, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'other' }, { session_id: S, run_id: 'r1' }));
    expect(await c.prompt(S, 'also the docs', [], 'steer')).toBe(true);
    expect(bodies).toEqual([{ session_id: S, prompt: 'also the docs', client_id: 'me', delivery: 'steer' }]);
    const st = c.state.ws!.sessions[S];
    expect(Object.keys(st.runs)).toEqual(['r1']);
    expect(st.runs.r1).toMatchObject({ state: 'running', clientId: 'other' });
    expect(c.state.toasts).toEqual([]);
  });

  it('refetches a session when its run ends: the usage and context fill the header shows', async () => {
    const usage = { input_tokens: 4000, output_tokens: 500, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0, cost_usd: 0.012 };
    const { c } = setup({
      routes: [get(`/v1/workspaces/${W}/sessions/${S}`, session(S, { updated_at: time(9), usage, context: { cwd: '/p', tokens: 4600, window: 16000 } }))],
    });
    await c.start();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 3 });
    for (let i = 0; i < 10 && c.state.syncing; i++) await settle();
    es.event(env(8, 'run.completed', { run_id: 'r1', outcome: 'end_turn', message_id: 'a1', usage }, { session_id: S, run_id: 'r1' }));
    for (let i = 0; i < 10 && !c.state.ws!.sessions[S].session.usage.input_tokens; i++) await settle();
    const sess = c.state.ws!.sessions[S].session;
    expect(sess.usage).toEqual(usage);
    expect(sess.context).toEqual({ cwd: '/p', tokens: 4600, window: 16000 });
  });

  it('a run that ends while the page loads is counted once: the refetch comes after its run.completed is folded in', async () => {
    const before = { input_tokens: 1000, output_tokens: 100, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0 };
    const step = { ...before, input_tokens: 4000, output_tokens: 500 };
    const total = { ...before, input_tokens: 5000, output_tokens: 600 };
    // The server's snapshots already hold the run that ends meanwhile.
    const { c } = setup({
      routes: [
        get(`/v1/workspaces/${W}/sessions`, { sessions: [session(S, { updated_at: time(9), usage: total })] }),
        get(`/v1/workspaces/${W}/sessions/${S}`, session(S, { updated_at: time(9), usage: total })),
      ],
    });
    await c.start();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 3 });
    const r = { session_id: S, run_id: 'r1' };
    es.event(env(4, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'other' }, r));
    es.event(env(5, 'message.updated', message('a1', 'assistant', [{ type: 'text', text: 'done' }, { type: 'finish', reason: 'end_turn' }], 5, { session_id: S, run_id: 'r1', usage: step }), r));
    es.event(env(6, 'run.completed', { run_id: 'r1', outcome: 'end_turn', message_id: 'a1', usage: step }, r));
    expect(c.state.syncing).toBe(true);
    for (let i = 0; i < 20; i++) await settle();
    expect(c.state.syncing).toBe(false);
    expect(sessionUsage(c.state.ws!.sessions[S])).toEqual(total);
  });

  it('parses routes', () => {
    expect(parseRoute(`#/w/${W}/s/${S}`)).toEqual({ workspaceId: W, sessionId: S });
    expect(parseRoute(`#/w/${W}`)).toEqual({ workspaceId: W, sessionId: undefined });
    expect(parseRoute('#/')).toEqual({});
  });
});
