import { memo } from 'preact/compat';
import { useMemo, useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import { renderMarkdown } from '../lib/markdown';
import { formatUsage, steerOf, type Notice, type SessionState } from '../lib/state';
import type { Message, Part, Usage } from '../lib/types';
import { personOf, useHighlightVersion, who } from './context';
import { ToolCard } from './Cards';
import { Icon } from './Icon';
import { MessageActions } from './Rewind';

/** Markdown renders untrusted markdown, sanitized. */
export const Markdown = memo(function Markdown({ text }: { text: string }) {
  const hl = useHighlightVersion();
  const html = useMemo(() => renderMarkdown(text), [text, hl]);
  return <div class="md" dangerouslySetInnerHTML={{ __html: html }} />;
});

function sizeOf(n: number) {
  return n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${Math.round(n / 1024)} KiB` : `${n} B`;
}

const finishText: Record<string, string> = {
  canceled: 'Canceled',
  error: 'Failed',
  interrupted: 'Interrupted',
  max_tokens: 'Stopped at the output limit',
};

export function MessageView(props: {
  state: AppState;
  session: SessionState;
  message: Message;
  results: Map<string, Extract<Part, { type: 'tool_result' }>>;
  gap: boolean;
}) {
  const { state, session: s, message: m } = props;
  if (m.role === 'user') {
    const run = m.run_id ? s.runs[m.run_id] : undefined;
    const steer = steerOf(s, m);
    // A steered prompt is its sender's, not the sender of the run it joined.
    const from = m.client_id || steer?.clientId || run?.clientId;
    return (
      <article class={`msg msg-user ${steer ? 'steered' : ''}`} data-testid="msg-user" data-run-id={m.run_id} data-steered={steer ? 'true' : undefined} aria-label="Prompt">
        <header class="msg-head muted small">
          <span class="who">{(from && from !== state.clientId && personOf(state, from, m.author?.name)) || who(state, from)}</span>
          {steer && (
            <>
              {' '}
              <span class="chip steered-tag" title="Steered: this prompt joined the running answer at its next step">
                steered
              </span>
            </>
          )}{' '}
          ·{' '}
          <time dateTime={m.created_at}>{new Date(m.created_at).toLocaleTimeString()}</time>
        </header>
        {m.parts.map((p, i) => {
          if (p.type === 'text') return <div key={i} class="user-text">{p.text}</div>;
          if (p.type === 'attachment')
            return (
              <div key={i} class="attachment chip">
                <Icon name="clip" /> {p.display_name || p.path} <span class="muted small">{p.mime_type} · {sizeOf(p.size)}</span>
              </div>
            );
          return null;
        })}
        <MessageActions session={s} message={m} />
      </article>
    );
  }
  return <AssistantMessage {...props} />;
}

function AssistantMessage({
  state,
  session: s,
  message: m,
  results,
  gap,
}: {
  state: AppState;
  session: SessionState;
  message: Message;
  results: Map<string, Extract<Part, { type: 'tool_result' }>>;
  gap: boolean;
}) {
  const finish = m.parts.find((p) => p.type === 'finish') as Extract<Part, { type: 'finish' }> | undefined;
  const streaming = !finish && !m.parts.some((p) => p.type === 'summary');
  const hasContent = m.parts.some((p) => p.type !== 'finish');
  const run = m.run_id ? s.runs[m.run_id] : undefined;
  // The run's total goes under its last message, when it says more than that message's own usage.
  const runUsage = run?.state === 'done' && run.messageId === m.id && run.usage && !sameUsage(run.usage, m.usage) ? formatUsage(run.usage) : null;
  const msgUsage = formatUsage(m.usage);
  return (
    <article
      class={`msg msg-assistant ${streaming ? 'streaming' : ''}`}
      data-testid="msg-assistant"
      data-message-id={m.id}
      data-run-id={m.run_id}
      aria-busy={streaming}
    >
      {m.parts.map((p, i) => {
        switch (p.type) {
          case 'text':
            return p.text ? <Markdown key={i} text={p.text} /> : null;
          case 'reasoning':
            return <Reasoning key={i} text={p.text} live={streaming && i === m.parts.length - 1} />;
          case 'tool_call':
            return <ToolCard key={p.id} state={state} session={s} call={p} result={results.get(p.id)} />;
          case 'summary':
            return (
              <details key={i} class="summary">
                <summary>Summary of the earlier conversation</summary>
                <Markdown text={p.text} />
              </details>
            );
          default:
            return null;
        }
      })}
      {streaming && !hasContent && <p class="muted typing" aria-label="Thinking">…</p>}
      {gap && streaming && (
        <p class="muted small gap-note">Reconnected: text sent while this page was away appears when this step ends.</p>
      )}
      {finish && finishText[finish.reason] && (
        <p class={`finish finish-${finish.reason}`} data-testid="finish">
          {finishText[finish.reason]}
          {finish.message ? `: ${finish.message}` : ''}
        </p>
      )}
      {(msgUsage || runUsage || m.model) && !streaming && (
        <footer class="msg-foot muted small">
          {m.model}
          {msgUsage && (
            <>
              {m.model && ' · '}
              <span data-testid="msg-usage" title="What this model request used">
                {msgUsage}
              </span>
            </>
          )}
          {runUsage && (
            <>
              {' · '}
              <span data-testid="run-usage" title="What the whole run used, every model request summed">
                run: {runUsage}
              </span>
            </>
          )}
        </footer>
      )}
    </article>
  );
}

function sameUsage(a: Usage, b?: Usage) {
  return !!b && a.input_tokens === b.input_tokens && a.output_tokens === b.output_tokens && a.cost_usd === b.cost_usd;
}

function Reasoning({ text, live }: { text: string; live: boolean }) {
  const [open, setOpen] = useState(false);
  return (
    <details class="reasoning" open={open} onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}>
      <summary>
        {live ? 'Thinking…' : 'Reasoning'} <span class="muted small">({text.length} chars)</span>
      </summary>
      {open && <div class="reasoning-text">{text}</div>}
    </details>
  );
}

export function NoticeView({ notice: n }: { notice: Notice }) {
  return (
    <div class={`notice notice-${n.level}`} role={n.level === 'error' ? 'alert' : undefined}>
      <span class="muted small">{new Date(n.time).toLocaleTimeString()}</span> {n.text}
    </div>
  );
}
