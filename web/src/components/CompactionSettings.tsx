import { useState } from 'preact/hooks';
import type { Compaction } from '../lib/types';
import { useController } from './context';

/** percent writes a threshold (a fraction of the window) as the form shows it: 0.8 is "80", 0.333 is "33.3". */
export const percent = (t: number) => String(Math.round(t * 1000) / 10);

/**
 * parseThreshold reads the form's percentage as the fraction the server
 * takes: above 0 and at most 1 of the model's context window.
 */
export function parseThreshold(text: string): number | string {
  const s = text.trim().replace(/%$/, '').trim().replace(',', '.');
  const p = s === '' ? NaN : Number(s);
  if (!Number.isFinite(p) || p <= 0 || p > 100) return 'The threshold is a percentage of the context window: above 0 and at most 100.';
  return p / 100;
}

/**
 * CompactionSettings edits when the session compacts on its own. It shows
 * the session's settings as the server last reported them (another client's
 * change included) until the user edits a field; what the server refuses
 * is shown as it said it.
 */
export function CompactionSettings({ sid, compaction, onClose }: { sid: string; compaction: Compaction; onClose: () => void }) {
  const c = useController();
  // The user's edit, once there is one; until then the fields show the
  // server's settings, whoever changed them last.
  const [edit, setEdit] = useState<{ auto: boolean; threshold: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const auto = edit?.auto ?? compaction.auto;
  const threshold = edit?.threshold ?? percent(compaction.threshold);

  const submit = async (e: Event) => {
    e.preventDefault();
    const t = parseThreshold(threshold);
    if (typeof t === 'string') {
      setError(t);
      return;
    }
    setSaving(true);
    setError(null);
    const refused = await c.updateCompaction(sid, { auto, threshold: t });
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
      class="compaction-settings small"
      aria-label="Compaction settings"
      onSubmit={submit}
      onKeyDown={(e) => {
        if (e.key === 'Escape') {
          e.preventDefault(); // closes the form; not a cancel of the run
          onClose();
        }
      }}
    >
      <label>
        <input
          type="checkbox"
          autoFocus
          checked={auto}
          onChange={(e) => {
            const checked = (e.target as HTMLInputElement).checked;
            setEdit((prev) => ({ threshold: prev?.threshold ?? threshold, auto: checked }));
          }}
        />{' '}
        Compact automatically
      </label>
      <label>
        when a request would pass{' '}
        <input
          class="threshold"
          type="text"
          inputMode="decimal"
          aria-label="Threshold, percent of the context window"
          value={threshold}
          onInput={(e) => {
            const value = (e.target as HTMLInputElement).value;
            setEdit((prev) => ({ auto: prev?.auto ?? auto, threshold: value }));
            setError(null);
          }}
        />{' '}
        % of the context window
      </label>
      <span class="actions">
        <button type="submit" disabled={saving}>
          Save
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </span>
      {error && (
        <p class="error" role="alert" data-testid="compaction-error">
          {error}
        </p>
      )}
    </form>
  );
}
