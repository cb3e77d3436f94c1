import { useState } from 'preact/hooks';
import type { SessionState } from '../lib/state';
import type { CheckpointDiff, Message } from '../lib/types';
import { useController } from './context';

const changeText = { added: 'added since, will be removed', modified: 'changed since, will be put back', deleted: 'deleted since, will come back' };

/**
 * MessageActions are a prompt's actions: fork the session from it, and,
 * when its run changed files, rewind to before it. A rewind first shows
 * what it will undo (the checkpoint's diff) and asks to confirm; a
 * conflict (someone edited a file since) is shown and can be forced.
 */
export function MessageActions({ session: s, message: m }: { session: SessionState; message: Message }) {
  const c = useController();
  const ck = s.checkpoints?.find((x) => x.message_id === m.id);
  const [diff, setDiff] = useState<CheckpointDiff | null>(null);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<{ code: string; message: string } | null>(null);
  const sid = s.session.id;
  const open = async () => {
    setProblem(null);
    try {
      setDiff(await c.checkpointDiff(sid, ck!.id));
    } catch (e) {
      setProblem({ code: 'internal', message: (e as Error).message });
    }
  };
  const confirm = async (force: boolean) => {
    setBusy(true);
    const err = await c.rewind(sid, ck!.id, force);
    setBusy(false);
    if (err) setProblem(err);
    else setDiff(null);
  };
  return (
    <div class="msg-actions">
      <button type="button" class="link small" onClick={() => void c.fork(sid, m.id)} title="A new session with the history up to this message">
        Fork from here
      </button>
      {ck && !ck.missing && (
        <button type="button" class="link small" data-testid="rewind" onClick={() => void open()} title="Put the files and the history back as they were before this prompt">
          Rewind to here
        </button>
      )}
      {ck?.missing && (
        <span class="muted small" data-testid="checkpoint-missing" title="The server could not save this prompt's checkpoint (a full data disk, say)">
          no checkpoint saved: no rewind to here
        </span>
      )}
      {ck && (diff || problem) && (
        <div class="rewind-panel" role="dialog" aria-label="Rewind" data-testid="rewind-panel">
          {diff && (
            <>
              <p class="small">
                Rewinding takes this prompt and everything after it out of the conversation, and puts back the files it changed:
              </p>
              {diff.files.length === 0 ? (
                <p class="muted small">No file differs from the checkpoint.</p>
              ) : (
                <ul class="rewind-files small">
                  {diff.files.map((f) => (
                    <li key={f.path}>
                      <code>{f.path}</code> <span class="muted">{changeText[f.change]}</span>
                    </li>
                  ))}
                </ul>
              )}
              {diff.diff && <pre class="diff small" data-testid="rewind-diff">{diff.diff}</pre>}
            </>
          )}
          {problem && (
            <p class="error small" role="alert">
              {problem.message}
            </p>
          )}
          <div class="row">
            {problem?.code === 'rewind_conflict' ? (
              <button type="button" class="danger" disabled={busy} onClick={() => void confirm(true)}>
                Rewind anyway
              </button>
            ) : (
              diff && (
                <button type="button" class="danger" disabled={busy} onClick={() => void confirm(false)}>
                  Confirm rewind
                </button>
              )
            )}
            <button
              type="button"
              onClick={() => {
                setDiff(null);
                setProblem(null);
              }}
            >
              Cancel
            </button>
          </div>
        </div>
      )}
    </div>
  );
}
