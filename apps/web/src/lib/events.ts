// One live feed of Grove's lifecycle events per page: a shared EventSource on /api/events/stream that
// every card, tab and dialog subscribes to, instead of each polling the API.
import { endpointPath, endpoints, eventSchema, type GroveEvent } from '@grove/contracts';

export interface EventSubscriber {
  onEvent?: (e: GroveEvent) => void;
  /**
   * The feed (re)connected. Events missed while it was down are replayed from the last id seen, but a
   * subscriber that derives state from the API (the list) should read it again anyway.
   */
  onOpen?: () => void;
}

/** The smallest part of EventSource this module uses, so tests can hand in a fake. */
export interface EventSourceLike {
  readonly readyState: number;
  addEventListener(type: string, listener: (ev: MessageEvent<unknown>) => void): void;
  close(): void;
}
export type EventSourceFactory = (url: string) => EventSourceLike;

/** Waits before reconnecting after the feed dropped: one quick retry (a server restart), then slower. */
export const RETRY_MS = [1_000, 5_000, 10_000, 30_000] as const;
/** The feed stays open this long after the last subscriber left, so moving between pages does not churn it. */
const LINGER_MS = 2_000;
const CLOSED = 2;

export interface EventFeed {
  subscribe(s: EventSubscriber): () => void;
  /** The highest event id delivered so far (null before the first). */
  lastId(): number | null;
}

export function createEventFeed(open: EventSourceFactory, base = endpointPath(endpoints.eventsStream)): EventFeed {
  const subscribers = new Set<EventSubscriber>();
  let source: EventSourceLike | null = null;
  let lastId: number | null = null;
  let failures = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;
  let linger: ReturnType<typeof setTimeout> | undefined;

  const connect = () => {
    retry = undefined;
    // Reconnecting by hand loses the browser's own Last-Event-ID, so the replay point goes in the query.
    const es = open(lastId === null ? base : `${base}?after=${lastId}`);
    source = es;
    es.addEventListener('open', () => {
      if (source !== es) return;
      failures = 0;
      for (const s of [...subscribers]) s.onOpen?.();
    });
    es.addEventListener('grove', (m) => {
      if (source !== es || typeof m.data !== 'string') return;
      let raw: unknown;
      try {
        raw = JSON.parse(m.data);
      } catch {
        return;
      }
      const parsed = eventSchema.safeParse(raw);
      if (!parsed.success) return;
      const e = parsed.data;
      // A replay after a reconnect overlaps what was already delivered.
      if (lastId !== null && e.id <= lastId) return;
      lastId = e.id;
      for (const s of [...subscribers]) s.onEvent?.(e);
    });
    es.addEventListener('error', () => {
      if (source !== es) return;
      // The browser would retry every few seconds forever (and never after a 401); back off instead.
      es.close();
      source = null;
      const delay = RETRY_MS[Math.min(failures, RETRY_MS.length - 1)];
      failures += 1;
      if (subscribers.size > 0) retry = setTimeout(connect, delay);
    });
  };

  const stop = () => {
    linger = undefined;
    clearTimeout(retry);
    retry = undefined;
    if (source && source.readyState !== CLOSED) source.close();
    source = null;
  };

  return {
    subscribe(s) {
      subscribers.add(s);
      clearTimeout(linger);
      linger = undefined;
      if (!source && retry === undefined) connect();
      return () => {
        subscribers.delete(s);
        if (subscribers.size === 0 && linger === undefined) linger = setTimeout(stop, LINGER_MS);
      };
    },
    lastId: () => lastId,
  };
}

let shared: EventFeed | null = null;

/** The page's one feed (same origin, so the sign-in cookie rides along). */
export function eventFeed(): EventFeed {
  shared ??= createEventFeed((url) => new EventSource(url));
  return shared;
}

/** Events that change what the workspace list shows (egress decisions do not). */
export function changesWorkspaces(e: GroveEvent): boolean {
  return !e.type.startsWith('egress.');
}
