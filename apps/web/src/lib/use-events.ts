// React hooks over the shared event feed: "tell me when something happens", and one workspace's audit trail, live.
import { useEffect, useRef, useState } from 'react';
import type { GroveEvent } from '@grove/contracts';
import { api, messageOf } from './api.ts';
import { eventFeed } from './events.ts';

/**
 * Calls `onChange` (coalesced: at most one call per burst of events) whenever an event passes `filter`,
 * and whenever the feed (re)opens: a first connection streams only new events, so whatever happened
 * between the caller's own first read and that moment is read again. Callbacks are read through refs,
 * so callers may pass fresh functions.
 */
export function useEventTrigger(filter: (e: GroveEvent) => boolean, onChange: () => void, enabled = true): void {
  const filterRef = useRef(filter);
  filterRef.current = filter;
  const changeRef = useRef(onChange);
  changeRef.current = onChange;

  useEffect(() => {
    if (!enabled) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // A fork writes four events within a second; one re-read after the burst settles is enough.
    const fire = () => {
      clearTimeout(timer);
      timer = setTimeout(() => changeRef.current(), 120);
    };
    const off = eventFeed().subscribe({
      onEvent: (e) => {
        if (filterRef.current(e)) fire();
      },
      onOpen: fire,
    });
    return () => {
      clearTimeout(timer);
      off();
    };
  }, [enabled]);
}

/** Most events a workspace has in one read; older ones are paged past so the latest are always there. */
const PAGE = 1000;
const MAX_PAGES = 20;

export interface SlugEvents {
  /** Oldest first, one entry per id. */
  events: GroveEvent[];
  loaded: boolean;
  error: string | null;
}

function merge(into: Map<number, GroveEvent>, list: GroveEvent[]): void {
  for (const e of list) into.set(e.id, e);
}

/** One workspace's events: its history from GET /api/events, then live from the feed. */
export function useSlugEvents(slug: string | null): SlugEvents {
  const [state, setState] = useState<SlugEvents>({ events: [], loaded: false, error: null });

  useEffect(() => {
    setState({ events: [], loaded: false, error: null });
    if (!slug) return;
    const byId = new Map<number, GroveEvent>();
    let disposed = false;
    let loaded = false;
    const publish = (patch: Partial<SlugEvents> = {}) => {
      if (!disposed) setState((prev) => ({ ...prev, events: [...byId.values()].sort((a, b) => a.id - b.id), ...patch }));
    };

    const readHistory = async () => {
      try {
        let after: number | undefined;
        for (let page = 0; page < MAX_PAGES; page++) {
          const { events } = await api.events(slug, after);
          merge(byId, events);
          if (events.length < PAGE) break;
          after = events.at(-1)?.id;
        }
        loaded = true;
        publish({ loaded: true, error: null });
      } catch (e) {
        publish({ error: messageOf(e) });
      }
    };

    // Subscribed before the history is read, so nothing falls between the two; overlap merges by id.
    const off = eventFeed().subscribe({
      onEvent: (e) => {
        if (e.slug !== slug) return;
        merge(byId, [e]);
        publish();
      },
      // After a reconnect the whole trail is read again: cheap, and no gap can survive it.
      onOpen: () => {
        if (loaded) void readHistory();
      },
    });
    void readHistory();
    return () => {
      disposed = true;
      off();
    };
  }, [slug]);

  return state;
}
