// The turns that changed files (GET /turns), read again whenever the thread gets a new line from Grove itself.
import { useCallback, useEffect, useRef, useState } from 'react';
import type { TurnSummary } from '@grove/contracts';
import { api, messageOf } from './api.ts';

export interface UseTurns {
  /** By thread turn id (`turn-<n>`); empty until loaded. */
  byTurn: ReadonlyMap<string, TurnSummary>;
  error: string | null;
  refresh(): void;
}

/** Asks again this often, this many times, while a turn the thread shows changes for is not in the list yet. */
const RETRY_MS = 1_000;
const MAX_RETRIES = 5;

/**
 * `version` changes when the thread gets a snapshot, revert or undo line; 0 means the thread has
 * none, so there is nothing to ask for. `expected` are the turns the thread shows changes for: one the
 * answer does not have yet (read a moment before it was recorded) is asked for again, a few times.
 */
export function useTurns(slug: string, version: number, expected: readonly string[] = []): UseTurns {
  const [byTurn, setByTurn] = useState<ReadonlyMap<string, TurnSummary>>(new Map());
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const latest = useRef(0);
  const retries = useRef(0);
  const missing = expected.some((t) => !byTurn.has(t));

  useEffect(() => {
    retries.current = 0;
  }, [version]);

  useEffect(() => {
    if (!missing || retries.current >= MAX_RETRIES) return;
    const timer = setTimeout(() => {
      retries.current++;
      setTick((t) => t + 1);
    }, RETRY_MS);
    return () => clearTimeout(timer);
  }, [missing, byTurn]);

  useEffect(() => {
    if (version === 0 && tick === 0) return;
    const call = ++latest.current;
    api.turns(slug).then(
      ({ turns }) => {
        // An older answer arriving late must not replace a newer one.
        if (call !== latest.current) return;
        setByTurn(new Map(turns.map((t) => [t.turn, t])));
        setError(null);
      },
      (e: unknown) => {
        if (call === latest.current) setError(messageOf(e));
      },
    );
  }, [slug, version, tick]);

  const refresh = useCallback(() => setTick((t) => t + 1), []);
  return { byTurn, error, refresh };
}
