import type {
  AgentStatus,
  Attachment,
  Checkpoint,
  CheckpointDiff,
  Decision,
  Envelope,
  Health,
  Me,
  Message,
  PendingWork,
  PermissionRequest,
  PromptAccepted,
  RewindResult,
  SandboxSettings,
  Session,
  SessionExport,
  Workspace,
} from './types';

/** ApiError is a failed request: the contract's error body, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const isUnauthorized = (e: unknown) => e instanceof ApiError && e.status === 401;

/** Api calls the /v1 routes with the bearer token. */
export class Api {
  constructor(
    readonly token: string,
    readonly base = '',
    private readonly fetchImpl: typeof fetch = (...a) => fetch(...a),
  ) {}

  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    let resp: Response;
    try {
      resp = await this.fetchImpl(this.base + path, {
        method,
        headers: {
          Authorization: `Bearer ${this.token}`,
          ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal,
        cache: 'no-store',
      });
    } catch (e) {
      if ((e as Error)?.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', 'The server cannot be reached.');
    }
    if (resp.status === 204) return undefined as T;
    const text = await resp.text();
    let parsed: any = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: reported below */
    }
    if (!resp.ok) {
      const err = parsed?.error;
      throw new ApiError(
        resp.status,
        err?.code ?? 'http_' + resp.status,
        err?.message ?? `${method} ${path} answered ${resp.status}`,
      );
    }
    return parsed as T;
  }

  /** me says whose token this is; a server older than contract v1.2 answers 404. */
  me() {
    return this.request<Me>('GET', '/v1/me');
  }
  health() {
    return this.request<Health>('GET', '/v1/health');
  }
  workspaces() {
    return this.request<{ workspaces: Workspace[] }>('GET', '/v1/workspaces').then((r) => r.workspaces);
  }
  openWorkspace(path: string) {
    return this.request<Workspace>('POST', '/v1/workspaces', { path });
  }
  workspace(wid: string) {
    return this.request<Workspace>('GET', `/v1/workspaces/${wid}`);
  }
  closeWorkspace(wid: string) {
    return this.request<void>('DELETE', `/v1/workspaces/${wid}`);
  }
  /** Removes the workspace and all the server keeps of it (owner only). */
  forgetWorkspace(wid: string) {
    return this.request<void>('POST', `/v1/workspaces/${wid}/forget`);
  }
  sessions(wid: string) {
    return this.request<{ sessions: Session[] }>('GET', `/v1/workspaces/${wid}/sessions`).then((r) => r.sessions);
  }
  session(wid: string, sid: string) {
    return this.request<Session>('GET', `/v1/workspaces/${wid}/sessions/${sid}`);
  }
  createSession(wid: string, body: { title?: string; model?: string; client_id?: string }) {
    return this.request<Session>('POST', `/v1/workspaces/${wid}/sessions`, body);
  }
  updateSession(wid: string, sid: string, body: { title?: string; compaction?: { auto?: boolean; threshold?: number } } & Partial<SandboxSettings>) {
    return this.request<Session>('PATCH', `/v1/workspaces/${wid}/sessions/${sid}`, body);
  }
  deleteSession(wid: string, sid: string) {
    return this.request<void>('DELETE', `/v1/workspaces/${wid}/sessions/${sid}`);
  }
  messages(wid: string, sid: string, signal?: AbortSignal) {
    return this.request<{ messages: Message[] }>('GET', `/v1/workspaces/${wid}/sessions/${sid}/messages`, undefined, signal).then(
      (r) => r.messages,
    );
  }
  sessionEvents(wid: string, sid: string, after: number, limit = 1000, signal?: AbortSignal) {
    return this.request<{ events: Envelope[] }>(
      'GET',
      `/v1/workspaces/${wid}/sessions/${sid}/events?after=${after}&limit=${limit}`,
      undefined,
      signal,
    ).then((r) => r.events);
  }
  setModel(wid: string, sid: string, model: string, reasoning_effort?: string) {
    return this.request<Session>('PUT', `/v1/workspaces/${wid}/sessions/${sid}/model`, {
      model,
      ...(reasoning_effort ? { reasoning_effort } : {}),
    });
  }
  pending(wid: string, sid: string) {
    return this.request<PendingWork>('GET', `/v1/workspaces/${wid}/sessions/${sid}/pending`);
  }
  permissions(wid: string) {
    return this.request<{ permissions: PermissionRequest[] }>('GET', `/v1/workspaces/${wid}/permissions`).then(
      (r) => r.permissions,
    );
  }
  prompt(
    wid: string,
    body: { session_id: string; prompt: string; client_id: string; attachments?: Attachment[]; delivery?: 'queue' | 'steer' },
  ) {
    return this.request<PromptAccepted>('POST', `/v1/workspaces/${wid}/agent`, body);
  }
  cancel(wid: string, sid: string) {
    return this.request<{ canceled_runs: string[] }>('POST', `/v1/workspaces/${wid}/agent/sessions/${sid}/cancel`, {});
  }
  agentStatus(wid: string, sid: string) {
    return this.request<AgentStatus>('GET', `/v1/workspaces/${wid}/agent/sessions/${sid}`);
  }
  answerPermission(wid: string, rid: string, body: { client_id: string; decision: Decision; feedback?: string }) {
    return this.request<{ resolved: boolean; result: string }>('POST', `/v1/workspaces/${wid}/permissions/${rid}`, body);
  }
  answerToolCall(wid: string, rid: string, body: { client_id: string; result?: string; error?: string }) {
    return this.request<{ resolved: boolean }>('POST', `/v1/workspaces/${wid}/tool-calls/${rid}`, body);
  }
  compact(wid: string, sid: string) {
    return this.request<PromptAccepted>('POST', `/v1/workspaces/${wid}/sessions/${sid}/compact`, {});
  }
  checkpoints(wid: string, sid: string) {
    return this.request<{ checkpoints: Checkpoint[] }>('GET', `/v1/workspaces/${wid}/sessions/${sid}/checkpoints`).then((r) => r.checkpoints);
  }
  checkpointDiff(wid: string, sid: string, cid: string) {
    return this.request<CheckpointDiff>('GET', `/v1/workspaces/${wid}/sessions/${sid}/checkpoints/${cid}/diff`);
  }
  rewind(wid: string, sid: string, body: { checkpoint_id: string; force?: boolean }) {
    return this.request<RewindResult>('POST', `/v1/workspaces/${wid}/sessions/${sid}/rewind`, body);
  }
  fork(wid: string, sid: string, body: { through_message_id?: string; title?: string }) {
    return this.request<Session>('POST', `/v1/workspaces/${wid}/sessions/${sid}/fork`, body);
  }
  exportSession(wid: string, sid: string) {
    return this.request<SessionExport>('GET', `/v1/workspaces/${wid}/sessions/${sid}/export`);
  }
  importSession(wid: string, doc: unknown) {
    return this.request<Session>('POST', `/v1/workspaces/${wid}/sessions/import`, doc);
  }

  /** streamURL is the SSE address; EventSource cannot send headers, so the token goes in the query. */
  streamURL(wid: string, clientId: string, lastEventId?: number) {
    const q = new URLSearchParams({ client_id: clientId, access_token: this.token });
    if (lastEventId !== undefined && lastEventId > 0) q.set('last_event_id', String(lastEventId));
    return `${this.base}/v1/workspaces/${wid}/events?${q}`;
  }
}
