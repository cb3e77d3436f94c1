// Wire types of the Tandem HTTP API (contract v1.1), as the server's proto
// package encodes them. The app is served by the binary it talks to, so the
// v1.1 fields (usage, compaction, context fill, steering) are always there;
// a field is optional here only when the server leaves it out.

export interface ErrorBody {
  error: { code: string; message: string };
}

export interface Health {
  status: string;
  version: string;
  default_model: string;
  node_id?: string;
  /** whether the server can confine the agent's commands (servers of contract v1.3). */
  sandbox?: SandboxStatus;
}

/** GET /v1/health's sandbox: whether and how the agent's commands are confined (contract section 12). */
export interface SandboxStatus {
  available: boolean;
  /** e.g. landlock-abi7+seccomp+namespaces; none when nothing can. */
  mechanism: string;
  /** what is missing, when not available. */
  reason?: string;
}

/** What a session's bash commands may touch (contract section 12). */
export type SandboxMode = 'workspace' | 'read-only' | 'off';

/** A session's sandbox settings as the server reports them. */
export interface SandboxSettings {
  sandbox: SandboxMode;
  sandbox_network: boolean;
  /** absolute paths the commands may also read. */
  sandbox_read: string[];
  /** absolute paths the commands may also write. */
  sandbox_write: string[];
}

export interface Workspace {
  id: string;
  path: string;
  open: boolean;
  clients: number;
  created_at: string;
  /** the clients attached, with the person each belongs to (servers of contract v1.2). */
  attached?: { client_id: string; name: string; since: string }[];
  /** its directory is gone (deleted behind the server's back): it can only be forgotten. */
  missing?: boolean;
}

/** Who a token belongs to: GET /v1/me. */
export interface Me {
  token_id: string;
  name: string;
  role: 'viewer' | 'member' | 'owner';
  /** where members may open workspaces (servers of contract v1.3); owners open anywhere but the data dir. */
  workspace_roots?: string[];
}

/** The person whose request caused an event. */
export interface Actor {
  token_id: string;
  name: string;
  client_id?: string;
}

/** Usage: input counts every token read (cached ones too), output every token written (reasoning too). */
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  /** USD, when the model's prices are known. */
  cost_usd?: number;
}

export interface Compaction {
  auto: boolean;
  threshold: number;
}

export interface SessionContext {
  cwd: string;
  /** the size of the next model request: reported by the model, or estimated until it has. */
  tokens: number;
  /** the model's context window, when known. */
  window?: number;
}

export interface Session {
  id: string;
  workspace_id: string;
  title: string;
  model: string;
  reasoning_effort: string;
  created_at: string;
  updated_at: string;
  message_count: number;
  busy: boolean;
  queued: number;
  attached_clients: number;
  context: SessionContext;
  /** the session's runs' usage, summed. */
  usage: Usage;
  compaction: Compaction;
  /** the sandbox its commands run under (servers of contract v1.3). */
  sandbox?: SandboxMode;
  sandbox_network?: boolean;
  sandbox_read?: string[] | null;
  sandbox_write?: string[] | null;
}

export type Part =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; id: string; name: string; arguments: Record<string, unknown> }
  | { type: 'tool_result'; tool_call_id: string; name: string; content: string; is_error: boolean }
  | {
      type: 'attachment';
      kind: 'file' | 'blob';
      path?: string;
      mime_type: string;
      display_name: string;
      size: number;
    }
  | { type: 'finish'; reason: string; message?: string }
  | { type: 'summary'; text: string; through_message_id: string };

export interface Message {
  id: string;
  session_id: string;
  run_id?: string;
  role: 'user' | 'assistant' | 'tool';
  parts: Part[];
  model?: string;
  /** on a user message: the client that sent the prompt (a steered prompt's, not its run's). */
  client_id?: string;
  /** on a user message: the person who sent the prompt. */
  author?: { name: string; client_id?: string };
  created_at: string;
  updated_at: string;
  /** on an assistant message, once its model request is done. */
  usage?: Usage;
}

export interface Envelope<D = any> {
  seq: number;
  type: string;
  workspace_id: string;
  session_id?: string;
  run_id?: string;
  time: string;
  ephemeral?: boolean;
  actor?: Actor;
  data: D;
}

export interface StreamOpened {
  client_id: string;
  workspace_id: string;
  head_seq: number;
}

export interface PermissionRequest {
  request_id: string;
  session_id: string;
  run_id: string;
  tool_call_id: string;
  tool_name: string;
  kind: string;
  summary: string;
  details: Record<string, unknown> | null;
}

export interface ToolCallRequest {
  request_id: string;
  session_id: string;
  run_id: string;
  tool_call_id: string;
  tool_name: string;
  arguments: unknown;
  owner_client_ids: string[];
}

export interface PendingWork {
  permissions: PermissionRequest[];
  tool_calls: ToolCallRequest[];
}

export interface AgentStatus {
  busy: boolean;
  active_run_id: string | null;
  queued: { run_id: string; prompt: string }[];
}

export interface PromptAccepted {
  run_id: string;
  session_id: string;
  state: 'running' | 'queued' | 'steered';
  position: number;
}

/** RunAccepted is the data of run.accepted. */
export interface RunAccepted {
  run_id: string;
  state: 'running' | 'queued' | 'steered';
  position: number;
  client_id: string;
  prompt?: string;
  /** for a steered prompt: the id its user message gets in the run it joined. */
  message_id?: string;
  /** a compaction run (POST .../compact): no prompt, no user message. */
  compaction?: boolean;
}

/** RunCompleted is the data of run.completed. */
export interface RunCompleted {
  run_id: string;
  outcome: 'end_turn' | 'canceled' | 'error' | 'interrupted';
  error?: { code: string; message: string };
  message_id: string;
  usage?: Usage;
}

export interface CompactionStarted {
  tokens_before: number;
}

export interface CompactionCompleted {
  tokens_before: number;
  tokens_after: number;
  summary_message_id: string;
}

export interface Attachment {
  type: 'file' | 'blob';
  path?: string;
  display_name?: string;
  data?: string;
  mime_type?: string;
}

export interface McpStatus {
  name: string;
  session_id?: string;
  status: 'starting' | 'connected' | 'failed' | 'stopped';
  tools: string[];
  error?: string;
}

export type Decision = 'approve_once' | 'approve_session' | 'reject' | 'user_not_available';

// Every event type of the contract: EventSource delivers named events only to
// listeners of that name.
export const EVENT_TYPES = [
  'session.created',
  'session.updated',
  'session.deleted',
  'session.started',
  'session.resumed',
  'session.model_changed',
  'session.log',
  'session.idle',
  'session.rewound',
  'session.compaction_started',
  'session.compaction_completed',
  'run.accepted',
  'run.started',
  'run.completed',
  'message.created',
  'message.updated',
  'message.delta',
  'tool.started',
  'tool.finished',
  'permission.requested',
  'permission.resolved',
  'tool.requested',
  'tool.resolved',
  'client.attached',
  'client.detached',
  'workspace.closing',
  'mcp.server_status',
] as const;

/** Checkpoint is a record of the workspace's files before a run changed them (section 11). */
export interface Checkpoint {
  id: string;
  run_id: string;
  message_id: string;
  created_at: string;
  /** the server could not save it (a full data disk): there is no way back to it. */
  missing?: boolean;
}

export interface FileChange {
  path: string;
  change: 'added' | 'modified' | 'deleted';
}

export interface CheckpointDiff {
  files: FileChange[];
  diff: string;
}

export interface RewindResult {
  files: FileChange[];
  removed_messages: number;
}

/** SessionExport is a tandem.session.v1 document; the app passes it through as it is. */
export type SessionExport = { format: string } & Record<string, unknown>;
