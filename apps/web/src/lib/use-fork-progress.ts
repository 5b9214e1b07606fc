// Follows one fork's lifecycle events until it is ready or has failed.
import { useEffect, useState } from 'react';
import type { GroveEvent } from '@grove/contracts';
import { api, messageOf } from './api.ts';
import { forkProgress, type ForkProgress } from './progress.ts';

/**
 * Polled once a second, and only while a fork is in flight (it ends at ready, failure or the time limit):
 * the server has no live event feed yet. Swap this for the SSE stream when it exists.
 */
const POLL_MS = 1_000;
const GIVE_UP_MS = 120_000;

export interface ForkWatch extends ForkProgress {
  /** The events could not be read (the fork itself may still be fine). */
  error: string | null;
  timedOut: boolean;
}

const EMPTY: ForkWatch = { reached: 0, failed: null, done: false, error: null, timedOut: false };

export function useForkProgress(slug: string | null): ForkWatch {
  const [watch, setWatch] = useState<ForkWatch>(EMPTY);

  useEffect(() => {
    setWatch(EMPTY);
    if (!slug) return;
    const events: GroveEvent[] = [];
    const until = Date.now() + GIVE_UP_MS;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let disposed = false;

    const tick = async () => {
      let error: string | null = null;
      try {
        const after = events.at(-1)?.id;
        const batch = await api.events(slug, after);
        events.push(...batch.events);
      } catch (e) {
        error = messageOf(e);
      }
      if (disposed) return;
      const p = forkProgress(events);
      const timedOut = !p.done && !p.failed && Date.now() > until;
      setWatch({ ...p, error, timedOut });
      if (p.done || p.failed || timedOut) return;
      timer = setTimeout(() => void tick(), POLL_MS);
    };
    void tick();
    return () => {
      disposed = true;
      clearTimeout(timer);
    };
  }, [slug]);

  return watch;
}
