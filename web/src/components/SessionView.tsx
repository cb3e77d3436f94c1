import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useVirtualizer } from '@tanstack/react-virtual';
import type { AppState } from '../lib/controller';
import { activeRun, isBusy, pendingPermissions, pendingSteers, queue, rows, toolResults, type SessionState } from '../lib/state';
import { useController } from './context';
import { MessageView, NoticeView } from './MessageView';
import { PermissionCard, ToolRequestCard } from './Cards';
import { Composer } from './Composer';
import { SessionHeader } from './SessionHeader';
import { Icon } from './Icon';

export function SessionView({ state, session: s }: { state: AppState; session: SessionState }) {
  const c = useController();
  const busy = isBusy(s);
  const waiting = pendingPermissions(s);
  const toolWaits = Object.values(s.toolRequests).filter((t) => !t.resolved);
  const queued = queue(s);
  const active = activeRun(s);
  const steers = pendingSteers(s);
  const compacting = !!s.compacting || !!active?.compaction;

  // Esc cancels the running answer, wherever the focus is, unless a field
  // that uses Esc itself (a rename, a dialog) took it first.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || e.defaultPrevented || !busy) return;
      e.preventDefault();
      void c.cancel(s.session.id);
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, [busy, c, s.session.id]);

  return (
    <section class="session" aria-label={s.session.title || 'Session'}>
      <SessionHeader state={state} session={s} />
      <Timeline state={state} session={s} />
      <div class="dock">
        {(waiting.length > 0 || toolWaits.length > 0) && (
          <div class="tray" aria-label="Waiting for an answer">
            {waiting.map((p) => (
              <PermissionCard key={p.req.request_id} info={p} session={s} />
            ))}
            {toolWaits.map((t) => (
              <ToolRequestCard key={t.req.request_id} info={t} />
            ))}
          </div>
        )}
        {(queued.length > 0 || busy) && (
          <div class="queue" data-testid="queue" aria-live="polite">
            {busy && (
              <span class="working">
                <span class="spinner" aria-hidden="true" /> {compacting ? 'Compacting…' : 'Working'}
                {active?.clientId && (
                  <span class="muted small">
                    {' '}
                    · {active.compaction ? 'asked by' : 'prompted by'} {who(state, active.clientId)}
                  </span>
                )}
              </span>
            )}
            {steers.length > 0 && (
              <ol class="steers" aria-label="Steered prompts" data-testid="pending-steers">
                {steers.map((st) => (
                  <li key={st.messageId}>
                    <span class="muted small">{who(state, st.clientId)} steered (joins at the next step):</span> {st.prompt}
                  </li>
                ))}
              </ol>
            )}
            {queued.length > 0 && (
              <details>
                <summary>{queued.length} queued</summary>
                <ol>
                  {queued.map((r) => (
                    <li key={r.id}>
                      <span class="muted small">{who(state, r.clientId)}:</span> {r.compaction ? 'compact the conversation' : r.prompt || '(prompt)'}
                    </li>
                  ))}
                </ol>
              </details>
            )}
          </div>
        )}
        <Composer state={state} session={s} busy={busy} />
      </div>
    </section>
  );
}

/**
 * personOf is the person behind another client, when it is someone else
 * than the one signed in here: another tab of the same person is told apart
 * by its client, not by a name that would say "you" twice.
 */
export const personOf = (state: AppState, clientId: string, name = state.ws?.names?.[clientId]) =>
  name && name !== state.me?.name ? name : undefined;

export const who = (state: AppState, clientId?: string) =>
  !clientId
    ? 'another client'
    : clientId === state.clientId
      ? 'you'
      : personOf(state, clientId) ?? `client ${clientId.slice(0, 4)}`;

/** Timeline shows the session's rows, rendering only those in view. */
function Timeline({ state, session: s }: { state: AppState; session: SessionState }) {
  const list = useMemo(() => rows(s.messages, s.notices), [s.messages, s.notices]);
  const results = useMemo(() => toolResults(s.messages), [s.messages]);
  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: list.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => 96,
    overscan: 6,
    getItemKey: (i) => list[i].key,
    anchorTo: 'end',
    followOnAppend: true,
    scrollEndThreshold: 48,
  });
  const [jumped, setJumped] = useState(false);
  // Open at the end, where the conversation is.
  useEffect(() => {
    if (!jumped && list.length > 0) {
      v.scrollToIndex(list.length - 1, { align: 'end' });
      setJumped(true);
    }
  }, [list.length, jumped, v]);
  const [atEnd, setAtEnd] = useState(true);
  const onScroll = () => setAtEnd(v.isAtEnd(48));

  const items = v.getVirtualItems();
  return (
    <div class="timeline" ref={scroller} onScroll={onScroll} tabIndex={0} aria-label="Conversation" data-testid="timeline">
      {!s.loaded && list.length === 0 && <p class="muted pad" aria-busy="true">Loading the history…</p>}
      {s.loaded && list.length === 0 && <p class="muted pad">No message yet. Say what the agent should do.</p>}
      <div class="timeline-inner" style={{ height: `${v.getTotalSize()}px` }}>
        <div class="timeline-window" style={{ transform: `translateY(${items[0]?.start ?? 0}px)` }}>
          {items.map((it) => {
            const row = list[it.index];
            return (
              <div key={row.key} data-index={it.index} ref={v.measureElement} class="trow">
                {row.kind === 'message' ? (
                  <MessageView state={state} session={s} message={row.message} results={results} gap={!!s.gaps[row.message.id]} />
                ) : (
                  <NoticeView notice={row.notice} />
                )}
              </div>
            );
          })}
        </div>
      </div>
      {!atEnd && list.length > 0 && (
        <button type="button" class="to-end" onClick={() => v.scrollToIndex(list.length - 1, { align: 'end' })}>
          <Icon name="down" /> Latest
        </button>
      )}
    </div>
  );
}
