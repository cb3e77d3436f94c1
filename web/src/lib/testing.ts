// Helpers for the unit tests: a scripted EventSource and envelopes.
import type { Envelope, Message, Session } from './types';

export class FakeEventSource {
  static all: FakeEventSource[] = [];
  readyState = 0;
  onerror: ((e: Event) => void) | null = null;
  closed = false;
  private listeners = new Map<string, ((e: MessageEvent) => void)[]>();
  constructor(readonly url: string) {
    FakeEventSource.all.push(this);
  }
  static last() {
    return FakeEventSource.all[FakeEventSource.all.length - 1];
  }
  static reset() {
    FakeEventSource.all = [];
  }
  addEventListener(type: string, f: (e: MessageEvent) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), f]);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  /** emit delivers a frame; id is what the browser records as its last event id. */
  emit(type: string, data: unknown, id = '') {
    this.readyState = 1;
    const e = new MessageEvent(type, { data: JSON.stringify(data), lastEventId: id });
    for (const f of this.listeners.get(type) ?? []) f(e);
  }
  event(ev: Envelope) {
    this.emit(ev.type, ev, String(ev.seq));
  }
  /** fail reports an error; closed says the browser gave up (an HTTP error) rather than retrying. */
  fail(closed: boolean) {
    this.readyState = closed ? 2 : 0;
    this.onerror?.(new Event('error'));
  }
}

let t = 0;
export const time = (n?: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, n ?? ++t)).toISOString().replace('Z', '000Z');

export function env(seq: number, type: string, data: unknown, extra: Partial<Envelope> = {}): Envelope {
  return { seq, type, workspace_id: 'w', time: time(seq), data, ...extra };
}

export function session(id: string, extra: Partial<Session> = {}): Session {
  return {
    id,
    workspace_id: 'w',
    title: 'S ' + id,
    model: 'echo',
    reasoning_effort: '',
    created_at: time(1),
    updated_at: time(1),
    message_count: 0,
    busy: false,
    queued: 0,
    attached_clients: 0,
    context: { cwd: '/p', tokens: 0 },
    usage: { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 0 },
    compaction: { auto: true, threshold: 0.8 },
    ...extra,
  };
}

export function message(id: string, role: Message['role'], parts: Message['parts'], updated: number, extra: Partial<Message> = {}): Message {
  return { id, session_id: 's', role, parts, created_at: time(updated), updated_at: time(updated), ...extra };
}
