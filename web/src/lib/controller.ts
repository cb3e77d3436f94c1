// The controller owns the app's state and everything that changes it: REST
// calls, the event stream of the open workspace, the route. Views read its
// state and call its methods.

import { Api, ApiError, isUnauthorized } from './api';
import type { ConnState } from './stream';
import { WorkspaceStream } from './stream';
import {
  applyEvent,
  applySessionEvent,
  applySessionEvents,
  dropLiveUsage,
  markGaps,
  mergeMessages,
  newSessionState,
  newWorkspaceState,
  setSessions,
  updateSession,
  type SessionState,
  type WorkspaceState,
} from './state';
import type { Attachment, CheckpointDiff, Decision, Envelope, Health, Me, SandboxSettings, Session, Workspace } from './types';

export type Auth = 'checking' | 'needed' | 'refused' | 'ok';

export interface Toast {
  id: number;
  level: 'info' | 'error';
  text: string;
}

export interface AppState {
  auth: Auth;
  authMessage?: string;
  /** who the token belongs to; undefined before it is known, or on a server without GET /v1/me. */
  me?: Me;
  health?: Health;
  workspaces: Workspace[];
  workspaceId?: string;
  ws?: WorkspaceState;
  sessionId?: string;
  conn: ConnState;
  connDetail?: string;
  /** syncing: a REST refetch is under way; events wait for it. */
  syncing: boolean;
  toasts: Toast[];
  clientId: string;
  /** models seen: the server's default, the sessions', what was typed before. */
  models: string[];
}

export interface ControllerOptions {
  api: Api;
  clientId: string;
  /** schedule runs f before the next paint; tests run it at once. */
  schedule?: (f: () => void) => void;
  newStream?: (o: ConstructorParameters<typeof WorkspaceStream>[0]) => WorkspaceStream;
  route?: { get(): string; set(hash: string): void };
  /** startRetries are the waits (ms) before start tries again after a network error or a 5xx. */
  startRetries?: number[];
}

const rafSchedule = (f: () => void) => {
  // Background tabs get no animation frames; the timer keeps them current.
  let done = false;
  const run = () => {
    if (!done) {
      done = true;
      f();
    }
  };
  requestAnimationFrame(run);
  setTimeout(run, 100);
};

export function parseRoute(hash: string): { workspaceId?: string; sessionId?: string } {
  const m = /^#?\/w\/([0-9a-f-]{36})(?:\/s\/([0-9a-f-]{36}))?/.exec(hash);
  return m ? { workspaceId: m[1], sessionId: m[2] } : {};
}

export class Controller {
  state: AppState;
  api: Api;
  private listeners = new Set<() => void>();
  private scheduled = false;
  private stream: WorkspaceStream | null = null;
  private buffer: Envelope[] = [];
  private syncGen = 0;
  private toastId = 0;
  private loading = new Map<string, Promise<void>>();
  private refreshes = new Map<string, number>();
  private readonly schedule: (f: () => void) => void;
  private readonly newStream: NonNullable<ControllerOptions['newStream']>;
  private readonly route: NonNullable<ControllerOptions['route']>;
  private readonly startRetries: number[];

  constructor(o: ControllerOptions) {
    this.api = o.api;
    this.schedule = o.schedule ?? rafSchedule;
    this.startRetries = o.startRetries ?? [250, 500, 1000, 2000];
    this.newStream = o.newStream ?? ((so) => new WorkspaceStream(so));
    this.route = o.route ?? {
      get: () => location.hash,
      set: (h) => {
        if (location.hash !== h) location.hash = h;
      },
    };
    this.state = {
      auth: o.api.token ? 'checking' : 'needed',
      workspaces: [],
      conn: 'connecting',
      syncing: false,
      toasts: [],
      clientId: o.clientId,
      models: loadModels(),
    };
  }

  subscribe(f: () => void) {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  private set(patch: Partial<AppState>) {
    this.state = { ...this.state, ...patch };
    if (this.scheduled) return;
    this.scheduled = true;
    this.schedule(() => {
      this.scheduled = false;
      for (const f of this.listeners) f();
    });
  }

  private setWs(f: (ws: WorkspaceState) => WorkspaceState) {
    if (!this.state.ws) return;
    const ws = f(this.state.ws);
    if (ws !== this.state.ws) this.set({ ws });
  }

  toast(text: string, level: Toast['level'] = 'error') {
    const t = { id: ++this.toastId, level, text };
    this.set({ toasts: [...this.state.toasts, t].slice(-4) });
    setTimeout(() => this.dismiss(t.id), level === 'error' ? 8000 : 4000);
  }

  dismiss(id: number) {
    this.set({ toasts: this.state.toasts.filter((t) => t.id !== id) });
  }

  /** fail reports an action's error; a refused token sends the user back to the token screen. */
  private fail(what: string, e: unknown) {
    if (isUnauthorized(e)) {
      this.refused();
      return;
    }
    const msg = e instanceof ApiError ? e.message : String(e);
    this.toast(`${what}: ${msg}`);
  }

  private refused() {
    this.stream?.close();
    this.stream = null;
    this.set({
      auth: 'refused',
      authMessage: 'The server refused this token (401 unauthorized). Paste the token from DATA_DIR/token, or open the app with `tandem web`.',
      ws: undefined,
    });
  }

  // ---- start, token ----

  /** changeToken shows the token screen, to sign in with another token. */
  changeToken() {
    this.stream?.close();
    this.stream = null;
    this.set({ auth: 'needed', authMessage: undefined, ws: undefined });
  }

  async start() {
    if (!this.api.token) {
      this.set({ auth: 'needed' });
      return;
    }
    for (let attempt = 0; ; attempt++) {
      try {
        const [health, workspaces, me] = await Promise.all([
          this.api.health().catch(() => undefined),
          this.api.workspaces(),
          this.api.me().catch(() => undefined),
        ]);
        this.set({ auth: 'ok', health, workspaces, me, models: mergeModels(this.state.models, health?.default_model) });
        break;
      } catch (e) {
        if (isUnauthorized(e)) return this.refused();
        // A server that is starting, restarting or briefly unreachable is not
        // a token problem: try again before sending the user to the token screen.
        const transient = e instanceof ApiError && (e.status === 0 || e.status >= 500);
        if (transient && attempt < this.startRetries.length) {
          await new Promise((r) => setTimeout(r, this.startRetries[attempt]));
          continue;
        }
        this.set({ auth: 'needed', authMessage: e instanceof ApiError ? e.message : String(e) });
        return;
      }
    }
    this.applyRoute();
  }

  applyRoute() {
    const r = parseRoute(this.route.get());
    if (r.workspaceId && r.workspaceId !== this.state.workspaceId) this.openWorkspace(r.workspaceId, r.sessionId);
    else if (!r.workspaceId && this.state.workspaceId) this.leaveWorkspace();
    else if (r.sessionId !== this.state.sessionId) this.selectSession(r.sessionId);
  }

  async refreshWorkspaces() {
    try {
      this.set({ workspaces: await this.api.workspaces() });
    } catch (e) {
      this.fail('List workspaces', e);
    }
  }

  /** Forgets a workspace (one whose directory is gone): it leaves the list. */
  async forgetWorkspace(wid: string) {
    try {
      await this.api.forgetWorkspace(wid);
    } catch (e) {
      this.fail('Forget workspace', e);
    }
    void this.refreshWorkspaces();
  }

  async openPath(path: string) {
    try {
      const ws = await this.api.openWorkspace(path.trim());
      this.route.set(`#/w/${ws.id}`);
      this.openWorkspace(ws.id);
      void this.refreshWorkspaces();
    } catch (e) {
      this.fail('Open workspace', e);
    }
  }

  // ---- workspace and its stream ----

  leaveWorkspace() {
    this.stream?.close();
    this.stream = null;
    this.buffer = [];
    this.set({ workspaceId: undefined, ws: undefined, sessionId: undefined, conn: 'connecting' });
    void this.refreshWorkspaces();
  }

  openWorkspace(wid: string, sessionId?: string) {
    this.stream?.close();
    this.buffer = [];
    this.set({ workspaceId: wid, sessionId, ws: undefined, syncing: true, conn: 'connecting' });
    const stream = this.newStream({
      url: (last) => this.api.streamURL(wid, this.state.clientId, last),
      probe: () => this.api.workspace(wid),
      handlers: {
        opened: (_data, resumed) => {
          if (!resumed) void this.sync();
          // Back after a drop: the workspace is open again (a stream claims
          // it), and deltas sent meanwhile are not replayed.
          else this.setWs((ws) => ({ ...mapLoaded(ws, markGaps), closing: undefined }));
        },
        event: (ev) => {
          if (this.state.syncing) this.buffer.push(ev);
          else {
            this.setWs((ws) => applyEvent(ws, ev));
            this.afterEvent(ev);
          }
        },
        resync: () => void this.sync(),
        state: (conn, connDetail) => this.set({ conn, connDetail }),
        failed: (e) => {
          if (isUnauthorized(e)) this.refused();
          else if (e instanceof ApiError && e.status === 404) {
            this.toast('This workspace no longer exists.');
            this.route.set('#/');
            this.leaveWorkspace();
          } else this.fail('Event stream', e);
        },
      },
    });
    this.stream = stream;
    stream.start();
  }

  /** afterEvent does what an event calls for beyond folding it in; it runs once the event is folded in. */
  private afterEvent(ev: Envelope) {
    if (ev.type === 'run.completed' && ev.session_id) {
      // The server's totals now hold the run: fetched only after its
      // run.completed is folded in, the snapshot replaces the run's live
      // usage instead of adding to it (see state.ts withSnapshot).
      void this.refreshSession(ev.session_id);
    }
    if (ev.type === 'run.completed' && ev.session_id) void this.loadCheckpoints(ev.session_id);
    if (ev.type === 'session.rewound' && ev.session_id) void this.reloadRewound(ev.session_id);
    if (ev.type === 'session.created' && ev.data?.model) {
      this.set({ models: mergeModels(this.state.models, ev.data.model) });
    }
  }

  private async refreshSession(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    // Only the latest refetch of a session counts: an earlier one may
    // answer last, without the runs that ended since it was asked.
    const gen = (this.refreshes.get(sid) ?? 0) + 1;
    this.refreshes.set(sid, gen);
    try {
      const s = await this.api.session(wid, sid);
      if (this.refreshes.get(sid) !== gen) return;
      this.refreshes.delete(sid);
      if (this.state.workspaceId === wid) this.setWs((ws) => applyEvent(ws, { type: 'session.updated', data: s } as Envelope));
    } catch {
      /* deleted meanwhile, or offline: the stream says so */
    }
  }

  /**
   * sync refetches the workspace over REST: on open, and when the stream
   * cannot replay what this page missed. Events arriving meanwhile wait and
   * are folded in after the snapshot.
   */
  async sync() {
    const wid = this.state.workspaceId;
    if (!wid) return;
    const gen = ++this.syncGen;
    this.set({ syncing: true });
    try {
      const [workspace, sessions, permissions] = await Promise.all([
        this.api.workspace(wid),
        this.api.sessions(wid),
        this.api.permissions(wid),
      ]);
      if (gen !== this.syncGen || wid !== this.state.workspaceId) return;
      let ws = this.state.ws ? { ...this.state.ws, workspace } : newWorkspaceState(workspace);
      ws = { ...ws, clients: { ...ws.clients, count: workspace.clients }, closing: undefined };
      // What this page missed may include the end of runs whose steps it
      // counted: the snapshot's totals stand alone.
      ws = mapLoaded(setSessions(ws, sessions), dropLiveUsage);
      // Pending permissions: what the server lists is pending; what this page
      // thought pending and the server no longer lists was answered meanwhile.
      const pending = new Set(permissions.map((p) => p.request_id));
      for (const sid of Object.keys(ws.sessions)) {
        ws = updateSession(ws, sid, (s) => {
          let changed = false;
          const perms = { ...s.permissions };
          for (const [rid, p] of Object.entries(perms)) {
            if (!p.result && !pending.has(rid)) {
              perms[rid] = { ...p, result: 'resolved' };
              changed = true;
            }
          }
          return changed ? { ...s, permissions: perms } : s;
        });
      }
      for (const p of permissions) {
        ws = updateSession(ws, p.session_id, (s) =>
          applySessionEvent(s, { type: 'permission.requested', data: p, seq: 0, time: '', workspace_id: wid } as Envelope),
        );
      }
      this.set({ ws, models: mergeModels(this.state.models, ...sessions.map((s) => s.model)) });
      const sid = this.state.sessionId;
      if (sid) {
        if (!ws.sessions[sid]) {
          this.route.set(`#/w/${wid}`);
          this.set({ sessionId: undefined });
        } else {
          // The snapshot must hold the open session's history too.
          await this.loadSession(sid, true);
        }
      }
    } catch (e) {
      if (gen !== this.syncGen) return;
      if (isUnauthorized(e)) return this.refused();
      if (e instanceof ApiError && e.status === 404) {
        this.toast('This workspace no longer exists.');
        this.route.set('#/');
        this.leaveWorkspace();
        return;
      }
      this.fail('Load workspace', e);
      // The stream's reconnect will call for another sync.
    } finally {
      if (gen === this.syncGen) {
        const buffered = this.buffer;
        this.buffer = [];
        if (this.state.ws) {
          let ws = this.state.ws;
          for (const ev of buffered) ws = applyEvent(ws, ev);
          this.set({ ws, syncing: false });
          for (const ev of buffered) this.afterEvent(ev);
        } else this.set({ syncing: false });
      }
    }
  }

  // ---- sessions ----

  selectSession(sid?: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    this.set({ sessionId: sid });
    this.route.set(sid ? `#/w/${wid}/s/${sid}` : `#/w/${wid}`);
    if (sid && this.state.ws?.sessions[sid] && !this.state.ws.sessions[sid].loaded && !this.state.syncing) void this.loadSession(sid);
  }

  /** loadSession fetches a session's history: messages first (shown at once), then the events that say who did what. */
  loadSession(sid: string, force = false): Promise<void> {
    const wid = this.state.workspaceId;
    if (!wid) return Promise.resolve();
    const key = `${wid}/${sid}`;
    const running = this.loading.get(key);
    if (running && !force) return running;
    const p = (async () => {
      try {
        const [messages, status, pending, checkpoints] = await Promise.all([
          this.api.messages(wid, sid),
          this.api.agentStatus(wid, sid).catch(() => undefined),
          this.api.pending(wid, sid).catch(() => undefined),
          this.api.checkpoints(wid, sid).catch(() => undefined),
        ]);
        if (wid !== this.state.workspaceId) return;
        this.setWs((ws) =>
          updateSession(ws, sid, (s) => {
            let next = mergeMessages(s, messages);
            if (checkpoints) next = { ...next, checkpoints };
            if (status) {
              if (status.active_run_id && next.runs[status.active_run_id]?.state !== 'done') {
                const id = status.active_run_id;
                next = { ...next, runs: { ...next.runs, [id]: { ...next.runs[id], order: next.runs[id]?.order ?? 0, id, state: 'running' } } };
              }
              status.queued.forEach((q, i) => {
                const r = next.runs[q.run_id];
                if (r?.state === 'done') return;
                next = {
                  ...next,
                  runs: { ...next.runs, [q.run_id]: { ...r, order: r?.order ?? i + 1, id: q.run_id, state: 'queued', prompt: q.prompt } },
                };
              });
            }
            for (const tc of pending?.tool_calls ?? []) {
              next = applySessionEvent(next, { type: 'tool.requested', data: tc, seq: 0, time: '', workspace_id: wid } as Envelope);
            }
            return next;
          }),
        );
        void this.loadHistory(wid, sid);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) {
          this.setWs((ws) => applyEvent(ws, { type: 'session.deleted', data: { session_id: sid } } as Envelope));
          if (this.state.sessionId === sid) this.selectSession(undefined);
          return;
        }
        this.fail('Load session', e);
      } finally {
        this.loading.delete(key);
      }
    })();
    this.loading.set(key, p);
    return p;
  }

  /** loadHistory folds the session's kept events in: who sent each prompt, who answered, tool statuses, notices. */
  private async loadHistory(wid: string, sid: string) {
    let after = 0;
    for (let page = 0; page < 1000; page++) {
      let events: Envelope[];
      try {
        events = await this.api.sessionEvents(wid, sid, after, 1000);
      } catch {
        return;
      }
      if (wid !== this.state.workspaceId) return;
      if (events.length === 0) return;
      this.setWs((ws) =>
        // Messages come from /messages, newer than any event of them.
        updateSession(ws, sid, (s) => applySessionEvents(s, events.filter((ev) => !ev.type.startsWith('message.')))),
      );
      after = events[events.length - 1].seq;
      if (events.length < 1000) return;
    }
  }

  async createSession(title?: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const s = await this.api.createSession(wid, { ...(title ? { title } : {}), client_id: this.state.clientId });
      this.setWs((ws) => {
        const cur = ws.sessions[s.id];
        return { ...ws, sessions: { ...ws.sessions, [s.id]: cur ? { ...cur, loaded: true } : newSessionState(s, true) } };
      });
      this.selectSession(s.id);
    } catch (e) {
      this.fail('New session', e);
    }
  }

  async renameSession(sid: string, title: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const s = await this.api.updateSession(wid, sid, { title });
      this.setWs((ws) => applyEvent(ws, { type: 'session.updated', data: s } as Envelope));
    } catch (e) {
      this.fail('Rename', e);
    }
  }

  /**
   * updateCompaction changes when the session compacts on its own (PATCH;
   * every client sees session.updated). It returns what the server said
   * when it refused, for the form to show, and null when it took it.
   */
  async updateCompaction(sid: string, compaction: { auto?: boolean; threshold?: number }): Promise<string | null> {
    const wid = this.state.workspaceId;
    if (!wid) return 'No workspace is open.';
    try {
      const s = await this.api.updateSession(wid, sid, { compaction });
      this.setWs((ws) => applyEvent(ws, { type: 'session.updated', data: s } as Envelope));
      return null;
    } catch (e) {
      if (isUnauthorized(e)) {
        this.refused();
        return 'The server refused this token.';
      }
      return e instanceof ApiError ? e.message : String(e);
    }
  }

  /**
   * updateSandbox changes what the session's commands may touch (PATCH).
   * A member may only narrow; the server's refusal of a widening is
   * returned as it said it, for the form to show; null when it took it.
   */
  async updateSandbox(sid: string, settings: Partial<SandboxSettings>): Promise<string | null> {
    const wid = this.state.workspaceId;
    if (!wid) return 'No workspace is open.';
    try {
      const s = await this.api.updateSession(wid, sid, settings);
      this.setWs((ws) => applyEvent(ws, { type: 'session.updated', data: s } as Envelope));
      return null;
    } catch (e) {
      if (isUnauthorized(e)) {
        this.refused();
        return 'The server refused this token.';
      }
      return e instanceof ApiError ? e.message : String(e);
    }
  }

  async deleteSession(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      await this.api.deleteSession(wid, sid);
      this.setWs((ws) => applyEvent(ws, { type: 'session.deleted', data: { session_id: sid } } as Envelope));
      if (this.state.sessionId === sid) this.selectSession(undefined);
    } catch (e) {
      this.fail('Delete session', e);
    }
  }

  async setModel(sid: string, model: string, effort?: string) {
    const wid = this.state.workspaceId;
    if (!wid || !model.trim()) return;
    try {
      const s = await this.api.setModel(wid, sid, model.trim(), effort);
      this.setWs((ws) => updateSession(ws, sid, (x) => ({ ...x, session: { ...x.session, model: s.model, reasoning_effort: s.reasoning_effort } })));
      const models = mergeModels(this.state.models, s.model);
      saveModels(models);
      this.set({ models });
    } catch (e) {
      this.fail('Switch model', e);
    }
  }

  // ---- runs ----

  async prompt(sid: string, text: string, attachments: Attachment[], delivery: 'queue' | 'steer' = 'queue'): Promise<boolean> {
    const wid = this.state.workspaceId;
    if (!wid) return false;
    try {
      const body = {
        session_id: sid,
        prompt: text,
        client_id: this.state.clientId,
        ...(attachments.length ? { attachments } : {}),
        ...(delivery === 'steer' ? { delivery } : {}),
      };
      const acc = await this.api.prompt(wid, body);
      if (acc.state !== 'steered') {
        this.setWs((ws) =>
          updateSession(ws, sid, (s) =>
            s.runs[acc.run_id]
              ? s
              : {
                  ...s,
                  runs: {
                    ...s.runs,
                    [acc.run_id]: { id: acc.run_id, state: acc.state === 'queued' ? 'queued' : 'running', order: Number.MAX_SAFE_INTEGER, clientId: this.state.clientId, prompt: text },
                  },
                },
          ),
        );
      }
      return true;
    } catch (e) {
      this.fail('Send', e);
      return false;
    }
  }

  async cancel(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      await this.api.cancel(wid, sid);
    } catch (e) {
      this.fail('Cancel', e);
    }
  }

  // ---- checkpoints, rewinds, forks, exports ----

  /** loadCheckpoints fetches the session's checkpoints, which say which prompts can be rewound. */
  async loadCheckpoints(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const checkpoints = await this.api.checkpoints(wid, sid);
      if (this.state.workspaceId === wid) this.setWs((ws) => updateSession(ws, sid, (s) => ({ ...s, checkpoints })));
    } catch {
      /* deleted meanwhile, or offline: the stream says so */
    }
  }

  /** reloadRewound replaces the session's messages after a rewind (anyone's): the rewound ones leave. */
  private async reloadRewound(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const [messages, checkpoints] = await Promise.all([this.api.messages(wid, sid), this.api.checkpoints(wid, sid)]);
      if (this.state.workspaceId === wid) this.setWs((ws) => updateSession(ws, sid, (s) => ({ ...s, messages, checkpoints, loaded: true })));
    } catch (e) {
      this.fail('Reload after rewind', e);
    }
  }

  checkpointDiff(sid: string, cid: string): Promise<CheckpointDiff> {
    return this.api.checkpointDiff(this.state.workspaceId!, sid, cid);
  }

  /**
   * rewind takes the session back to the checkpoint, files and history.
   * It answers null when done, else why not (a conflict names the files
   * someone else changed; force overwrites them).
   */
  async rewind(sid: string, cid: string, force = false): Promise<{ code: string; message: string } | null> {
    const wid = this.state.workspaceId;
    if (!wid) return { code: 'internal', message: 'no workspace' };
    try {
      await this.api.rewind(wid, sid, { checkpoint_id: cid, ...(force ? { force } : {}) });
      await this.reloadRewound(sid);
      return null;
    } catch (e) {
      if (isUnauthorized(e)) this.refused();
      return e instanceof ApiError ? { code: e.code, message: e.message } : { code: 'internal', message: String(e) };
    }
  }

  /** fork makes a new session from the history up to and including the message, and opens it. */
  async fork(sid: string, messageId?: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const s = await this.api.fork(wid, sid, messageId ? { through_message_id: messageId } : {});
      this.setWs((ws) => (ws.sessions[s.id] ? ws : { ...ws, sessions: { ...ws.sessions, [s.id]: newSessionState(s) } }));
      this.route.set(`#/w/${wid}/s/${s.id}`);
    } catch (e) {
      this.fail('Fork', e);
    }
  }

  /** exportSession downloads the session as a tandem.session.v1 document. */
  async exportSession(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      const doc = await this.api.exportSession(wid, sid);
      const url = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2)], { type: 'application/json' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `tandem-session-${sid}.json`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      this.fail('Export', e);
    }
  }

  /** importSession makes a new session of the workspace from an exported document, and opens it. */
  async importSession(text: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch {
      this.toast('That file is not a session document (not JSON).');
      return;
    }
    try {
      const s = await this.api.importSession(wid, doc);
      this.setWs((ws) => (ws.sessions[s.id] ? ws : { ...ws, sessions: { ...ws.sessions, [s.id]: newSessionState(s) } }));
      this.route.set(`#/w/${wid}/s/${s.id}`);
    } catch (e) {
      this.fail('Import', e);
    }
  }

  async compact(sid: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      await this.api.compact(wid, sid);
    } catch (e) {
      this.fail('Compact', e);
    }
  }

  async answerPermission(rid: string, decision: Decision, feedback?: string) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      await this.api.answerPermission(wid, rid, { client_id: this.state.clientId, decision, ...(feedback ? { feedback } : {}) });
    } catch (e) {
      if (e instanceof ApiError && e.code === 'already_resolved') {
        this.toast('Another client answered first.', 'info');
        return;
      }
      this.fail('Answer', e);
    }
  }

  async answerToolCall(rid: string, answer: { result?: string; error?: string }) {
    const wid = this.state.workspaceId;
    if (!wid) return;
    try {
      await this.api.answerToolCall(wid, rid, { client_id: this.state.clientId, ...answer });
    } catch (e) {
      if (e instanceof ApiError && e.code === 'already_resolved') {
        this.toast('Another client answered first.', 'info');
        return;
      }
      this.fail('Answer tool call', e);
    }
  }

  session(sid?: string): SessionState | undefined {
    return sid ? this.state.ws?.sessions[sid] : undefined;
  }

  /** close releases the stream (the workspace claim) when the page goes away. */
  close() {
    this.stream?.close();
    this.stream = null;
  }
}

function mapLoaded(ws: WorkspaceState, f: (s: SessionState) => SessionState): WorkspaceState {
  let out = ws;
  for (const sid of Object.keys(ws.sessions)) out = updateSession(out, sid, f);
  return out;
}

const MODELS_KEY = 'tandem.models';

function loadModels(): string[] {
  try {
    return JSON.parse(localStorage.getItem(MODELS_KEY) ?? '[]');
  } catch {
    return [];
  }
}

function saveModels(models: string[]) {
  try {
    localStorage.setItem(MODELS_KEY, JSON.stringify(models.slice(0, 20)));
  } catch {
    /* storage full or denied: the list is a convenience */
  }
}

export function mergeModels(have: string[], ...more: (string | undefined)[]): string[] {
  const out = [...have];
  for (const m of more) if (m && !out.includes(m)) out.push(m);
  return out;
}

export type { Session };
