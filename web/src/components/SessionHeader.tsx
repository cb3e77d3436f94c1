import { useEffect, useRef, useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import { contextTokens, fmtTokens as fmt, formatUsage, sessionUsage, type SessionState } from '../lib/state';
import { CompactionSettings, percent } from './CompactionSettings';
import { useController } from './context';
import { SandboxSettings, sandboxOf } from './SandboxSettings';

const EFFORTS = ['', 'low', 'medium', 'high', 'xhigh'];

/** the server's default (contract section 4): no chip for it. */
const DEFAULT_THRESHOLD = 0.8;

export function SessionHeader({ state, session: s }: { state: AppState; session: SessionState }) {
  const c = useController();
  const sess = s.session;
  const [renaming, setRenaming] = useState(false);
  const [title, setTitle] = useState(sess.title);
  const [model, setModel] = useState(sess.model);
  const [effort, setEffort] = useState(sess.reasoning_effort ?? '');
  const [menu, setMenu] = useState(false);
  const [settings, setSettings] = useState(false);
  const [sandboxForm, setSandboxForm] = useState(false);
  const importFile = useRef<HTMLInputElement>(null);
  // Another client may rename the session or switch its model: the fields
  // follow, unless this page is editing the title.
  useEffect(() => {
    if (!renaming) setTitle(sess.title);
  }, [sess.title]);
  useEffect(() => {
    setModel(sess.model);
    setEffort(sess.reasoning_effort ?? '');
  }, [sess.model, sess.reasoning_effort]);
  const changed = model.trim() !== sess.model || effort !== (sess.reasoning_effort ?? '');
  // Both move with each model step, before the run ends and the server's totals catch up.
  const ctx = { ...sess.context, tokens: contextTokens(s) };
  const fill = typeof ctx.tokens === 'number' && ctx.window ? Math.min(1, ctx.tokens / ctx.window) : undefined;
  const usage = formatUsage(sessionUsage(s));
  const compaction = sess.compaction ?? { auto: true, threshold: DEFAULT_THRESHOLD };
  const autoCompact = compaction.auto;
  // The meter turns to "high" where the session compacts on its own.
  const threshold = compaction.threshold;
  const box = sandboxOf(sess);
  // A server that cannot confine refuses to run commands under workspace or read-only.
  const cannotConfine = state.health?.sandbox?.available === false && box.sandbox !== 'off';

  return (
    <header class="session-head">
      <div class="title-row">
        {renaming ? (
          <form
            class="rename"
            onSubmit={(e) => {
              e.preventDefault();
              setRenaming(false);
              if (title.trim() !== sess.title) void c.renameSession(sess.id, title.trim());
            }}
          >
            <label class="sr-only" for="rename">
              Session title
            </label>
            <input
              id="rename"
              value={title}
              autoFocus
              onInput={(e) => setTitle((e.target as HTMLInputElement).value)}
              onKeyDown={(e) => {
                if (e.key === 'Escape') {
                  e.preventDefault();
                  setRenaming(false);
                  setTitle(sess.title);
                }
              }}
            />
            <button type="submit">Save</button>
          </form>
        ) : (
          <h2
            class="session-title"
            title="Rename"
            onDblClick={() => {
              setTitle(sess.title);
              setRenaming(true);
            }}
          >
            {sess.title || 'Untitled session'}
          </h2>
        )}
        <span class="spacer" />
        <div
          class="menu"
          onKeyDown={(e) => {
            if (e.key === 'Escape' && menu) {
              e.preventDefault(); // closes the menu; not a cancel
              setMenu(false);
            }
          }}
        >
          <input
            ref={importFile}
            type="file"
            accept="application/json,.json"
            hidden
            data-testid="import-file"
            onChange={(e) => {
              const input = e.currentTarget;
              const f = input.files?.[0];
              input.value = '';
              if (f) void f.text().then((text) => c.importSession(text));
            }}
          />
          <button type="button" class="icon" aria-label="Session actions" aria-expanded={menu} onClick={() => setMenu(!menu)}>
            ⋯
          </button>
          {menu && (
            <div class="popover" role="menu" onClick={() => setMenu(false)}>
              <button
                type="button"
                role="menuitem"
                onClick={() => {
                  setTitle(sess.title);
                  setRenaming(true);
                }}
              >
                Rename
              </button>
              <button type="button" role="menuitem" onClick={() => void c.compact(sess.id)}>
                Compact now
              </button>
              <button type="button" role="menuitem" onClick={() => setSettings(true)}>
                Compaction settings…
              </button>
              <button type="button" role="menuitem" onClick={() => setSandboxForm(true)}>
                Sandbox settings…
              </button>
              <button type="button" role="menuitem" onClick={() => void c.fork(sess.id)}>
                Fork
              </button>
              <button type="button" role="menuitem" onClick={() => void c.exportSession(sess.id)}>
                Export
              </button>
              <button type="button" role="menuitem" onClick={() => importFile.current?.click()}>
                Import…
              </button>
              <button
                type="button"
                role="menuitem"
                class="danger"
                onClick={() => {
                  if (confirm(`Delete the session “${sess.title || 'Untitled session'}” and its history?`)) void c.deleteSession(sess.id);
                }}
              >
                Delete
              </button>
            </div>
          )}
        </div>
      </div>
      {settings && <CompactionSettings sid={sess.id} compaction={compaction} onClose={() => setSettings(false)} />}
      {sandboxForm && <SandboxSettings sid={sess.id} session={sess} me={state.me} onClose={() => setSandboxForm(false)} />}
      <div class="meta-row small">
        <form
          class="model"
          onSubmit={(e) => {
            e.preventDefault();
            if (changed) void c.setModel(sess.id, model, effort || undefined);
          }}
        >
          <label class="sr-only" for="model">
            Model
          </label>
          <input id="model" list="models" value={model} spellcheck={false} onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
          <datalist id="models">
            {state.models.map((m) => (
              <option key={m} value={m} />
            ))}
          </datalist>
          <label class="sr-only" for="effort">
            Reasoning effort
          </label>
          <select id="effort" value={effort} onChange={(e) => setEffort((e.target as HTMLSelectElement).value)}>
            {EFFORTS.map((x) => (
              <option key={x} value={x}>
                {x ? `effort: ${x}` : 'effort: default'}
              </option>
            ))}
          </select>
          {changed && <button type="submit">Switch</button>}
        </form>
        {fill !== undefined && (
          <span class="ctx" title={`Context: ${ctx.tokens} of ${ctx.window} tokens`} data-testid="context-fill">
            <meter min={0} max={1} low={threshold * 0.75} high={threshold} optimum={0.2} value={fill} />
            {fmt(ctx.tokens)}/{fmt(ctx.window)} ({Math.round(fill * 100)}%)
          </span>
        )}
        {fill === undefined && typeof ctx.tokens === 'number' && (
          <span class="ctx" title="Context: the size of the next model request (the model's window is not known)" data-testid="context-fill">
            context {fmt(ctx.tokens)} tokens
          </span>
        )}
        {usage && (
          <span class="usage" data-testid="usage" title="Tokens and cost of this session's runs">
            {usage}
          </span>
        )}
        <span
          class={box.sandbox === 'off' ? 'chip chip-error' : 'chip'}
          data-testid="sandbox-badge"
          title={
            box.sandbox === 'off'
              ? "This session's commands run unconfined"
              : `This session's commands reach ${box.sandbox === 'read-only' ? 'the workspace, read-only' : 'the workspace'}${box.sandbox_network ? ' and the network' : ''} (Sandbox settings…)`
          }
        >
          {box.sandbox === 'off' ? 'unconfined' : `sandbox: ${box.sandbox}${box.sandbox_network ? ' + network' : ''}`}
        </span>
        {cannotConfine && (
          <span
            class="chip chip-error"
            role="status"
            data-testid="sandbox-warning"
            title={`The server cannot confine commands${state.health?.sandbox?.reason ? ` (${state.health.sandbox.reason})` : ''}: it refuses to run them under ${box.sandbox}`}
          >
            ⚠ cannot confine: commands refused
          </span>
        )}
        {!autoCompact && (
          <span class="chip" data-testid="auto-compaction-off" title="This session compacts only when asked (Compact now)">
            auto-compaction off
          </span>
        )}
        {autoCompact && threshold !== DEFAULT_THRESHOLD && (
          <span class="chip" data-testid="compaction-threshold" title="This session compacts on its own when a request would pass this share of the context window">
            compacts at {percent(threshold)}%
          </span>
        )}
      </div>
    </header>
  );
}
