// The shared event feed: one connection for all subscribers, replay point on reconnect, backoff, no duplicates.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { GroveEvent } from '@grove/contracts';
import { RETRY_MS, createEventFeed, type EventSourceLike } from './events.ts';

class FakeSource implements EventSourceLike {
  readyState = 0;
  closed = false;
  private listeners = new Map<string, Array<(ev: MessageEvent<unknown>) => void>>();
  constructor(readonly url: string) {}
  addEventListener(type: string, listener: (ev: MessageEvent<unknown>) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  emit(type: string, data?: unknown) {
    if (type === 'open') this.readyState = 1;
    for (const l of this.listeners.get(type) ?? []) l({ data } as MessageEvent<unknown>);
  }
  event(id: number, slug = 'demo~a', type = 'workspace.reserved') {
    this.emit('grove', JSON.stringify({ id, slug, type, data: {}, at: '2026-01-01T00:00:00Z' } satisfies GroveEvent));
  }
}

describe('createEventFeed', () => {
  let sources: FakeSource[];
  const open = (url: string) => {
    const s = new FakeSource(url);
    sources.push(s);
    return s;
  };
  beforeEach(() => {
    sources = [];
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());

  it('shares one connection and delivers each event once, in order', () => {
    const feed = createEventFeed(open);
    const a: number[] = [];
    const b: number[] = [];
    feed.subscribe({ onEvent: (e) => a.push(e.id) });
    feed.subscribe({ onEvent: (e) => b.push(e.id) });
    expect(sources).toHaveLength(1);
    expect(sources[0]?.url).toBe('/api/events/stream');
    sources[0]?.event(1);
    sources[0]?.event(2);
    sources[0]?.event(2);
    sources[0]?.emit('grove', 'not json');
    sources[0]?.emit('grove', JSON.stringify({ id: 'x' }));
    expect(a).toEqual([1, 2]);
    expect(b).toEqual([1, 2]);
    expect(feed.lastId()).toBe(2);
  });

  it('reconnects with backoff from the last id, tells subscribers it reopened, and skips the replayed overlap', () => {
    const feed = createEventFeed(open);
    const got: number[] = [];
    let opens = 0;
    feed.subscribe({ onEvent: (e) => got.push(e.id), onOpen: () => opens++ });
    sources[0]?.emit('open');
    sources[0]?.event(7);
    sources[0]?.emit('error');
    expect(sources[0]?.closed).toBe(true);
    vi.advanceTimersByTime(RETRY_MS[0] - 1);
    expect(sources).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(sources[1]?.url).toBe('/api/events/stream?after=7');
    // Still down: the next wait is longer (never a fast loop).
    sources[1]?.emit('error');
    vi.advanceTimersByTime(RETRY_MS[1] - 1);
    expect(sources).toHaveLength(2);
    vi.advanceTimersByTime(1);
    sources[2]?.emit('open');
    sources[2]?.event(7);
    sources[2]?.event(8);
    expect(got).toEqual([7, 8]);
    expect(opens).toBe(2);
  });

  it('closes a little after the last subscriber leaves, and reopens for the next', () => {
    const feed = createEventFeed(open);
    const off = feed.subscribe({});
    off();
    const again = feed.subscribe({});
    vi.advanceTimersByTime(10_000);
    expect(sources).toHaveLength(1);
    expect(sources[0]?.closed).toBe(false);
    again();
    vi.advanceTimersByTime(10_000);
    expect(sources[0]?.closed).toBe(true);
    feed.subscribe({});
    expect(sources).toHaveLength(2);
  });
});
