// The workspace's Terminal view: shells in its sandbox (xterm.js over /w/<slug>/terminals/<id>/socket), several per
// workspace as small tabs, fitted to the panel, reattached (with their scrollback) after a reload or a dropped socket.
'use client';

import { useCallback, useEffect, useRef, useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, messageOf, terminalUrl } from '../lib/api.ts';
import '@xterm/xterm/css/xterm.css';
import { StoppedView } from './StoppedView.tsx';
import './Terminal.css';

interface Props {
  slug: string;
  workspace: Workspace;
  visible: boolean;
  onChanged: () => void;
}

export function TerminalView({ slug, workspace, visible, onChanged }: Props) {
  const [ids, setIds] = useState<string[]>([]);
  const [current, setCurrent] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  // A terminal the user just opened or picked takes the keyboard (seq: picking the same one again focuses it again).
  const [focus, setFocus] = useState<{ id: string; seq: number } | null>(null);
  const show = (id: string) => {
    setCurrent(id);
    setFocus((f) => ({ id, seq: (f?.seq ?? 0) + 1 }));
  };
  const running = workspace.state === 'running';

  const refresh = useCallback(async () => {
    try {
      const { terminals } = await api.terminals(slug);
      const list = terminals.map((t) => t.id);
      setIds(list);
      setCurrent((c) => (c !== null && list.includes(c) ? c : (list[0] ?? null)));
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    }
  }, [slug]);

  useEffect(() => {
    if (running) void refresh();
    else {
      setIds([]);
      setCurrent(null);
    }
  }, [running, refresh]);

  const add = async () => {
    try {
      const { id } = await api.openTerminal(slug, 80, 24);
      setIds((l) => [...l, id]);
      show(id);
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    }
  };

  const close = async (id: string) => {
    try {
      await api.closeTerminal(slug, id);
    } catch (e) {
      setError(messageOf(e));
    }
    void refresh();
  };

  if (!running) {
    return (
      <StoppedView slug={slug} workspace={workspace} onChanged={onChanged} lives="terminals run in its sandbox" />
    );
  }

  return (
    <div className="terminal-view">
      {/* A group of toggle buttons, not a tablist: each terminal has a close button beside it, which a tablist may not hold. */}
      <div className="view-bar" role="group" aria-label="Terminals">
        {ids.map((id, i) => (
          <span key={id} className={`terminal-tab${id === current ? ' is-current' : ''}`}>
            <button type="button" aria-pressed={id === current} onClick={() => show(id)}>
              Terminal {i + 1}
            </button>
            <button type="button" className="terminal-close" aria-label={`Close terminal ${i + 1}`} onClick={() => void close(id)}>
              ×
            </button>
          </span>
        ))}
        <button type="button" className="terminal-new" onClick={() => void add()}>
          + New terminal
        </button>
        <span className="terminal-hint">Tab goes to the shell; press Escape then Tab (or Ctrl+Shift+E) to move focus out.</span>
      </div>
      {error && <p className="terminal-error" role="alert">{error}</p>}
      {ids.length === 0 && <p className="terminal-empty">No terminal yet: open one with “+ New terminal”.</p>}
      {ids.map((id) => (
        <TerminalScreen key={id} slug={slug} id={id} shown={visible && id === current} focus={focus?.id === id ? focus.seq : 0} onEnded={() => void refresh()} />
      ))}
    </div>
  );
}

interface ScreenProps {
  slug: string;
  id: string;
  shown: boolean;
  /** Raised each time this terminal should take the keyboard; 0: never asked. */
  focus: number;
  onEnded: () => void;
}

/** One xterm attached to one terminal's socket; reconnects while the terminal exists. */
function TerminalScreen({ slug, id, shown, focus, onEnded }: ScreenProps) {
  const host = useRef<HTMLDivElement>(null);
  const fitRef = useRef<(() => void) | null>(null);
  const focusRef = useRef<(() => void) | null>(null);
  // The newest focus asked for, and the last one given: a new terminal is asked before its xterm exists.
  const wantedFocus = useRef(focus);
  wantedFocus.current = focus;
  const givenFocus = useRef(0);
  const [status, setStatus] = useState<string>('Connecting…');

  useEffect(() => {
    let disposed = false;
    let socket: WebSocket | null = null;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let cleanup: (() => void) | null = null;
    const element = host.current;
    if (!element) return;

    void (async () => {
      // Loaded on first use, so xterm is not in the main bundle.
      const [{ Terminal }, { FitAddon }] = await Promise.all([import('@xterm/xterm'), import('@xterm/addon-fit')]);
      if (disposed) return;
      const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000, fontFamily: 'ui-monospace, Menlo, Consolas, monospace' });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(element);
      focusRef.current = () => term.focus();
      if (wantedFocus.current > givenFocus.current) {
        givenFocus.current = wantedFocus.current;
        term.focus();
      }
      const sendResize = () => {
        if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
      };
      const doFit = () => {
        if (element.offsetWidth === 0 || element.offsetHeight === 0) return;
        fit.fit();
        sendResize();
      };
      fitRef.current = doFit;
      const observer = new ResizeObserver(doFit);
      observer.observe(element);

      // Keyboard users leave the terminal with Escape then Tab, or Ctrl+Shift+E.
      let escaped = false;
      term.attachCustomKeyEventHandler((ev) => {
        if (ev.type !== 'keydown') return true;
        if (ev.ctrlKey && ev.shiftKey && (ev.key === 'E' || ev.key === 'e')) {
          term.blur();
          element.closest('.terminal-view')?.querySelector<HTMLElement>('.terminal-new')?.focus();
          return false;
        }
        if (ev.key === 'Tab' && escaped) {
          escaped = false;
          term.blur();
          return false;
        }
        escaped = ev.key === 'Escape';
        return true;
      });
      const encoder = new TextEncoder();
      // Keys typed before the socket opens (a new terminal takes the keyboard at once) wait for it, in order.
      let early: Uint8Array[] = [];
      const input = term.onData((data) => {
        const bytes = encoder.encode(data);
        if (socket?.readyState === WebSocket.OPEN) socket.send(bytes);
        else if (early.length < 256) early.push(bytes);
      });

      const connect = () => {
        if (disposed) return;
        const ws = new WebSocket(terminalUrl(slug, id));
        ws.binaryType = 'arraybuffer';
        socket = ws;
        let replayed = false;
        ws.onopen = () => {
          setStatus('');
          doFit();
          for (const bytes of early) ws.send(bytes);
          early = [];
        };
        ws.onmessage = (ev: MessageEvent<ArrayBuffer | string>) => {
          // The first frame after (re)connecting is the scrollback: start from a clean screen.
          if (!replayed) {
            replayed = true;
            term.reset();
          }
          term.write(typeof ev.data === 'string' ? ev.data : new Uint8Array(ev.data));
        };
        ws.onclose = (ev) => {
          if (disposed) return;
          if (ev.code === 4000 || ev.code === 1008) {
            setStatus(ev.reason || 'The shell exited.');
            onEnded();
            return;
          }
          setStatus('Disconnected; reconnecting…');
          retry = setTimeout(() => {
            // Only while the terminal still exists (a stop or teardown ends it).
            api.terminals(slug).then(
              ({ terminals }) => (terminals.some((t) => t.id === id) ? connect() : onEnded()),
              () => connect(),
            );
          }, 1000);
        };
      };
      connect();
      cleanup = () => {
        observer.disconnect();
        input.dispose();
        term.dispose();
      };
    })();

    return () => {
      disposed = true;
      clearTimeout(retry);
      socket?.close();
      cleanup?.();
      fitRef.current = null;
      focusRef.current = null;
    };
  }, [slug, id, onEnded]);

  useEffect(() => {
    if (shown) fitRef.current?.();
  }, [shown]);

  useEffect(() => {
    if (!shown || focus <= givenFocus.current || !focusRef.current) return;
    givenFocus.current = focus;
    focusRef.current();
  }, [shown, focus]);

  return (
    <div className="terminal-screen" hidden={!shown} data-terminal={id}>
      {status && <p className="terminal-status" role="status">{status}</p>}
      <div className="terminal-host" ref={host} />
    </div>
  );
}
