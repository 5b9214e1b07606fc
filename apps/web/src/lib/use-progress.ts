// Follows a fork or a reopen through its lifecycle events, live from the shared feed (no polling).
import { useEffect, useMemo, useState } from 'react';
import { lifecycleProgress, type LifecycleProgress, type Operation } from './progress.ts';
import { useSlugEvents } from './use-events.ts';

/** A start that has shown no end after this long is reported as slow (the events may still come). */
const GIVE_UP_MS = 120_000;

export interface ProgressWatch extends LifecycleProgress {
  /** The events could not be read (the operation itself may still be fine). */
  error: string | null;
  timedOut: boolean;
  /** The newest event id of this workspace seen so far: pass it as `since` right before asking for a start. */
  lastId: number;
  /** The history has been read (lastId is meaningful). */
  loaded: boolean;
}

export interface ProgressOptions {
  /** Only events after this id count: set when the reader just asked for a start, so the previous one does not show. */
  since?: number | null;
  /** The operation the reader started, when known. */
  op?: Operation;
}

export function useLifecycleProgress(slug: string | null, options: ProgressOptions = {}): ProgressWatch {
  const { events, error, loaded } = useSlugEvents(slug);
  const { since = null, op } = options;
  const progress = useMemo(() => lifecycleProgress(since === null ? events : events.filter((e) => e.id > since), op), [events, since, op]);
  const finished = progress.done || progress.failed !== null;
  const [timedOut, setTimedOut] = useState(false);

  // One timer per watch, not a loop: it only decides when to call the wait "slow".
  useEffect(() => {
    setTimedOut(false);
    if (!slug || finished) return;
    const t = setTimeout(() => setTimedOut(true), GIVE_UP_MS);
    return () => clearTimeout(t);
  }, [slug, since, finished]);

  return { ...progress, error, timedOut: timedOut && !finished, lastId: events.at(-1)?.id ?? 0, loaded };
}
