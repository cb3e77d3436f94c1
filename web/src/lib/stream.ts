import type { Envelope, StreamOpened } from './types';
import { EVENT_TYPES } from './types';

export type ConnState = 'connecting' | 'live' | 'reconnecting' | 'offline';

export interface StreamHandlers {
  /** The stream is (re)opened; resumed says it asked to resume after lastSeq. */
  opened(data: StreamOpened, resumed: boolean): void;
  /** An event, once per seq, in seq order. */
  event(ev: Envelope): void;
  /** The server cannot replay what was missed (stream.reset) or dropped this client (stream.evicted): refetch. */
  resync(reason: 'reset' | 'evicted'): void;
  state(s: ConnState, detail?: string): void;
  /** The stream failed for good and a probe says why (401, 404...). */
  failed(err: unknown): void;
}

export interface StreamOptions {
  url: (lastSeq: number) => string;
  handlers: StreamHandlers;
  /** probe asks the server over REST whether reconnecting makes sense; it throws the API's error. */
  probe: () => Promise<unknown>;
  EventSourceImpl?: typeof EventSource;
  /** backoff is the wait before manual reconnect n (from 0). */
  backoff?: (n: number) => number;
  setTimer?: (f: () => void, ms: number) => unknown;
  clearTimer?: (t: unknown) => void;
}

const defaultBackoff = (n: number) => Math.min(500 * 2 ** n, 10_000) * (0.75 + Math.random() * 0.5);

/**
 * WorkspaceStream is the one EventSource of an open workspace. It relies on
 * the browser's own reconnect, which sends Last-Event-ID; when the browser
 * gives up (the server answered an error, for instance while it restarts), it
 * opens a new EventSource that asks for last_event_id itself. Either way
 * every event is handed on once, in seq order.
 */
export class WorkspaceStream {
  lastSeq = 0;
  private es: EventSource | null = null;
  private closed = false;
  private attempts = 0;
  private timer: unknown = null;
  private hadError = false;
  private readonly o: Required<StreamOptions>;

  constructor(opts: StreamOptions, lastSeq = 0) {
    this.o = {
      EventSourceImpl: globalThis.EventSource,
      backoff: defaultBackoff,
      setTimer: (f, ms) => setTimeout(f, ms),
      clearTimer: (t) => clearTimeout(t as number),
      ...opts,
    };
    this.lastSeq = lastSeq;
  }

  start() {
    this.connect();
  }

  close() {
    this.closed = true;
    if (this.timer !== null) this.o.clearTimer(this.timer);
    this.timer = null;
    this.es?.close();
    this.es = null;
  }

  private connect() {
    if (this.closed) return;
    this.o.handlers.state(this.hadError ? 'reconnecting' : 'connecting');
    // The URL asks to resume after what was seen; once this EventSource has
    // seen an id, the browser's Last-Event-ID header (which wins) takes over.
    const urlSeq = this.lastSeq;
    let sawId = false;
    const es = new this.o.EventSourceImpl(this.o.url(urlSeq));
    this.es = es;
    es.addEventListener('stream.opened', (e) => {
      if (es !== this.es) return;
      const data = JSON.parse((e as MessageEvent).data) as StreamOpened;
      const from = sawId ? this.lastSeq : urlSeq;
      if (from === 0 && this.lastSeq > 0 && data.head_seq > this.lastSeq) {
        // The browser reconnected without an id to resume from (none had
        // come yet on this EventSource): what happened meanwhile would be
        // lost. Open again, asking for it.
        es.close();
        this.connect();
        return;
      }
      this.attempts = 0;
      this.hadError = false;
      const resumed = this.lastSeq > 0;
      if (!resumed) this.lastSeq = data.head_seq;
      this.o.handlers.state('live');
      this.o.handlers.opened(data, resumed);
    });
    es.addEventListener('stream.reset', (e) => {
      if (es !== this.es) return;
      const { head_seq } = JSON.parse((e as MessageEvent).data) as { head_seq: number };
      // The stream goes on live from head_seq: what comes next is new.
      this.lastSeq = head_seq;
      this.o.handlers.resync('reset');
    });
    es.addEventListener('stream.evicted', () => {
      if (es !== this.es) return;
      this.o.handlers.resync('evicted');
    });
    const onEvent = (e: Event) => {
      if (es !== this.es) return;
      if ((e as MessageEvent).lastEventId) sawId = true;
      let ev: Envelope;
      try {
        ev = JSON.parse((e as MessageEvent).data);
      } catch {
        return;
      }
      if (typeof ev.seq !== 'number') return;
      if (ev.seq <= this.lastSeq) return; // already seen: a replay overlapping what we had
      this.lastSeq = ev.seq;
      this.o.handlers.event(ev);
    };
    for (const t of EVENT_TYPES) es.addEventListener(t, onEvent);
    es.onerror = () => {
      if (es !== this.es || this.closed) return;
      this.hadError = true;
      if (es.readyState === 2 /* CLOSED */) {
        // The browser gave up: an HTTP error (401, 404, 503 while the server stops).
        this.es = null;
        this.retry();
      } else {
        // The browser reconnects by itself, with Last-Event-ID.
        this.o.handlers.state('reconnecting');
      }
    };
  }

  private retry() {
    if (this.closed) return;
    const wait = this.o.backoff(this.attempts++);
    this.o.handlers.state(this.attempts > 3 ? 'offline' : 'reconnecting');
    this.timer = this.o.setTimer(async () => {
      this.timer = null;
      if (this.closed) return;
      try {
        await this.o.probe();
      } catch (err: any) {
        if (this.closed) return;
        // Unreachable or stopping: try again later. Anything else (a refused
        // token, a deleted workspace) will not mend by retrying.
        if (err?.status === 0 || err?.status >= 500) {
          this.retry();
          return;
        }
        this.o.handlers.state('offline', err?.message);
        this.o.handlers.failed(err);
        return;
      }
      this.connect();
    }, wait);
  }
}
