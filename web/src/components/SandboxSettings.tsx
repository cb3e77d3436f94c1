import { useState } from 'preact/hooks';
import type { Me, SandboxMode, SandboxSettings as Settings, Session } from '../lib/types';
import { useController } from './context';

export const MODES: SandboxMode[] = ['workspace', 'read-only', 'off'];

/** what a member sees on a choice that would widen the sandbox. */
export const OWNER_ONLY = 'Only an owner may widen the sandbox';

// How much each mode lets a command touch: off most, read-only least.
const BREADTH: Record<SandboxMode, number> = { 'read-only': 0, workspace: 1, off: 2 };

/** sandboxOf reads a session's settings, with the contract's defaults for a server that leaves them out. */
export function sandboxOf(s: Session): Settings {
  return {
    sandbox: s.sandbox ?? 'workspace',
    sandbox_network: s.sandbox_network ?? false,
    sandbox_read: s.sandbox_read ?? [],
    sandbox_write: s.sandbox_write ?? [],
  };
}

/** modeWidens says whether going from one mode to another lets commands touch more (an owner's change). */
export const modeWidens = (from: SandboxMode, to: SandboxMode) => BREADTH[to] > BREADTH[from];

/** cleanPath resolves . and .. and repeated slashes of an absolute path, as the server does before comparing. */
export function cleanPath(p: string): string {
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') out.pop();
    else out.push(seg);
  }
  return '/' + out.join('/');
}

/** covered says whether p is one of list's paths or inside one: adding it gives nothing new. */
export function covered(p: string, list: string[]): boolean {
  const c = cleanPath(p);
  return list.some((q) => {
    const d = cleanPath(q);
    return c === d || c.startsWith(d === '/' ? '/' : d + '/');
  });
}

/**
 * widenings lists what in next the server would refuse from a member, as
 * section 12 counts it: a wider mode, the network turned on, a path added
 * that the current lists do not already cover (a readable path may lie
 * under a writable one).
 */
export function widenings(cur: Settings, next: Settings): string[] {
  const out: string[] = [];
  if (modeWidens(cur.sandbox, next.sandbox)) out.push(`mode ${next.sandbox}`);
  if (next.sandbox_network && !cur.sandbox_network) out.push('network');
  for (const p of next.sandbox_read) if (!covered(p, cur.sandbox_read) && !covered(p, cur.sandbox_write)) out.push(`read ${p}`);
  for (const p of next.sandbox_write) if (!covered(p, cur.sandbox_write)) out.push(`write ${p}`);
  return out;
}

/** parsePaths reads a textarea of paths, one a line; a relative one is said, as the server wants absolute paths. */
export function parsePaths(text: string): string[] | string {
  const paths = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const bad = paths.find((p) => !p.startsWith('/'));
  if (bad !== undefined) return `Not an absolute path: ${bad}`;
  return [...new Set(paths)];
}

type Edit = { sandbox: SandboxMode; network: boolean; read: string; write: string };

/**
 * SandboxSettings edits what the session's commands may touch. Like the
 * compaction form it shows the server's values until the user edits; an
 * owner may change anything, a member only narrow (the wider choices are
 * disabled), a viewer nothing. What the server refuses is shown as it said it.
 */
export function SandboxSettings({ sid, session, me, onClose }: { sid: string; session: Session; me?: Me; onClose: () => void }) {
  const c = useController();
  const cur = sandboxOf(session);
  const [edit, setEdit] = useState<Edit | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const server: Edit = { sandbox: cur.sandbox, network: cur.sandbox_network, read: cur.sandbox_read.join('\n'), write: cur.sandbox_write.join('\n') };
  const v = edit ?? server;
  // Without GET /v1/me (an older server) the server alone judges.
  const role = me?.role ?? 'owner';
  const viewer = role === 'viewer';
  const member = role === 'member';
  const change = (p: Partial<Edit>) => {
    // Two changes before a render both count: each builds on the last.
    setEdit((prev) => ({ ...(prev ?? server), ...p }));
    setError(null);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const read = parsePaths(v.read);
    const write = parsePaths(v.write);
    if (typeof read === 'string' || typeof write === 'string') {
      setError(typeof read === 'string' ? read : (write as string));
      return;
    }
    const next: Settings = { sandbox: v.sandbox, sandbox_network: v.network, sandbox_read: read, sandbox_write: write };
    const wider = member ? widenings(cur, next) : [];
    if (wider.length) {
      setError(`${OWNER_ONLY}: ${wider.join(', ')}.`);
      return;
    }
    setSaving(true);
    setError(null);
    const refused = await c.updateSandbox(sid, next);
    setSaving(false);
    if (refused) {
      setError(refused);
      return;
    }
    setEdit(null);
    onClose();
  };

  return (
    <form
      class="sandbox-settings small"
      aria-label="Sandbox settings"
      onSubmit={submit}
      onKeyDown={(e) => {
        if (e.key === 'Escape') {
          e.preventDefault();
          onClose();
        }
      }}
    >
      <fieldset disabled={viewer} title={viewer ? 'A viewer cannot change the sandbox' : undefined}>
        <legend>Commands may touch</legend>
        {MODES.map((m) => {
          const wider = member && modeWidens(cur.sandbox, m);
          return (
            <label key={m} title={wider ? OWNER_ONLY : undefined}>
              <input type="radio" name="sandbox-mode" value={m} checked={v.sandbox === m} disabled={wider} onChange={() => change({ sandbox: m })} />{' '}
              {m === 'workspace' ? 'the workspace' : m === 'read-only' ? 'the workspace, read-only' : 'anything (off, unconfined)'}
            </label>
          );
        })}
        <label title={member && !cur.sandbox_network ? OWNER_ONLY : undefined}>
          <input
            type="checkbox"
            name="sandbox-network"
            checked={v.network}
            disabled={member && !cur.sandbox_network}
            onChange={(e) => change({ network: (e.target as HTMLInputElement).checked })}
          />{' '}
          Network (TCP, Unix sockets outside the workspace)
        </label>
        <label title={member ? `${OWNER_ONLY}: a member may only remove paths` : undefined}>
          Also readable (one absolute path a line)
          <textarea name="sandbox-read" rows={2} spellcheck={false} value={v.read} onInput={(e) => change({ read: (e.target as HTMLTextAreaElement).value })} />
        </label>
        <label title={member ? `${OWNER_ONLY}: a member may only remove paths` : undefined}>
          Also writable (one absolute path a line)
          <textarea name="sandbox-write" rows={2} spellcheck={false} value={v.write} onInput={(e) => change({ write: (e.target as HTMLTextAreaElement).value })} />
        </label>
      </fieldset>
      <span class="actions">
        {!viewer && (
          <button type="submit" disabled={saving}>
            Save
          </button>
        )}
        <button type="button" onClick={onClose}>
          {viewer ? 'Close' : 'Cancel'}
        </button>
      </span>
      {error && (
        <p class="error" role="alert" data-testid="sandbox-error">
          {error}
        </p>
      )}
    </form>
  );
}
