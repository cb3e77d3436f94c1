import type { Toast } from '../lib/controller';
import { useController } from './context';

export function Toasts({ toasts }: { toasts: Toast[] }) {
  const c = useController();
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.map((t) => (
        <div key={t.id} class={`toast toast-${t.level}`} role={t.level === 'error' ? 'alert' : undefined}>
          <span>{t.text}</span>
          <button type="button" class="icon" aria-label="Dismiss" onClick={() => c.dismiss(t.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
