// The state of one open workspace, built from REST snapshots and the event
// stream. Every function here is pure: it returns a new object for whatever
// changed and keeps the rest, so the views re-render only what changed.
// Applying the same information twice (a snapshot that already holds an
// event, an event replayed after a reconnect) changes nothing.

import type {
  Checkpoint,
  CompactionCompleted,
  CompactionStarted,
  Envelope,
  McpStatus,
  Message,
  Part,
  PermissionRequest,
  RunAccepted,
  RunCompleted,
  Session,
  ToolCallRequest,
  Usage,
  Workspace,
} from './types';

export interface RunInfo {
  id: string;
  clientId?: string;
  state: 'queued' | 'running' | 'done';
  prompt?: string;
  /** seq of run.accepted: the queue's order. */
  order: number;
  /** a compaction run (POST .../compact): no prompt of its own. */
  compaction?: boolean;
  outcome?: string;
  error?: { code: string; message: string };
  /** the run's model requests' usage, summed (run.completed). */
  usage?: Usage;
  /** the run's last message (run.completed). */
  messageId?: string;
  /** prompts other clients steered into this run, in order. */
  steers?: Steer[];
}

/** Steer is a prompt that joined a running run (delivery steer). */
export interface Steer {
  /** the id its user message gets once the run takes it in, at its next step. */
  messageId: string;
  prompt: string;
  clientId?: string;
  seq: number;
}

export interface ToolInfo {
  id: string;
  name: string;
  args?: unknown;
  status: 'running' | 'done' | 'error';
  content?: string;
  isError?: boolean;
}

export interface PermissionInfo {
  req: PermissionRequest;
  result?: string;
  feedback?: string;
  resolvedBy?: string;
}

export interface ToolRequestInfo {
  req: ToolCallRequest;
  resolved?: boolean;
  isError?: boolean;
  resolvedBy?: string;
}

export interface Notice {
  key: string;
  seq: number;
  time: string;
  level: 'info' | 'warning' | 'error';
  text: string;
  runId?: string;
}

export interface SessionState {
  session: Session;
  /** messages are known (fetched, or the session is new to this page). */
  loaded: boolean;
  messages: Message[];
  runs: Record<string, RunInfo>;
  tools: Record<string, ToolInfo>;
  permissions: Record<string, PermissionInfo>;
  toolRequests: Record<string, ToolRequestInfo>;
  notices: Notice[];
  compacting?: { tokensBefore?: number };
  /** messages whose stream had a hole (a reconnect): the text is complete once the message is updated. */
  gaps: Record<string, true>;
  /** usage this page has seen that the last snapshot of the session does not hold yet. */
  live: LiveUsage;
  /** checkpoints of the session's file-changing runs, oldest first, once fetched. */
  checkpoints?: Checkpoint[];
}

/**
 * LiveUsage is what the steps of recent runs used, shown before the server's
 * totals hold it: the server adds a run to its session's usage and context
 * size only when the run completes, while each step's assistant message
 * carries its own usage as soon as its model request is done.
 */
export interface LiveUsage {
  /**
   * by run: its steps' usage by assistant message (a message updated again
   * replaces its own entry, never adds), and run.completed's total once it
   * has ended. An ended run's entry goes when the next snapshot of the
   * session comes, which then holds it.
   */
  runs: Record<string, { steps: Record<string, Usage>; total?: Usage }>;
  /** the size of the conversation as the latest step left it (its input plus its output), and that step's time. */
  context?: { tokens: number; at: string };
}

export interface WorkspaceState {
  workspace: Workspace;
  sessions: Record<string, SessionState>;
  deleted: Record<string, true>;
  /** attached clients: the count the server reports and the ids seen attaching. */
  clients: { count: number; ids: string[] };
  /** names: the person behind each client id seen (actors, attached clients). */
  names: Record<string, string>;
  mcp: Record<string, McpStatus>;
  closing?: string;
}

export function newWorkspaceState(workspace: Workspace): WorkspaceState {
  const names: Record<string, string> = {};
  for (const a of workspace.attached ?? []) if (a.name) names[a.client_id] = a.name;
  const ids = (workspace.attached ?? []).map((a) => a.client_id);
  return { workspace, sessions: {}, deleted: {}, clients: { count: workspace.clients, ids }, names, mcp: {} };
}

export function newSessionState(session: Session, loaded = false): SessionState {
  return {
    session,
    loaded,
    messages: [],
    runs: {},
    tools: {},
    permissions: {},
    toolRequests: {},
    notices: [],
    gaps: {},
    live: { runs: {} },
  };
}

// Folding a long history event by event would copy the session's maps once
// per event (quadratic in the history). Inside batch(), a map made during the
// batch is written in place instead: nothing outside has seen it yet.
let owned: WeakSet<object> | null = null;

function put<T>(map: Record<string, T>, key: string, value: T): Record<string, T> {
  if (owned?.has(map)) {
    map[key] = value;
    return map;
  }
  const next = { ...map, [key]: value };
  owned?.add(next);
  return next;
}

function append<T>(list: T[], item: T): T[] {
  if (owned?.has(list)) {
    list.push(item);
    return list;
  }
  const next = [...list, item];
  owned?.add(next);
  return next;
}

/** batch runs f, letting the state functions write in place what f's own steps made. */
export function batch<R>(f: () => R): R {
  const prev = owned;
  owned = new WeakSet();
  try {
    return f();
  } finally {
    owned = prev;
  }
}

/** applySessionEvents folds a page of history into a session at once. */
export function applySessionEvents(s: SessionState, evs: Envelope[]): SessionState {
  return batch(() => evs.reduce(applySessionEvent, s));
}

const later = (a: string, b: string) => a > b; // RFC 3339 UTC strings of equal precision sort as times

function textLength(m: Message) {
  let n = 0;
  for (const p of m.parts) if (p.type === 'text' || p.type === 'reasoning') n += p.text.length;
  return n;
}

export const hasFinish = (m: Message) => m.parts.some((p) => p.type === 'finish');

/** mergeMessage keeps the newer of two versions of a message. */
export function mergeMessage(have: Message, got: Message): Message {
  if (later(got.updated_at, have.updated_at)) return got;
  if (later(have.updated_at, got.updated_at)) return have;
  // Same version: a live copy may hold streamed text the stored one has not yet.
  if (hasFinish(got) && !hasFinish(have)) return got;
  if (!hasFinish(got) && !hasFinish(have) && textLength(have) > textLength(got)) return have;
  return got;
}

export function upsertMessage(s: SessionState, m: Message): SessionState {
  const i = indexOfMessage(s.messages, m.id);
  if (i < 0) {
    const gaps = s.gaps;
    return { ...s, messages: [...s.messages, m], gaps };
  }
  const merged = mergeMessage(s.messages[i], m);
  if (merged === s.messages[i]) return s;
  const messages = s.messages.slice();
  messages[i] = merged;
  let gaps = s.gaps;
  if (hasFinish(merged) && gaps[m.id]) {
    gaps = { ...gaps };
    delete gaps[m.id];
  }
  return { ...s, messages, gaps };
}

/** indexOfMessage searches from the end: events touch the latest messages. */
function indexOfMessage(list: Message[], id: string) {
  for (let i = list.length - 1; i >= 0; i--) if (list[i].id === id) return i;
  return -1;
}

/** applyDelta appends streamed text to its part, unless the message is already final. */
export function applyDelta(s: SessionState, d: { message_id: string; part_index: number; kind: string; text: string }): SessionState {
  const i = indexOfMessage(s.messages, d.message_id);
  if (i < 0) return s;
  const m = s.messages[i];
  if (hasFinish(m)) return s; // the final text is there; this delta is in it
  const parts = m.parts.slice();
  const kind = d.kind === 'reasoning' ? 'reasoning' : 'text';
  let gaps = s.gaps;
  if (d.part_index < parts.length) {
    const p = parts[d.part_index];
    if (p.type !== kind) return s;
    parts[d.part_index] = { type: kind, text: (p as { text: string }).text + d.text };
  } else {
    if (d.part_index > parts.length) {
      // Parts were streamed while this page was away.
      gaps = { ...gaps, [m.id]: true };
      while (parts.length < d.part_index) parts.push({ type: 'text', text: '' });
    }
    parts.push({ type: kind, text: d.text } as Part);
  }
  const messages = s.messages.slice();
  messages[i] = { ...m, parts };
  return { ...s, messages, gaps };
}

/** markGaps flags the messages still streaming: deltas sent while this page was away are not replayed. */
export function markGaps(s: SessionState): SessionState {
  let gaps = s.gaps;
  for (let i = s.messages.length - 1; i >= 0 && i >= s.messages.length - 5; i--) {
    const m = s.messages[i];
    if (m.role === 'assistant' && !hasFinish(m) && !gaps[m.id]) gaps = { ...gaps, [m.id]: true };
  }
  return gaps === s.gaps ? s : { ...s, gaps };
}

/** mergeMessages lays a fetched history under what the stream brought meanwhile. */
export function mergeMessages(s: SessionState, fetched: Message[]): SessionState {
  const live = new Map(s.messages.map((m) => [m.id, m]));
  const seen = new Set<string>();
  const out: Message[] = [];
  for (const m of fetched) {
    const l = live.get(m.id);
    out.push(l ? mergeMessage(l, m) : m);
    seen.add(m.id);
  }
  for (const m of s.messages) if (!seen.has(m.id)) out.push(m);
  return { ...s, messages: out, loaded: true };
}

function upsertSession(ws: WorkspaceState, session: Session): WorkspaceState {
  if (ws.deleted[session.id]) return ws;
  const cur = ws.sessions[session.id];
  if (cur && later(cur.session.updated_at, session.updated_at)) return ws;
  const next = cur ? withSnapshot(cur, session) : newSessionState(session);
  return { ...ws, sessions: { ...ws.sessions, [session.id]: next } };
}

/**
 * withSnapshot takes the server's view of the session. Its usage and
 * context size hold every run that had completed when it was taken: a
 * session.updated event comes after the run.completed events before it, and
 * the controller refetches a session only once it has folded in the
 * run.completed that called for it. So the runs this page saw end leave
 * the live usage; the runs still going stay on top of the server's totals.
 */
function withSnapshot(cur: SessionState, session: Session): SessionState {
  let runs = cur.live.runs;
  for (const [id, r] of Object.entries(runs)) {
    if (!r.total) continue;
    if (runs === cur.live.runs) runs = { ...runs };
    delete runs[id];
  }
  // While a run is going, the size its last step reported is newer than
  // the server's, which moves only when a run ends.
  const context = Object.keys(runs).length > 0 ? cur.live.context : undefined;
  const live = runs === cur.live.runs && context === cur.live.context ? cur.live : { runs, context };
  return { ...cur, session, live };
}

/** dropLiveUsage forgets the usage seen live, for a snapshot taken after events this page may have missed. */
export function dropLiveUsage(s: SessionState): SessionState {
  return Object.keys(s.live.runs).length === 0 && !s.live.context ? s : { ...s, live: { runs: {} } };
}

/** setSessions replaces the session list with the server's, keeping what is known of each. */
export function setSessions(ws: WorkspaceState, list: Session[]): WorkspaceState {
  const sessions: Record<string, SessionState> = {};
  for (const session of list) {
    if (ws.deleted[session.id]) continue;
    const cur = ws.sessions[session.id];
    sessions[session.id] = cur ? (later(cur.session.updated_at, session.updated_at) ? cur : withSnapshot(cur, session)) : newSessionState(session);
  }
  return { ...ws, sessions };
}

/** addUsage sums two Usages as the server does: the cost is the sum of the known costs, absent only when neither is known. */
export function addUsage(a: Usage, b: Usage): Usage {
  const sum: Usage = {
    input_tokens: (a.input_tokens ?? 0) + (b.input_tokens ?? 0),
    output_tokens: (a.output_tokens ?? 0) + (b.output_tokens ?? 0),
    cache_read_tokens: (a.cache_read_tokens ?? 0) + (b.cache_read_tokens ?? 0),
    cache_write_tokens: (a.cache_write_tokens ?? 0) + (b.cache_write_tokens ?? 0),
    reasoning_tokens: (a.reasoning_tokens ?? 0) + (b.reasoning_tokens ?? 0),
  };
  const known = (x?: number | null): x is number => typeof x === 'number';
  if (known(a.cost_usd) || known(b.cost_usd)) sum.cost_usd = (known(a.cost_usd) ? a.cost_usd : 0) + (known(b.cost_usd) ? b.cost_usd : 0);
  return sum;
}

const noUsage: Usage = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0 };

/** sessionUsage is the session's usage as shown: the server's totals plus what runs used since they were taken. */
export function sessionUsage(s: SessionState): Usage {
  let u = s.session.usage ?? noUsage;
  for (const r of Object.values(s.live.runs)) {
    if (r.total) u = addUsage(u, r.total);
    else for (const step of Object.values(r.steps)) u = addUsage(u, step);
  }
  return u;
}

/** contextTokens is the size of the session's next model request as shown: the latest step's, else the server's. */
export function contextTokens(s: SessionState): number | undefined {
  return s.live.context?.tokens ?? s.session.context?.tokens;
}

/**
 * stepUsage notes the usage of an assistant message whose model request
 * is done, unless the run it belongs to has ended and a snapshot has taken
 * it in already.
 */
function stepUsage(s: SessionState, m: Message): SessionState {
  if (m.role !== 'assistant' || !m.usage || !m.run_id) return s;
  const cur = s.live.runs[m.run_id];
  if (!cur && s.runs[m.run_id]?.state === 'done') return s;
  if (cur?.total) return s; // run.completed's total holds every step
  const have = cur?.steps[m.id];
  let live = s.live;
  if (!have || !sameUsage(have, m.usage)) {
    live = { ...live, runs: { ...live.runs, [m.run_id]: { steps: { ...cur?.steps, [m.id]: m.usage } } } };
  }
  // A summary's request read the conversation it replaces: not the size of
  // the next request. A step reports what it read plus what it wrote; what
  // the tools answer since is counted when the run ends (the server estimates it).
  const summary = m.parts.some((p) => p.type === 'summary');
  if (!summary && (!live.context || !later(live.context.at, m.created_at))) {
    const tokens = m.usage.input_tokens + m.usage.output_tokens;
    if (tokens > 0 && (live.context?.tokens !== tokens || live.context.at !== m.created_at)) live = { ...live, context: { tokens, at: m.created_at } };
  }
  return live === s.live ? s : { ...s, live };
}

function sameUsage(a: Usage, b: Usage) {
  return (
    a.input_tokens === b.input_tokens &&
    a.output_tokens === b.output_tokens &&
    a.cache_read_tokens === b.cache_read_tokens &&
    a.cache_write_tokens === b.cache_write_tokens &&
    a.reasoning_tokens === b.reasoning_tokens &&
    a.cost_usd === b.cost_usd
  );
}

export function updateSession(ws: WorkspaceState, sid: string, f: (s: SessionState) => SessionState): WorkspaceState {
  const cur = ws.sessions[sid];
  if (!cur) return ws;
  const next = f(cur);
  if (next === cur) return ws;
  return { ...ws, sessions: { ...ws.sessions, [sid]: next } };
}

function notice(s: SessionState, ev: Envelope, level: Notice['level'], text: string): SessionState {
  const key = `${ev.seq}:${ev.type}`;
  if (s.notices.some((n) => n.key === key)) return s;
  const n: Notice = { key, seq: ev.seq, time: ev.time, level, text, runId: ev.run_id };
  return { ...s, notices: append(s.notices, n) };
}

function setRun(s: SessionState, id: string, f: (r: RunInfo | undefined) => RunInfo): SessionState {
  return { ...s, runs: put(s.runs, id, f(s.runs[id])) };
}

const stateRank = { queued: 0, running: 1, done: 2 } as const;

function advance(r: RunInfo | undefined, id: string, state: RunInfo['state'], order: number): RunInfo {
  if (!r) return { id, state, order };
  if (stateRank[r.state] >= stateRank[state]) return r;
  return { ...r, state };
}

/** fmtTokens writes a token count the way the views do: 950, 9.5k, 120k. */
export function fmtTokens(n?: number) {
  if (n === undefined) return '?';
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

/** formatUsage writes a Usage as the views show it; null when nothing was used yet. */
export function formatUsage(u?: Usage): string | null {
  if (!u || (!u.input_tokens && !u.output_tokens && !u.cost_usd)) return null;
  const parts = [`${fmtTokens(u.input_tokens)} in`, `${fmtTokens(u.output_tokens)} out`];
  if (u.cache_read_tokens) parts.push(`${fmtTokens(u.cache_read_tokens)} cached`);
  if (u.reasoning_tokens) parts.push(`${fmtTokens(u.reasoning_tokens)} reasoning`);
  if (u.cost_usd !== undefined && u.cost_usd !== null) parts.push(fmtCost(u.cost_usd));
  return parts.join(' · ');
}

/** fmtCost writes US dollars with enough digits to tell small runs apart: $0.0042, $0.037, $1.25. */
export function fmtCost(usd: number): string {
  if (usd === 0) return '$0';
  return '$' + (usd < 0.01 ? usd.toFixed(4) : usd < 1 ? usd.toFixed(3) : usd.toFixed(2));
}

/** applyEvent folds one stream or history event into the workspace. */
export function applyEvent(ws: WorkspaceState, ev: Envelope): WorkspaceState {
  ws = learnNames(ws, ev);
  const d = ev.data ?? {};
  const sid = ev.session_id;
  switch (ev.type) {
    case 'session.created':
    case 'session.updated':
      return upsertSession(ws, d as Session);
    case 'session.deleted': {
      const id = (d.session_id as string) ?? sid;
      const sessions = { ...ws.sessions };
      delete sessions[id];
      return { ...ws, sessions, deleted: { ...ws.deleted, [id]: true } };
    }
    case 'client.attached':
    case 'client.detached': {
      const ids =
        ev.type === 'client.attached'
          ? ws.clients.ids.includes(d.client_id)
            ? ws.clients.ids
            : [...ws.clients.ids, d.client_id]
          : ws.clients.ids.filter((x) => x !== d.client_id);
      return { ...ws, clients: { count: d.clients ?? ids.length, ids } };
    }
    case 'workspace.closing':
      return { ...ws, closing: d.reason || 'closing' };
    case 'mcp.server_status': {
      const st = d as McpStatus;
      const key = `${st.session_id ?? ''}/${st.name}`;
      return { ...ws, mcp: { ...ws.mcp, [key]: st } };
    }
  }
  if (!sid) return ws;
  return updateSession(ws, sid, (s) => applySessionEvent(s, ev));
}

export function applySessionEvent(s: SessionState, ev: Envelope): SessionState {
  const d = ev.data ?? {};
  switch (ev.type) {
    case 'session.model_changed':
      return notice(
        { ...s, session: { ...s.session, model: d.model, reasoning_effort: d.reasoning_effort ?? s.session.reasoning_effort } },
        ev,
        'info',
        `Model changed to ${d.model}${d.reasoning_effort ? ` (${d.reasoning_effort})` : ''}${d.previous_model ? `, was ${d.previous_model}` : ''}`,
      );
    case 'session.log':
      return notice(s, ev, d.level === 'error' ? 'error' : d.level === 'warning' ? 'warning' : 'info', d.message);
    case 'session.idle': {
      let runs = s.runs;
      for (const r of Object.values(s.runs)) {
        if (r.state !== 'done') runs = put(runs, r.id, { ...r, state: 'done' });
      }
      return { ...s, runs, session: { ...s.session, busy: false, queued: 0 } };
    }
    case 'session.compaction_started': {
      const c = d as CompactionStarted;
      return notice({ ...s, compacting: { tokensBefore: c.tokens_before } }, ev, 'info', `Compacting the conversation (${fmtTokens(c.tokens_before)} tokens)…`);
    }
    case 'session.compaction_completed': {
      const c = d as CompactionCompleted;
      // The next request carries the summary instead: the context fill
      // drops now, not when the run ends and the session is refetched.
      const after = typeof c.tokens_after === 'number';
      const session = after ? { ...s.session, context: { ...s.session.context, tokens: c.tokens_after } } : s.session;
      const live = after ? { ...s.live, context: { tokens: c.tokens_after, at: ev.time } } : s.live;
      return notice(
        { ...s, session, live, compacting: undefined },
        ev,
        'info',
        `Compacted the conversation: ${fmtTokens(c.tokens_before)} → ${fmtTokens(c.tokens_after)} tokens`,
      );
    }
    case 'run.accepted': {
      const a = d as RunAccepted;
      const id = a.run_id ?? ev.run_id;
      if (a.state === 'steered') {
        // The prompt joined run id: it is no run of its own.
        const mid = a.message_id ?? `steer-${ev.seq}`;
        return setRun(s, id, (r) => {
          const run = r ?? { id, state: 'running' as const, order: ev.seq };
          if (run.steers?.some((x) => x.messageId === mid)) return run;
          const steer: Steer = { messageId: mid, prompt: a.prompt ?? '', clientId: a.client_id || undefined, seq: ev.seq };
          return { ...run, steers: [...(run.steers ?? []), steer] };
        });
      }
      return setRun(s, id, (r) => ({
        ...(r ?? { id, state: a.state === 'queued' ? 'queued' : 'running', order: ev.seq }),
        clientId: a.client_id || r?.clientId,
        prompt: a.prompt ?? r?.prompt,
        // The seq of run.accepted is the queue's order, whatever a 202
        // that came first put there.
        order: ev.seq,
        ...(a.compaction ? { compaction: true } : {}),
      }));
    }
    case 'run.started': {
      const id = d.run_id ?? ev.run_id;
      return setRun(s, id, (r) => advance(r, id, 'running', ev.seq));
    }
    case 'run.completed': {
      const c = d as RunCompleted;
      const id = c.run_id ?? ev.run_id;
      let next = setRun(s, id, (r) => ({
        ...advance(r, id, 'done', ev.seq),
        outcome: c.outcome,
        error: c.error,
        usage: c.usage ?? r?.usage,
        messageId: c.message_id || r?.messageId,
      }));
      // The run's usage is now in the server's totals, which reach this page
      // with the next snapshot: until then its total (a failed summary
      // request included) stands in for its steps.
      const live = next.live.runs[id];
      if (live && !live.total) {
        const total = c.usage ?? Object.values(live.steps).reduce(addUsage, noUsage);
        next = { ...next, live: { ...next.live, runs: { ...next.live.runs, [id]: { ...live, total } } } };
      }
      // Whatever the outcome, a compaction of this run is over.
      if (next.compacting) next = { ...next, compacting: undefined };
      if (c.outcome === 'error' && c.error?.code === 'compaction_failed') {
        const why = c.error.message.replace(/^compaction failed:\s*/i, '');
        next = notice(next, ev, 'error', `Compaction failed: ${why}. The history is unchanged.`);
      } else if (c.outcome === 'error' && c.error) {
        next = notice(next, ev, 'error', `The run failed: ${c.error.message} (${c.error.code})`);
      }
      if (!Object.values(next.runs).some((r) => r.state !== 'done')) next = { ...next, session: { ...next.session, busy: false } };
      return next;
    }
    case 'message.created':
    case 'message.updated':
      return stepUsage(upsertMessage(s, d as Message), d as Message);
    case 'message.delta':
      return applyDelta(s, d);
    case 'tool.started': {
      const cur = s.tools[d.tool_call_id];
      if (cur && cur.status !== 'running') return s;
      return { ...s, tools: put(s.tools, d.tool_call_id, { id: d.tool_call_id, name: d.name, args: d.arguments, status: 'running' }) };
    }
    case 'tool.finished': {
      const cur = s.tools[d.tool_call_id];
      return {
        ...s,
        tools: put(s.tools, d.tool_call_id, {
          id: d.tool_call_id,
          name: d.name,
          args: cur?.args,
          status: d.is_error ? 'error' : 'done',
          content: d.content,
          isError: d.is_error,
        }),
      };
    }
    case 'permission.requested': {
      const req = d as PermissionRequest;
      const cur = s.permissions[req.request_id];
      if (cur?.result) return s; // a resolved request stays resolved
      return { ...s, permissions: put(s.permissions, req.request_id, { ...cur, req }) };
    }
    case 'permission.resolved': {
      const cur = s.permissions[d.request_id];
      const req = cur?.req ?? ({ request_id: d.request_id, session_id: s.session.id, run_id: ev.run_id ?? '', tool_call_id: '', tool_name: '', kind: '', summary: '', details: null } as PermissionRequest);
      return {
        ...s,
        permissions: put(s.permissions, d.request_id, { req, result: d.result, feedback: d.feedback, resolvedBy: d.resolved_by }),
      };
    }
    case 'tool.requested': {
      const req = d as ToolCallRequest;
      const cur = s.toolRequests[req.request_id];
      if (cur?.resolved) return s;
      return { ...s, toolRequests: put(s.toolRequests, req.request_id, { ...cur, req }) };
    }
    case 'tool.resolved': {
      const cur = s.toolRequests[d.request_id];
      if (!cur) return s;
      return {
        ...s,
        toolRequests: put(s.toolRequests, d.request_id, { ...cur, resolved: true, isError: d.is_error, resolvedBy: d.resolved_by }),
      };
    }
  }
  return s;
}

/** pendingPermissions lists the permissions nobody answered yet, oldest first. */
export function pendingPermissions(s: SessionState): PermissionInfo[] {
  return Object.values(s.permissions).filter((p) => !p.result && p.req.tool_call_id !== '');
}

/** queue lists the session's queued runs in order. */
export function queue(s: SessionState): RunInfo[] {
  return Object.values(s.runs)
    .filter((r) => r.state === 'queued')
    .sort((a, b) => a.order - b.order);
}

/** isBusy: a run of the session is running or queued. */
export function isBusy(s: SessionState): boolean {
  return Object.values(s.runs).some((r) => r.state !== 'done') || (s.session.busy && Object.keys(s.runs).length === 0);
}

export function activeRun(s: SessionState): RunInfo | undefined {
  return Object.values(s.runs).find((r) => r.state === 'running');
}

/** pendingSteers lists the prompts steered into a run that has not taken them in yet (its next step has not begun). */
export function pendingSteers(s: SessionState): Steer[] {
  const out: Steer[] = [];
  for (const r of Object.values(s.runs)) {
    if (r.state === 'done' || !r.steers) continue;
    for (const st of r.steers) if (indexOfMessage(s.messages, st.messageId) < 0) out.push(st);
  }
  return out.sort((a, b) => a.seq - b.seq);
}

/** steerOf finds the steer that made user message id, if it was steered into its run. */
export function steerOf(s: SessionState, m: Message): Steer | undefined {
  const r = m.run_id ? s.runs[m.run_id] : undefined;
  return r?.steers?.find((x) => x.messageId === m.id);
}

/** onlyFinish: an assistant message with nothing to show but a plain end (a compaction run's last message). */
const onlyFinish = (m: Message) =>
  m.role === 'assistant' && m.parts.length === 1 && m.parts[0].type === 'finish' && (m.parts[0].reason === 'tool_use' || m.parts[0].reason === 'end_turn');

/** A row of the timeline: a message or a notice, in order. */
export type Row = { kind: 'message'; key: string; message: Message } | { kind: 'notice'; key: string; notice: Notice };

/**
 * rows is what the timeline shows: user and assistant messages (tool
 * messages are shown inside the call they answer) and notices, by time.
 */
export function rows(messages: Message[], notices: Notice[]): Row[] {
  const out: Row[] = [];
  let j = 0;
  const ns = notices.length > 1 ? [...notices].sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : a.seq - b.seq)) : notices;
  for (const m of messages) {
    while (j < ns.length && ns[j].time < m.created_at) {
      out.push({ kind: 'notice', key: 'n' + ns[j].key, notice: ns[j] });
      j++;
    }
    if (m.role === 'tool') continue;
    if (onlyFinish(m)) continue;
    out.push({ kind: 'message', key: m.id, message: m });
  }
  for (; j < ns.length; j++) out.push({ kind: 'notice', key: 'n' + ns[j].key, notice: ns[j] });
  return out;
}

/** toolResults maps tool_call_id to the result part of the tool message answering it. */
export function toolResults(messages: Message[]): Map<string, Extract<Part, { type: 'tool_result' }>> {
  const out = new Map<string, Extract<Part, { type: 'tool_result' }>>();
  for (const m of messages) {
    if (m.role !== 'tool') continue;
    for (const p of m.parts) if (p.type === 'tool_result') out.set(p.tool_call_id, p);
  }
  return out;
}

/** sortedSessions: most recently updated first, as the server lists them. */
export function sortedSessions(ws: WorkspaceState): Session[] {
  return Object.values(ws.sessions)
    .map((s) => s.session)
    .sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
}

/** learnNames records who is behind the clients an event names. */
function learnNames(ws: WorkspaceState, ev: Envelope): WorkspaceState {
  const found: [string, string][] = [];
  if (ev.actor?.client_id && ev.actor.name) found.push([ev.actor.client_id, ev.actor.name]);
  const d = ev.data;
  if ((ev.type === 'client.attached' || ev.type === 'client.detached') && d?.client_id && d?.name) found.push([d.client_id, d.name]);
  const names = ws.names ?? {};
  const fresh = found.filter(([id, name]) => names[id] !== name);
  if (fresh.length === 0) return ws;
  return { ...ws, names: { ...names, ...Object.fromEntries(fresh) } };
}
