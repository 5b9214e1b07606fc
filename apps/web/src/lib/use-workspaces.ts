// The workspace list and capacity, kept current by lifecycle events; a slow safety read catches the rest.
import { useCallback, useEffect, useRef, useState } from 'react';
import type { ListWorkspacesResponse } from '@grove/contracts';
import { api, isApiError, messageOf } from './api.ts';
import { changesWorkspaces } from './events.ts';
import { useEventTrigger } from './use-events.ts';

/**
 * Events cover every state change; this only catches what has no event (last activity times) and a
 * feed that is down. Never a fast loop: the issue allows nothing under 5 s.
 */
export const SAFETY_REFRESH_MS = 30_000;

export type WorkspacesLoad = { kind: 'loading' } | { kind: 'signin' } | { kind: 'error'; message: string } | { kind: 'ready'; data: ListWorkspacesResponse };

export interface UseWorkspaces {
  load: WorkspacesLoad;
  /** A refresh failed: the last good list stays on screen with this reason. */
  stale: string | null;
  refresh(): Promise<void>;
}

export function useWorkspaces(): UseWorkspaces {
  const [load, setLoad] = useState<WorkspacesLoad>({ kind: 'loading' });
  const [stale, setStale] = useState<string | null>(null);
  // One read at a time; a change that lands during a read asks for one more afterwards.
  const inflight = useRef<Promise<void> | null>(null);
  const again = useRef(false);

  const read = useCallback(async (): Promise<void> => {
    try {
      const data = await api.listWorkspaces();
      setLoad({ kind: 'ready', data });
      setStale(null);
    } catch (e) {
      if (isApiError(e) && e.status === 401) {
        setLoad({ kind: 'signin' });
        return;
      }
      setLoad((prev) => (prev.kind === 'ready' ? prev : { kind: 'error', message: messageOf(e) }));
      setStale(messageOf(e));
    }
  }, []);

  const refresh = useCallback((): Promise<void> => {
    if (inflight.current) {
      again.current = true;
      return inflight.current;
    }
    const run = async () => {
      do {
        again.current = false;
        await read();
      } while (again.current);
      inflight.current = null;
    };
    inflight.current = run();
    return inflight.current;
  }, [read]);

  useEventTrigger(changesWorkspaces, () => void refresh());

  useEffect(() => {
    void refresh();
    const t = setInterval(() => {
      if (!document.hidden) void refresh();
    }, SAFETY_REFRESH_MS);
    const onVisible = () => {
      if (!document.hidden) void refresh();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      clearInterval(t);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [refresh]);

  return { load, stale, refresh };
}
