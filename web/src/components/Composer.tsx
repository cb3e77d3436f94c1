import { useRef, useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import type { SessionState } from '../lib/state';
import type { Attachment } from '../lib/types';
import { useController } from './context';
import { Icon } from './Icon';

const MAX_FILES = 20;
const MAX_BYTES = 20 << 20;

interface Pending {
  name: string;
  type: string;
  size: number;
  data: string; // base64
  preview?: string; // object URL of an image
}

function readBase64(f: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => {
      const s = String(r.result);
      resolve(s.slice(s.indexOf(',') + 1));
    };
    r.onerror = () => reject(r.error);
    r.readAsDataURL(f);
  });
}

export function Composer({ session: s, busy }: { state: AppState; session: SessionState; busy: boolean }) {
  const c = useController();
  const [text, setText] = useState('');
  const [files, setFiles] = useState<Pending[]>([]);
  const [steer, setSteer] = useState(false);
  const [drag, setDrag] = useState(false);
  const [sending, setSending] = useState(false);
  const picker = useRef<HTMLInputElement>(null);
  const area = useRef<HTMLTextAreaElement>(null);

  const add = async (list: FileList | File[]) => {
    const next = [...files];
    let total = next.reduce((n, f) => n + f.size, 0);
    for (const f of Array.from(list)) {
      if (next.length >= MAX_FILES) {
        c.toast(`At most ${MAX_FILES} attachments per prompt.`);
        break;
      }
      if (total + f.size > MAX_BYTES) {
        c.toast(`Attachments are limited to 20 MiB in all; ${f.name} does not fit.`);
        continue;
      }
      total += f.size;
      next.push({
        name: f.name,
        type: f.type || 'application/octet-stream',
        size: f.size,
        data: await readBase64(f),
        preview: f.type.startsWith('image/') ? URL.createObjectURL(f) : undefined,
      });
    }
    setFiles(next);
  };

  const remove = (i: number) => {
    const f = files[i];
    if (f.preview) URL.revokeObjectURL(f.preview);
    setFiles(files.filter((_, j) => j !== i));
  };

  const send = async () => {
    const prompt = text.trim();
    if (!prompt || sending) return;
    setSending(true);
    const attachments: Attachment[] = files.map((f) => ({ type: 'blob', data: f.data, mime_type: f.type, display_name: f.name }));
    const ok = await c.prompt(s.session.id, prompt, attachments, busy && steer ? 'steer' : 'queue');
    setSending(false);
    if (ok) {
      setText('');
      for (const f of files) if (f.preview) URL.revokeObjectURL(f.preview);
      setFiles([]);
      area.current?.focus();
    }
  };

  return (
    <form
      class={`composer ${drag ? 'dragging' : ''}`}
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
      onDragOver={(e) => {
        e.preventDefault();
        setDrag(true);
      }}
      onDragLeave={() => setDrag(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDrag(false);
        if (e.dataTransfer?.files.length) void add(e.dataTransfer.files);
      }}
    >
      {files.length > 0 && (
        <ul class="attachments" aria-label="Attachments">
          {files.map((f, i) => (
            <li key={i} class="chip">
              {f.preview && <img src={f.preview} alt="" class="thumb" />}
              <span>{f.name}</span>
              <button type="button" class="icon" aria-label={`Remove ${f.name}`} onClick={() => remove(i)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <label class="sr-only" for="prompt">
        Prompt
      </label>
      <textarea
        id="prompt"
        ref={area}
        rows={2}
        placeholder={busy ? 'The agent is working. Enter queues your prompt' + (steer ? ' (steers it)' : '') + '; Esc cancels.' : 'Ask the agent… (Enter sends, Shift+Enter for a new line)'}
        value={text}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault();
            void send();
          }
        }}
        onPaste={(e) => {
          const fs = e.clipboardData?.files;
          if (fs && fs.length) {
            e.preventDefault();
            void add(fs);
          }
        }}
      />
      <div class="composer-actions">
        <input
          ref={picker}
          type="file"
          multiple
          class="sr-only"
          tabIndex={-1}
          aria-hidden="true"
          onChange={(e) => {
            const t = e.target as HTMLInputElement;
            if (t.files) void add(t.files);
            t.value = '';
          }}
        />
        <button type="button" onClick={() => picker.current?.click()} title="Attach files or images (or drop them here)">
          <Icon name="clip" /> Attach
        </button>
        {busy && (
          <label class="steer" title="Steer: the prompt joins the running answer at its next step instead of waiting in the queue">
            <input type="checkbox" checked={steer} onChange={(e) => setSteer((e.target as HTMLInputElement).checked)} /> Steer
          </label>
        )}
        <span class="spacer" />
        {busy && (
          <button type="button" class="danger" onClick={() => void c.cancel(s.session.id)} title="Cancel (Esc)" data-testid="cancel">
            <Icon name="stop" /> Cancel
          </button>
        )}
        <button type="submit" class="primary" disabled={!text.trim() || sending} data-testid="send">
          {busy ? (steer ? 'Steer' : 'Queue') : 'Send'}
        </button>
      </div>
    </form>
  );
}
