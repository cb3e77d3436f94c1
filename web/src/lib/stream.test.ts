import { beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceStream, type ConnState } from './stream';
import { FakeEventSource, env } from './testing';
import { ApiError } from './api';

function setup(probe: () => Promise<unknown> = async () => ({})) {
  FakeEventSource.reset();
  const log: string[] = [];
  const seqs: number[] = [];
  const states: ConnState[] = [];
  const timers: (() => void)[] = [];
  const failures: unknown[] = [];
  const s = new WorkspaceStream({
    url: (last) => `/events?last_event_id=${last}`,
    probe,
    EventSourceImpl: FakeEventSource as unknown as typeof EventSource,
    backoff: () => 1,
    setTimer: (f) => timers.push(f),
    clearTimer: () => {},
    handlers: {
      opened: (d, resumed) => log.push(`opened ${d.head_seq} ${resumed}`),
      event: (ev) => seqs.push(ev.seq),
      resync: (r) => log.push('resync ' + r),
      state: (st) => states.push(st),
      failed: (e) => failures.push(e),
    },
  });
  s.start();
  return { s, log, seqs, states, timers, failures };
}

describe('WorkspaceStream', () => {
  beforeEach(() => FakeEventSource.reset());

  it('hands on each event once, in order, across a replay', () => {
    const { s, log, seqs } = setup();
    const es = FakeEventSource.last();
    expect(es.url).toBe('/events?last_event_id=0');
    es.emit('stream.opened', { head_seq: 10 });
    expect(log).toEqual(['opened 10 false']);
    expect(s.lastSeq).toBe(10);
    es.event(env(11, 'session.log', {}));
    es.event(env(12, 'session.log', {}));
    // The browser reconnects with Last-Event-ID: 12, and the server replays from there...
    es.fail(false);
    es.emit('stream.opened', { head_seq: 14 });
    // ...but a replay that overlaps is deduped.
    es.event(env(12, 'session.log', {}));
    es.event(env(13, 'session.log', {}));
    es.event(env(14, 'message.delta', {}));
    expect(seqs).toEqual([11, 12, 13, 14]);
    expect(log).toEqual(['opened 10 false', 'opened 14 true']);
  });

  it('reopens with last_event_id when the browser gives up', async () => {
    const { log, seqs, states, timers } = setup();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 3 });
    es.event(env(4, 'run.started', {}));
    es.fail(true); // e.g. 503 while the server stops
    expect(states.at(-1)).toBe('reconnecting');
    expect(FakeEventSource.all).toHaveLength(1);
    timers.shift()!();
    await Promise.resolve();
    await Promise.resolve();
    const es2 = FakeEventSource.last();
    expect(es2).not.toBe(es);
    expect(es2.url).toBe('/events?last_event_id=4');
    es2.emit('stream.opened', { head_seq: 6 });
    es2.event(env(5, 'run.completed', {}));
    // A late frame from the old EventSource is ignored.
    es.event(env(6, 'session.log', {}));
    expect(seqs).toEqual([4, 5]);
    expect(states.at(-1)).toBe('live');
    expect(log.at(-1)).toBe('opened 6 true');
  });

  it('asks for the gap when the browser reconnected without an id', () => {
    const { seqs } = setup();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 7 });
    // No event came, so the browser has no Last-Event-ID; events 8 and 9
    // happen while it is away and it reconnects live from 9.
    es.fail(false);
    es.emit('stream.opened', { head_seq: 9 });
    expect(es.closed).toBe(true);
    const es2 = FakeEventSource.last();
    expect(es2.url).toBe('/events?last_event_id=7');
    es2.emit('stream.opened', { head_seq: 9 });
    es2.event(env(8, 'session.log', {}));
    es2.event(env(9, 'session.log', {}));
    expect(seqs).toEqual([8, 9]);
  });

  it('refetches on stream.reset and stream.evicted', () => {
    const { s, log, seqs } = setup();
    const es = FakeEventSource.last();
    es.emit('stream.opened', { head_seq: 50 });
    es.emit('stream.reset', { head_seq: 3 }); // the server's log starts over
    expect(s.lastSeq).toBe(3);
    es.event(env(4, 'session.log', {}));
    es.emit('stream.evicted', { reason: 'slow' });
    expect(log).toEqual(['opened 50 false', 'resync reset', 'resync evicted']);
    expect(seqs).toEqual([4]);
  });

  it('stops and reports a refused token', async () => {
    const { failures, timers, states } = setup(async () => {
      throw new ApiError(401, 'unauthorized', 'no');
    });
    FakeEventSource.last().fail(true);
    timers.shift()!();
    await new Promise((r) => setTimeout(r, 0));
    expect(failures).toHaveLength(1);
    expect(states.at(-1)).toBe('offline');
    expect(timers).toHaveLength(0);
    expect(FakeEventSource.all).toHaveLength(1);
  });

  it('keeps trying while the server is unreachable', async () => {
    let up = false;
    const { timers, states } = setup(async () => {
      if (!up) throw new ApiError(0, 'network', 'down');
    });
    FakeEventSource.last().fail(true);
    for (let i = 0; i < 5; i++) {
      timers.shift()!();
      await new Promise((r) => setTimeout(r, 0));
    }
    expect(states).toContain('offline');
    expect(FakeEventSource.all).toHaveLength(1);
    up = true;
    timers.shift()!();
    await new Promise((r) => setTimeout(r, 0));
    expect(FakeEventSource.all).toHaveLength(2);
  });

  it('close stops everything', () => {
    const { s, seqs } = setup();
    const es = FakeEventSource.last();
    s.close();
    expect(es.closed).toBe(true);
    es.event(env(1, 'session.log', {}));
    expect(seqs).toEqual([]);
  });
});
