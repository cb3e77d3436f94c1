import { describe, expect, it } from 'vitest';
import {
  addUsage,
  applyEvent,
  contextTokens,
  applySessionEvents,
  fmtCost,
  formatUsage,
  isBusy,
  markGaps,
  mergeMessages,
  newSessionState,
  newWorkspaceState,
  pendingPermissions,
  pendingSteers,
  queue,
  rows,
  sessionUsage,
  setSessions,
  steerOf,
  type WorkspaceState,
} from './state';
import { env, message, session, time } from './testing';
import type { Envelope, Message } from './types';

const ws0 = (): WorkspaceState => {
  const ws = newWorkspaceState({ id: 'w', path: '/p', open: true, clients: 1, created_at: time(0) });
  return { ...ws, sessions: { s: newSessionState(session('s'), true) } };
};

const fold = (evs: Envelope[], ws = ws0()) => evs.reduce(applyEvent, ws);
const text = (m: Message) => m.parts.map((p) => ('text' in p ? p.text : '')).join('');

const asst = (parts: Message['parts'], n: number) => message('a1', 'assistant', parts, n, { run_id: 'r1' });

/** a run's events as the server sends them */
function runEvents(): Envelope[] {
  const s = { session_id: 's', run_id: 'r1' };
  return [
    env(1, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'c-a' }, s),
    env(2, 'run.started', { run_id: 'r1' }, s),
    env(3, 'message.created', message('u1', 'user', [{ type: 'text', text: 'hi' }], 3, { run_id: 'r1' }), s),
    env(4, 'message.created', asst([], 4), s),
    env(5, 'message.delta', { message_id: 'a1', part_index: 0, kind: 'text', text: 'Hel' }, s),
    env(6, 'message.delta', { message_id: 'a1', part_index: 0, kind: 'text', text: 'lo' }, s),
    env(7, 'message.updated', asst([{ type: 'text', text: 'Hello' }, { type: 'finish', reason: 'end_turn' }], 7), s),
    env(8, 'run.completed', { run_id: 'r1', outcome: 'end_turn', message_id: 'a1' }, s),
    env(9, 'session.idle', {}, s),
  ];
}

describe('applyEvent', () => {
  it('builds the conversation from a run', () => {
    const ws = fold(runEvents().slice(0, 6));
    const s = ws.sessions.s;
    expect(s.messages.map((m) => m.id)).toEqual(['u1', 'a1']);
    expect(text(s.messages[1])).toBe('Hello');
    expect(s.runs.r1).toMatchObject({ state: 'running', clientId: 'c-a' });
    expect(isBusy(s)).toBe(true);
    const done = fold(runEvents().slice(6), ws).sessions.s;
    expect(text(done.messages[1])).toBe('Hello');
    expect(done.runs.r1.state).toBe('done');
    expect(isBusy(done)).toBe(false);
  });

  it('is idempotent: every event applied twice gives the same state', () => {
    const once = fold(runEvents());
    const twice = runEvents().reduce((ws, ev) => applyEvent(applyEvent(ws, ev), ev), ws0());
    // Deltas are deduped by seq before they get here; the final text is the same anyway.
    expect(twice.sessions.s.messages).toEqual(once.sessions.s.messages);
    expect(twice.sessions.s.runs).toEqual(once.sessions.s.runs);
  });

  it('ignores deltas for a message that is already final', () => {
    const evs = runEvents();
    // A snapshot taken after the message was final, then buffered deltas.
    const ws = fold([evs[6], evs[4], evs[5]]);
    expect(text(ws.sessions.s.messages[0])).toBe('Hello');
  });

  it('never lets an older version replace a newer one', () => {
    const evs = runEvents();
    const ws = fold([evs[6], evs[3]]);
    expect(ws.sessions.s.messages[0].parts).toHaveLength(2);
  });

  it('keeps a permission resolved, and who resolved it', () => {
    const req = { request_id: 'p1', session_id: 's', run_id: 'r1', tool_call_id: 't1', tool_name: 'bash', kind: 'shell', summary: 'Run: ls', details: {} };
    const s = { session_id: 's', run_id: 'r1' };
    let ws = fold([env(1, 'permission.requested', req, s)]);
    expect(pendingPermissions(ws.sessions.s)).toHaveLength(1);
    ws = fold([env(2, 'permission.resolved', { request_id: 'p1', result: 'approved', resolved_by: 'c-b' }, s)], ws);
    expect(pendingPermissions(ws.sessions.s)).toHaveLength(0);
    expect(ws.sessions.s.permissions.p1).toMatchObject({ result: 'approved', resolvedBy: 'c-b' });
    // The history (or a replay) brings the request again: it stays resolved.
    ws = fold([env(1, 'permission.requested', req, s)], ws);
    expect(ws.sessions.s.permissions.p1.result).toBe('approved');
  });

  it('orders the queue and moves runs forward only', () => {
    const s = (r: string) => ({ session_id: 's', run_id: r });
    let ws = fold([
      env(1, 'run.accepted', { run_id: 'r1', state: 'running', client_id: 'a' }, s('r1')),
      env(2, 'run.accepted', { run_id: 'r2', state: 'queued', position: 1, client_id: 'b', prompt: 'second' }, s('r2')),
      env(3, 'run.accepted', { run_id: 'r3', state: 'queued', position: 2, client_id: 'a', prompt: 'third' }, s('r3')),
    ]);
    expect(queue(ws.sessions.s).map((r) => r.prompt)).toEqual(['second', 'third']);
    ws = fold([env(4, 'run.completed', { run_id: 'r1', outcome: 'end_turn' }, s('r1')), env(5, 'run.started', { run_id: 'r2' }, s('r2'))], ws);
    expect(queue(ws.sessions.s).map((r) => r.id)).toEqual(['r3']);
    // A late run.accepted (history) does not move r2 back to the queue.
    ws = fold([env(2, 'run.accepted', { run_id: 'r2', state: 'queued', client_id: 'b' }, s('r2'))], ws);
    expect(ws.sessions.s.runs.r2.state).toBe('running');
  });

  it('orders the queue by run.accepted even when the 202s came first', () => {
    const s = (r: string) => ({ session_id: 's', run_id: r });
    let ws = fold([env(1, 'run.accepted', { run_id: 'r1', state: 'running', client_id: 'a' }, s('r1'))]);
    // The page's own prompts, known from their 202s before their events:
    // the controller keeps them last, in no order of their own.
    const mine = (id: string, prompt: string) => ({ id, state: 'queued' as const, order: Number.MAX_SAFE_INTEGER, clientId: 'a', prompt });
    ws = { ...ws, sessions: { ...ws.sessions, s: { ...ws.sessions.s, runs: { ...ws.sessions.s.runs, r3: mine('r3', 'third'), r2: mine('r2', 'second') } } } };
    ws = fold([
      env(2, 'run.accepted', { run_id: 'r2', state: 'queued', position: 1, client_id: 'a', prompt: 'second' }, s('r2')),
      env(3, 'run.accepted', { run_id: 'r3', state: 'queued', position: 2, client_id: 'a', prompt: 'third' }, s('r3')),
    ], ws);
    expect(queue(ws.sessions.s).map((r) => r.prompt)).toEqual(['second', 'third']);
  });

  it('tracks sessions, deletions and presence', () => {
    let ws = fold([
      env(1, 'session.created', session('s2', { updated_at: time(5) })),
      env(2, 'client.attached', { client_id: 'x', clients: 2 }),
      env(3, 'client.attached', { client_id: 'y', clients: 3 }),
      env(4, 'client.detached', { client_id: 'x', clients: 2 }),
    ]);
    expect(Object.keys(ws.sessions).sort()).toEqual(['s', 's2']);
    expect(ws.clients).toEqual({ count: 2, ids: ['y'] });
    ws = fold([env(5, 'session.deleted', { session_id: 's2' }), env(1, 'session.created', session('s2'))], ws);
    expect(ws.sessions.s2).toBeUndefined();
  });

  it('shows v1.1 data when it comes: compaction, MCP, usage, errors', () => {
    const s = { session_id: 's', run_id: 'r1' };
    const ws = fold([
      env(1, 'session.compaction_started', { tokens_before: 120000 }, s),
      env(2, 'session.compaction_completed', { tokens_before: 120000, tokens_after: 9000, summary_message_id: 'm' }, s),
      env(3, 'mcp.server_status', { name: 'git', status: 'failed', tools: [], error: 'exit 1' }),
      env(4, 'run.completed', { run_id: 'r1', outcome: 'error', error: { code: 'model_auth', message: 'bad key' }, usage: { input_tokens: 5, output_tokens: 6 } }, s),
    ]);
    const st = ws.sessions.s;
    expect(st.compacting).toBeUndefined();
    expect(st.notices.map((n) => n.text)).toEqual([
      'Compacting the conversation (120k tokens)…',
      'Compacted the conversation: 120k → 9.0k tokens',
      'The run failed: bad key (model_auth)',
    ]);
    expect(st.runs.r1.usage).toEqual({ input_tokens: 5, output_tokens: 6 });
    expect(ws.mcp['/git']).toMatchObject({ status: 'failed', error: 'exit 1' });
  });
});

describe('applySessionEvents', () => {
  it('folds a history like one event at a time, without touching the state it started from', () => {
    const evs: Envelope[] = [];
    for (let i = 0; i < 300; i++) {
      const s = { session_id: 's', run_id: 'r' + i };
      evs.push(
        env(4 * i + 1, 'run.accepted', { run_id: 'r' + i, state: 'queued', client_id: 'c' + (i % 3) }, s),
        env(4 * i + 2, 'run.started', { run_id: 'r' + i }, s),
        env(4 * i + 3, 'tool.finished', { tool_call_id: 't' + i, name: 'ls', is_error: false, content: 'x' }, s),
        env(4 * i + 4, 'run.completed', { run_id: 'r' + i, outcome: 'end_turn' }, s),
      );
    }
    const start = ws0().sessions.s;
    const frozen = JSON.stringify(start);
    const one = evs.reduce((st, ev) => applyEvent(st, ev), ws0()).sessions.s;
    const batched = applySessionEvents(start, evs);
    expect(batched.runs).toEqual(one.runs);
    expect(batched.tools).toEqual(one.tools);
    expect(JSON.stringify(start)).toBe(frozen);
    // After the batch, maps are copied on write again.
    const after = applyEvent({ ...ws0(), sessions: { s: batched } }, env(9999, 'run.accepted', { run_id: 'late', state: 'queued' }, { session_id: 's', run_id: 'late' }));
    expect(batched.runs.late).toBeUndefined();
    expect(after.sessions.s.runs.late).toBeDefined();
  });
});

describe('snapshots', () => {
  it('lays fetched history under what the stream brought', () => {
    const live = fold(runEvents().slice(2, 5)).sessions.s; // u1, a1 streaming "Hel"
    const fetched = [message('u0', 'user', [{ type: 'text', text: 'old' }], 1), message('u1', 'user', [{ type: 'text', text: 'hi' }], 3), asst([], 4)];
    const merged = mergeMessages(live, fetched);
    expect(merged.messages.map((m) => m.id)).toEqual(['u0', 'u1', 'a1']);
    expect(text(merged.messages[2])).toBe('Hel'); // the live text is kept
  });

  it('drops sessions the server no longer lists', () => {
    const ws = setSessions(fold([env(1, 'session.created', session('s2'))]), [session('s2')]);
    expect(Object.keys(ws.sessions)).toEqual(['s2']);
  });

  it('marks streaming messages after a reconnect, until they are final', () => {
    const s = fold(runEvents().slice(0, 5)).sessions.s;
    const gapped = markGaps(s);
    expect(gapped.gaps).toEqual({ a1: true });
    const ws = { ...ws0(), sessions: { s: gapped } };
    expect(fold([runEvents()[6]], ws).sessions.s.gaps).toEqual({});
  });
});

describe('rows', () => {
  it('interleaves notices by time and hides tool messages', () => {
    const msgs = [
      message('u', 'user', [{ type: 'text', text: 'x' }], 10),
      message('a', 'assistant', [{ type: 'tool_call', id: 't', name: 'ls', arguments: {} }, { type: 'finish', reason: 'tool_use' }], 20),
      message('t', 'tool', [{ type: 'tool_result', tool_call_id: 't', name: 'ls', content: 'f', is_error: false }], 30),
      message('b', 'assistant', [{ type: 'text', text: 'done' }], 40),
    ];
    const notices = [{ key: 'n1', seq: 1, time: time(25), level: 'info' as const, text: 'hi' }];
    expect(rows(msgs, notices).map((r) => r.key)).toEqual(['u', 'a', 'nn1', 'b']);
  });
});

describe('steering, compaction and usage (v1.1)', () => {
  const r1 = { session_id: 's', run_id: 'r1' };
  const usage = (input: number, output: number, cost?: number) => ({
    input_tokens: input,
    output_tokens: output,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    ...(cost !== undefined ? { cost_usd: cost } : {}),
  });

  /** A runs r1; B steers a prompt into it while its first step is with the model. */
  function steeredRun(): Envelope[] {
    return [
      env(1, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'c-a', prompt: 'start' }, r1),
      env(2, 'run.started', { run_id: 'r1' }, r1),
      env(3, 'message.created', message('u1', 'user', [{ type: 'text', text: 'start' }], 3, { run_id: 'r1', client_id: 'c-a' }), r1),
      env(4, 'message.created', asst([], 4), r1),
      env(5, 'run.accepted', { run_id: 'r1', state: 'steered', position: 0, client_id: 'c-b', prompt: 'also the docs', message_id: 'u2' }, r1),
      env(6, 'message.updated', asst([{ type: 'text', text: 'looking' }, { type: 'finish', reason: 'end_turn' }], 6), r1),
      env(7, 'message.created', message('u2', 'user', [{ type: 'text', text: 'also the docs' }], 7, { run_id: 'r1', client_id: 'c-b' }), r1),
      env(8, 'message.created', message('a2', 'assistant', [], 8, { run_id: 'r1' }), r1),
      env(9, 'message.updated', message('a2', 'assistant', [{ type: 'text', text: 'docs too' }, { type: 'finish', reason: 'end_turn' }], 9, { run_id: 'r1', usage: usage(300, 20) }), r1),
      env(10, 'run.completed', { run_id: 'r1', outcome: 'end_turn', message_id: 'a2', usage: usage(500, 40, 0.0042) }, r1),
      env(11, 'session.idle', {}, r1),
    ];
  }

  it('a steered prompt joins its run: no run of its own, waiting until the run takes it in, then one message marked steered', () => {
    const evs = steeredRun();
    let ws = fold(evs.slice(0, 5));
    let st = ws.sessions.s;
    expect(Object.keys(st.runs)).toEqual(['r1']);
    expect(queue(st)).toEqual([]);
    expect(pendingSteers(st)).toEqual([{ messageId: 'u2', prompt: 'also the docs', clientId: 'c-b', seq: 5 }]);
    expect(st.runs.r1.clientId).toBe('c-a'); // the run stays its sender's
    expect(st.notices).toEqual([]);

    ws = fold(evs.slice(5, 7), ws);
    st = ws.sessions.s;
    expect(pendingSteers(st)).toEqual([]);
    const u2 = st.messages.find((m) => m.id === 'u2')!;
    expect(steerOf(st, u2)?.clientId).toBe('c-b');
    expect(steerOf(st, st.messages[0])).toBeUndefined();

    ws = fold(evs.slice(7), ws);
    st = ws.sessions.s;
    expect(st.messages.map((m) => m.id)).toEqual(['u1', 'a1', 'u2', 'a2']);
    expect(st.runs.r1).toMatchObject({ state: 'done', messageId: 'a2', usage: usage(500, 40, 0.0042) });
    expect(isBusy(st)).toBe(false);
  });

  it('folds a steer once, however often it comes (replay, history)', () => {
    const evs = steeredRun();
    const once = fold(evs).sessions.s;
    const twice = fold([...evs, evs[4], evs[6]]).sessions.s;
    expect(twice.runs).toEqual(once.runs);
    expect(twice.messages).toEqual(once.messages);
    expect(once.runs.r1.steers).toHaveLength(1);
  });

  it('a steer the run never took in (canceled) is not left waiting', () => {
    const evs = steeredRun();
    const ws = fold([...evs.slice(0, 5), env(6, 'run.completed', { run_id: 'r1', outcome: 'canceled', message_id: 'a1' }, r1)]);
    expect(pendingSteers(ws.sessions.s)).toEqual([]);
  });

  it('a compaction run: flagged, compacting while it runs, the context drops to tokens_after, its bare end is not a row', () => {
    const c = { session_id: 's', run_id: 'rc' };
    let ws = fold([
      env(1, 'session.updated', session('s', { updated_at: time(2), context: { cwd: '/p', tokens: 9000, window: 12000 } })),
      env(2, 'run.accepted', { run_id: 'rc', state: 'queued', position: 1, client_id: 'c-a', compaction: true }, c),
    ]);
    expect(queue(ws.sessions.s)[0]).toMatchObject({ id: 'rc', compaction: true, prompt: undefined });
    ws = fold(
      [
        env(3, 'run.started', { run_id: 'rc' }, c),
        env(4, 'session.compaction_started', { tokens_before: 9000 }, c),
      ],
      ws,
    );
    expect(ws.sessions.s.compacting).toEqual({ tokensBefore: 9000 });
    const summary = message('sum', 'assistant', [{ type: 'summary', text: 'S', through_message_id: 'x' }], 5, { run_id: 'rc', usage: usage(9000, 200) });
    const end = message('end', 'assistant', [{ type: 'finish', reason: 'end_turn' }], 6, { run_id: 'rc' });
    ws = fold(
      [
        env(5, 'message.created', summary, c),
        env(6, 'session.compaction_completed', { tokens_before: 9000, tokens_after: 700, summary_message_id: 'sum' }, c),
        env(7, 'message.created', end, c),
        env(8, 'run.completed', { run_id: 'rc', outcome: 'end_turn', message_id: 'end', usage: usage(9000, 200) }, c),
      ],
      ws,
    );
    const st = ws.sessions.s;
    expect(st.compacting).toBeUndefined();
    expect(st.session.context).toEqual({ cwd: '/p', tokens: 700, window: 12000 });
    expect(st.notices.map((n) => n.text)).toEqual(['Compacting the conversation (9.0k tokens)…', 'Compacted the conversation: 9.0k → 700 tokens']);
    expect(rows(st.messages, []).map((r) => r.key)).toEqual(['sum']);
  });

  it('a failed compaction says so and stops compacting', () => {
    const ws = fold([
      env(1, 'run.accepted', { run_id: 'r1', state: 'running', client_id: 'c-a', compaction: true }, r1),
      env(2, 'session.compaction_started', { tokens_before: 50 }, r1),
      env(3, 'run.completed', { run_id: 'r1', outcome: 'error', error: { code: 'compaction_failed', message: 'compaction failed: nothing to compact' }, message_id: 'm' }, r1),
    ]);
    const st = ws.sessions.s;
    expect(st.compacting).toBeUndefined();
    expect(isBusy(st)).toBe(false);
    expect(st.notices.map((n) => [n.level, n.text])).toEqual([
      ['info', 'Compacting the conversation (50 tokens)…'],
      ['error', 'Compaction failed: nothing to compact. The history is unchanged.'],
    ]);
  });

  it('a rename from another client replaces the title', () => {
    const ws = fold([env(1, 'session.updated', session('s', { title: 'Renamed', updated_at: time(3) }))]);
    expect(ws.sessions.s.session.title).toBe('Renamed');
    expect(ws.sessions.s.loaded).toBe(true); // what was known of it is kept
  });

  it('formats usage and cost', () => {
    expect(formatUsage(usage(0, 0))).toBeNull();
    expect(formatUsage(usage(4000, 500, 0.012))).toBe('4.0k in · 500 out · $0.012');
    expect(formatUsage({ ...usage(14500, 1200), cache_read_tokens: 2000, reasoning_tokens: 30 })).toBe('15k in · 1.2k out · 2.0k cached · 30 reasoning');
    expect([fmtCost(0), fmtCost(0.0042), fmtCost(0.037000000000000005), fmtCost(12.5)]).toEqual(['$0', '$0.0042', '$0.037', '$12.50']);
  });
});

describe('usage and context fill between snapshots', () => {
  const u = (input: number, output: number, cost?: number) => ({
    input_tokens: input,
    output_tokens: output,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    ...(cost !== undefined ? { cost_usd: cost } : {}),
  });
  const r1 = { session_id: 's', run_id: 'r1' };
  const snapshot = (seq: number, usage: ReturnType<typeof u>, tokens: number, extra = {}) =>
    env(seq, 'session.updated', session('s', { updated_at: time(seq), usage, context: { cwd: '/p', tokens, window: 10000 }, ...extra }));
  const step = (id: string, n: number, usage?: ReturnType<typeof u>, parts: Message['parts'] = [{ type: 'text', text: id }]) =>
    message(id, 'assistant', parts, n, { run_id: 'r1', ...(usage ? { usage } : {}) });
  const shown = (ws: WorkspaceState) => {
    const st = ws.sessions.s;
    const t = sessionUsage(st);
    return { input: t.input_tokens, output: t.output_tokens, cost: t.cost_usd, context: contextTokens(st) };
  };
  // A session that ran before (the server's totals), then a run of two steps.
  const start = () =>
    fold([
      snapshot(1, u(1000, 100, 0.01), 1100),
      env(2, 'run.accepted', { run_id: 'r1', state: 'running', position: 0, client_id: 'c' }, r1),
      env(3, 'run.started', { run_id: 'r1' }, r1),
      env(4, 'message.created', message('u1', 'user', [{ type: 'text', text: 'go' }], 4, { run_id: 'r1' }), r1),
      env(5, 'message.created', step('a1', 5), r1),
    ]);

  it('counts each step as its usage arrives, once however often it comes, and the context follows the latest step', () => {
    let ws = start();
    expect(shown(ws)).toEqual({ input: 1000, output: 100, cost: 0.01, context: 1100 });
    ws = fold([env(6, 'message.updated', step('a1', 6, u(2000, 200, 0.02)), r1)], ws);
    expect(shown(ws)).toEqual({ input: 3000, output: 300, cost: 0.03, context: 2200 });
    // The same step again (a replay, a later version of the message): no change.
    const again = fold([env(7, 'message.updated', step('a1', 7, u(2000, 200, 0.02)), r1)], ws);
    expect(shown(again)).toEqual(shown(ws));
    ws = fold(
      [
        env(8, 'message.created', message('t1', 'tool', [{ type: 'tool_result', tool_call_id: 'c1', name: 'ls', content: 'x', is_error: false }], 8, { run_id: 'r1' }), r1),
        env(9, 'message.created', step('a2', 9), r1),
        env(10, 'message.updated', step('a2', 10, u(2500, 100, 0.03)), r1),
      ],
      again,
    );
    expect(shown(ws)).toEqual({ input: 5500, output: 400, cost: 0.06, context: 2600 });
  });

  it('a snapshot taken while the run goes on (a rename) keeps the run on top; once the run ended, the next snapshot replaces it', () => {
    let ws = fold([env(6, 'message.updated', step('a1', 6, u(2000, 200, 0.02)), r1)], start());
    // Another client renames the session: the server's totals do not hold the running run yet.
    ws = fold([snapshot(7, u(1000, 100, 0.01), 1100, { title: 'Renamed' })], ws);
    expect(ws.sessions.s.session.title).toBe('Renamed');
    expect(shown(ws)).toEqual({ input: 3000, output: 300, cost: 0.03, context: 2200 });
    // The run ends: its total (here with a request no step shows, a failed
    // summary) stands for it until the server's totals come.
    ws = fold([env(8, 'run.completed', { run_id: 'r1', outcome: 'end_turn', message_id: 'a1', usage: u(2300, 250, 0.025) }, r1)], ws);
    expect(shown(ws)).toEqual({ input: 3300, output: 350, cost: 0.035, context: 2200 });
    // The server's totals and context hold the run now: they are shown as they are.
    ws = fold([snapshot(9, u(3300, 350, 0.035), 2400)], ws);
    expect(shown(ws)).toEqual({ input: 3300, output: 350, cost: 0.035, context: 2400 });
    // A step of the ended run coming late adds nothing.
    ws = fold([env(10, 'message.updated', step('a1', 10, u(2000, 200, 0.02)), r1)], ws);
    expect(shown(ws)).toEqual({ input: 3300, output: 350, cost: 0.035, context: 2400 });
  });

  it('a summary counts in the usage but not as the context, which drops to tokens_after', () => {
    let ws = fold([env(6, 'message.updated', step('a1', 6, u(8000, 500)), r1)], start());
    expect(shown(ws).context).toBe(8500);
    ws = fold(
      [
        env(7, 'session.compaction_started', { tokens_before: 8500 }, r1),
        env(8, 'message.created', step('sum', 8, u(8500, 300), [{ type: 'summary', text: 'S', through_message_id: 'a1' }]), r1),
        env(9, 'session.compaction_completed', { tokens_before: 8500, tokens_after: 900, summary_message_id: 'sum' }, r1),
      ],
      ws,
    );
    expect(shown(ws)).toMatchObject({ input: 17500, output: 900, context: 900 });
    ws = fold([env(10, 'message.created', step('a2', 10), r1), env(11, 'message.updated', step('a2', 11, u(1200, 100)), r1)], ws);
    expect(shown(ws)).toMatchObject({ input: 18700, output: 1000, context: 1300 });
  });

  it('sums costs as the server does: unknown only when no request was priced', () => {
    expect(addUsage(u(1, 2), u(3, 4)).cost_usd).toBeUndefined();
    expect(addUsage(u(1, 2, 0.5), u(3, 4)).cost_usd).toBe(0.5);
    expect(addUsage(u(1, 2), u(3, 4, 0.25))).toEqual(u(4, 6, 0.25));
  });
});
