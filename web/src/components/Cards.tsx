import { useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import type { PermissionInfo, SessionState, ToolRequestInfo } from '../lib/state';
import type { Part } from '../lib/types';
import { useController, shortId, who } from './context';

const resultText: Record<string, string> = {
  approved: 'Approved once',
  approved_for_session: 'Approved for the session',
  denied_by_user: 'Rejected',
  denied_no_client: 'Denied: nobody was there to answer',
  denied_by_mode: 'Denied by the session’s permission mode',
  canceled: 'Canceled',
  resolved: 'Answered',
  approved_by_rule: 'Approved by a rule',
  denied_by_rule: 'Denied by a rule',
};

/** Diff shows a unified diff, line by line. */
export function Diff({ text }: { text: string }) {
  const lines = text.split('\n');
  return (
    <pre class="diff" aria-label="Diff">
      {lines.map((l, i) => {
        const cls =
          l.startsWith('+++') || l.startsWith('---')
            ? 'd-meta'
            : l.startsWith('@@')
              ? 'd-hunk'
              : l.startsWith('+')
                ? 'd-add'
                : l.startsWith('-')
                  ? 'd-del'
                  : '';
        return (
          <span key={i} class={cls}>
            {l}
            {'\n'}
          </span>
        );
      })}
    </pre>
  );
}

/** editDiff is a plain diff of an edit's arguments, for when the server gives none. */
function editDiff(args: Record<string, unknown>): string | null {
  if (typeof args.old_string === 'string' && typeof args.new_string === 'string') {
    const minus = args.old_string.split('\n').map((l) => '-' + l);
    const plus = args.new_string.split('\n').map((l) => '+' + l);
    return [`--- ${args.path ?? ''}`, `+++ ${args.path ?? ''}`, ...minus, ...plus].join('\n');
  }
  if (typeof args.content === 'string') {
    return [`+++ ${args.path ?? ''}`, ...args.content.split('\n').map((l) => '+' + l)].join('\n');
  }
  return null;
}

function argLine(name: string, args: Record<string, unknown>): string {
  const pick = (k: string) => (typeof args[k] === 'string' ? (args[k] as string) : '');
  switch (name) {
    case 'bash':
      return pick('command');
    case 'view':
    case 'edit':
    case 'write':
      return pick('path');
    case 'ls':
      return pick('path') || '.';
    case 'glob':
    case 'grep':
      return pick('pattern') + (pick('path') ? ` in ${pick('path')}` : '');
  }
  const s = JSON.stringify(args);
  return s.length > 100 ? s.slice(0, 100) + '…' : s;
}

const OUTPUT_PREVIEW = 4000;

function Output({ text, error }: { text: string; error?: boolean }) {
  const [all, setAll] = useState(false);
  const long = text.length > OUTPUT_PREVIEW;
  return (
    <div class={`output ${error ? 'output-error' : ''}`}>
      <pre>{all || !long ? text : text.slice(0, OUTPUT_PREVIEW)}</pre>
      {long && (
        <button type="button" class="link" onClick={() => setAll(!all)}>
          {all ? 'Show less' : `Show all (${text.length.toLocaleString()} characters)`}
        </button>
      )}
    </div>
  );
}

export function ToolCard({
  state,
  session: s,
  call,
  result,
}: {
  state: AppState;
  session: SessionState;
  call: Extract<Part, { type: 'tool_call' }>;
  result?: Extract<Part, { type: 'tool_result' }>;
}) {
  const live = s.tools[call.id];
  const perm = Object.values(s.permissions).find((p) => p.req.tool_call_id === call.id);
  const req = Object.values(s.toolRequests).find((t) => t.req.tool_call_id === call.id);
  const args = (call.arguments ?? {}) as Record<string, unknown>;
  const content = result?.content ?? (live && live.status !== 'running' ? live.content : undefined);
  const isError = result ? result.is_error : live?.isError;
  let status: string;
  if (content !== undefined) status = isError ? 'error' : 'done';
  else if (perm && !perm.result) status = 'approval';
  else if (req && !req.resolved) status = 'client';
  else if (live?.status === 'running') status = 'running';
  else status = 'pending';
  const statusLabel: Record<string, string> = {
    done: 'done',
    error: 'error',
    approval: 'waiting for approval',
    client: 'waiting for a client',
    running: 'running',
    pending: 'not run',
  };
  const diff = (perm?.req.details?.diff as string | undefined) ?? (call.name === 'edit' || call.name === 'write' ? editDiff(args) : null);
  const [open, setOpen] = useState(false);
  return (
    <div class={`tool tool-${status}`} data-testid="tool-card" data-tool={call.name} data-status={status}>
      <button type="button" class="tool-head" aria-expanded={open} onClick={() => setOpen(!open)}>
        <span class="tool-name">{call.name}</span>
        <code class="tool-arg">{argLine(call.name, args)}</code>
        <span class={`status status-${status}`}>{statusLabel[status]}</span>
      </button>
      {perm?.result && (
        <div class="tool-line small" data-testid="permission-result">
          {resultText[perm.result] ?? perm.result}
          {perm.resolvedBy && <> by {who(state, perm.resolvedBy)}</>}
          {perm.feedback && <>: “{perm.feedback}”</>}
        </div>
      )}
      {req && (
        <div class="tool-line small">
          Client tool of {req.req.owner_client_ids.map((id) => who(state, id)).join(', ') || 'a client'}
          {req.resolved && (
            <>
              {' '}
              · {req.isError ? 'answered with an error' : 'answered'}
              {req.resolvedBy && <> by {who(state, req.resolvedBy)}</>}
            </>
          )}
        </div>
      )}
      {open && (
        <div class="tool-body">
          {diff ? <Diff text={diff} /> : <pre class="args">{JSON.stringify(args, null, 2)}</pre>}
        </div>
      )}
      {content !== undefined && (open || isError) && <Output text={content} error={isError} />}
      {content !== undefined && !open && !isError && content.length > 0 && (
        <div class="tool-peek muted small">{content.split('\n', 1)[0].slice(0, 160)}</div>
      )}
    </div>
  );
}

export function PermissionCard({ info, session: s }: { info: PermissionInfo; session: SessionState }) {
  const c = useController();
  const [feedback, setFeedback] = useState('');
  const [rejecting, setRejecting] = useState(false);
  const [sent, setSent] = useState(false);
  const r = info.req;
  const d = r.details ?? {};
  const answer = async (decision: 'approve_once' | 'approve_session' | 'reject') => {
    setSent(true);
    await c.answerPermission(r.request_id, decision, decision === 'reject' ? feedback.trim() : undefined);
    setSent(false);
  };
  return (
    <div class="perm" role="group" aria-label={`Permission: ${r.summary}`} data-testid="permission" data-request-id={r.request_id}>
      <div class="perm-head">
        <span class="chip">{r.kind}</span> <strong>{r.summary || r.tool_name}</strong>
        {s.session.title && <span class="muted small"> · {s.session.title}</span>}
      </div>
      {typeof d.diff === 'string' ? (
        <Diff text={d.diff} />
      ) : typeof d.command === 'string' ? (
        <pre class="args">{d.command}</pre>
      ) : Object.keys(d).length > 0 ? (
        <pre class="args">{JSON.stringify(d, null, 2)}</pre>
      ) : null}
      {rejecting && (
        <>
          <label class="sr-only" for={`fb-${r.request_id}`}>
            Feedback for the agent
          </label>
          <textarea
            id={`fb-${r.request_id}`}
            rows={2}
            placeholder="Why not? What should the agent do instead? (optional)"
            value={feedback}
            onInput={(e) => setFeedback((e.target as HTMLTextAreaElement).value)}
            onKeyDown={(e) => {
              if (e.key === 'Escape') {
                e.preventDefault();
                setRejecting(false);
              }
            }}
            autoFocus
          />
        </>
      )}
      <div class="perm-actions">
        {!rejecting ? (
          <>
            <button type="button" class="primary" disabled={sent} onClick={() => void answer('approve_once')}>
              Approve once
            </button>
            <button type="button" disabled={sent} onClick={() => void answer('approve_session')}>
              Approve for session
            </button>
            <button type="button" class="danger" disabled={sent} onClick={() => setRejecting(true)}>
              Reject…
            </button>
          </>
        ) : (
          <>
            <button type="button" class="danger" disabled={sent} onClick={() => void answer('reject')}>
              Reject
            </button>
            <button type="button" onClick={() => setRejecting(false)}>
              Back
            </button>
          </>
        )}
      </div>
    </div>
  );
}

export function ToolRequestCard({ info }: { info: ToolRequestInfo }) {
  const c = useController();
  const [text, setText] = useState('');
  const [open, setOpen] = useState(false);
  const r = info.req;
  return (
    <div class="perm toolreq" data-testid="tool-request">
      <div class="perm-head">
        <span class="chip">client tool</span> <strong>{r.tool_name}</strong>
        <span class="muted small"> · waiting for {r.owner_client_ids.map(shortId).join(', ') || 'its client'}</span>
      </div>
      <pre class="args">{JSON.stringify(r.arguments, null, 2)}</pre>
      {open ? (
        <>
          <textarea rows={2} placeholder="Result to give the agent" value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} />
          <div class="perm-actions">
            <button type="button" class="primary" onClick={() => void c.answerToolCall(r.request_id, { result: text })}>
              Send result
            </button>
            <button type="button" class="danger" onClick={() => void c.answerToolCall(r.request_id, { error: text || 'refused' })}>
              Send error
            </button>
          </div>
        </>
      ) : (
        <button type="button" class="link" onClick={() => setOpen(true)}>
          Answer it by hand…
        </button>
      )}
    </div>
  );
}
