// One workspace's thread, live: history from GET /thread, then the WebSocket stream, with reconnects.
import { useCallback, useEffect, useReducer, useRef, useState } from 'react';
import { streamFrameSchema } from '@grove/contracts';
import { api, isApiError, messageOf, streamUrl } from './api.ts';
import { initialThreadState, lastSeq, threadReducer, type ThreadState } from './thread-state.ts';

export type Connection = 'connecting' | 'live' | 'reconnecting';

export interface SendResult {
  ok: boolean;
  /** Shown next to the composer when the message did not go out. */
  error?: string;
}

export interface UseThread {
  state: ThreadState;
  connection: Connection;
  /** History could not be loaded (the thread is still live-streamed if the socket works). */
  loadError: string | null;
  send(text: string): Promise<SendResult>;
}

const MAX_BACKOFF_MS = 10_000;

/**
 * `onDisconnect` runs whenever the stream drops, so the caller can check whether the workspace stopped
 * (a refused WebSocket upgrade carries no status the browser can read).
 */
export function useThread(slug: string, onDisconnect?: () => void): UseThread {
  const [state, dispatch] = useReducer(threadReducer, initialThreadState);
  const [connection, setConnection] = useState<Connection>('connecting');
  const [loadError, setLoadError] = useState<string | null>(null);
  const stateRef = useRef(state);
  stateRef.current = state;
  const onDisconnectRef = useRef(onDisconnect);
  onDisconnectRef.current = onDisconnect;
  const nextId = useRef(1);

  useEffect(() => {
    let socket: WebSocket | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let disposed = false;
    let failures = 0;

    const loadHistory = async () => {
      try {
        const { lines } = await api.thread(slug);
        if (disposed) return;
        dispatch({ type: 'history', lines });
        setLoadError(null);
      } catch (e) {
        if (!disposed) setLoadError(messageOf(e));
      }
    };

    const connect = () => {
      setConnection(failures === 0 ? 'connecting' : 'reconnecting');
      const s = new WebSocket(streamUrl(slug));
      socket = s;
      s.onmessage = (ev: MessageEvent) => {
        if (typeof ev.data !== 'string') return;
        let raw: unknown;
        try {
          raw = JSON.parse(ev.data);
        } catch {
          return;
        }
        const parsed = streamFrameSchema.safeParse(raw);
        if (!parsed.success) return;
        const frame = parsed.data;
        if (frame.type === 'hello') {
          failures = 0;
          setConnection('live');
          // Anything appended while we were away is fetched; merging by seq makes overlap harmless.
          if (frame.lastSeq > lastSeq(stateRef.current)) void loadHistory();
        }
        dispatch({ type: 'frame', frame });
      };
      s.onclose = () => {
        if (disposed) return;
        socket = null;
        failures += 1;
        setConnection('reconnecting');
        onDisconnectRef.current?.();
        const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(failures, 5));
        timer = setTimeout(connect, delay);
      };
    };

    void loadHistory();
    connect();
    return () => {
      disposed = true;
      clearTimeout(timer);
      socket?.close();
    };
  }, [slug]);

  const send = useCallback(
    async (text: string): Promise<SendResult> => {
      const id = nextId.current++;
      dispatch({ type: 'sending', id, text });
      try {
        const { seq } = await api.postMessage(slug, text);
        dispatch({ type: 'sent', id, seq });
        return { ok: true };
      } catch (e) {
        const busy = isApiError(e) && e.status === 409 && e.code !== 'workspace_stopped';
        dispatch({ type: 'send_failed', id, busy });
        if (busy) return { ok: false, error: 'A reply is still being written. Your message is kept; send it when the reply is done.' };
        if (isApiError(e) && e.code === 'workspace_stopped') {
          onDisconnectRef.current?.();
          return { ok: false, error: 'This conversation is paused. Reopen it, then send again.' };
        }
        return { ok: false, error: messageOf(e) };
      }
    },
    [slug],
  );

  return { state, connection, loadError, send };
}
