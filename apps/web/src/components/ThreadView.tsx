// The chat thread of one workspace: history, the reply streaming in, tool blocks, inline errors, and the composer (Composer.tsx).
'use client';

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { GROVE_LINE_PROVIDER, agentGuideOf, type AgentExample } from '@grove/contracts';
import { api } from '../lib/api.ts';
import { toItems, type ThreadItem } from '../lib/thread-state.ts';
import { useThread } from '../lib/use-thread.ts';
import { useTurns, type UseTurns } from '../lib/use-turns.ts';
import { Bubble } from './Bubble.tsx';
import { Composer, type Fill } from './Composer.tsx';
import { TurnChanges } from './TurnChanges.tsx';
import { Notice, Spinner } from './ui.tsx';
import './ThreadView.css';

export type Audience = 'everyone' | 'engineer';

interface ThreadViewProps {
  slug: string;
  audience: Audience;
  /** Called when the live stream drops, so the caller can re-check whether the workspace stopped. */
  onDisconnect?: () => void;
  /** What an empty thread invites the reader to do. */
  emptyHint: string;
  /** This thread is the one on screen; tabs keep the others mounted (and streaming) but hidden. */
  active?: boolean;
  /** A turn started or ended, for the tab's "replying" mark. */
  onBusyChange?: (busy: boolean) => void;
}

/** Within this many pixels of the bottom, new content keeps the view pinned to the end. */
const STICK_PX = 96;

export function ThreadView({ slug, audience, onDisconnect, emptyHint, active = true, onBusyChange }: ThreadViewProps) {
  const { state, connection, loadError, send } = useThread(slug, onDisconnect);
  const items = useMemo(() => toItems(state), [state]);
  // Every new line from Grove itself (files recorded or put back, an undo) means the turn list changed.
  const groveLines = useMemo(() => state.lines.filter((l) => l.kind === 'raw' && l.provider === GROVE_LINE_PROVIDER).length, [state.lines]);
  const changed = useMemo(() => items.filter((i) => i.kind === 'changes').map((i) => i.turn), [items]);
  const turns = useTurns(slug, groveLines, changed);
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  /** Where the reader left the thread, restored when its tab comes back (a hidden element loses its scroll offset). */
  const savedTop = useRef<number | null>(null);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!active || !el) return;
    if (stick.current) el.scrollTop = el.scrollHeight;
    else if (savedTop.current !== null) el.scrollTop = savedTop.current;
  }, [active]);

  const onBusyRef = useRef(onBusyChange);
  onBusyRef.current = onBusyChange;
  useEffect(() => {
    onBusyRef.current?.(state.busy);
  }, [state.busy]);
  useEffect(() => () => onBusyRef.current?.(false), []);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [items]);

  // The composer grows and the keyboard opens on phones: the scroll area shrinks, so pin it again.
  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const ro = new ResizeObserver(() => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    });
    ro.observe(el);
    return () => ro.disconnect();
  }, []);

  const sendAndFollow = (text: string) => {
    // Whoever sends wants to see the reply, even after scrolling up to reread something.
    stick.current = true;
    return send(text);
  };

  const onScroll = () => {
    const el = scroller.current;
    // Hiding a tab resets its offset and fires a scroll; that is not the reader moving.
    if (!el || !active) return;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < STICK_PX;
    savedTop.current = el.scrollTop;
  };

  const empty = state.loaded && items.length === 0;
  const provider = useProvider(slug, empty);
  // An example picked in the empty thread lands in the composer (seq: picking the same one twice fills it again).
  const [fill, setFill] = useState<Fill | null>(null);
  const pick = (message: string) => setFill((f) => ({ text: message, seq: (f?.seq ?? 0) + 1 }));

  const waiting = state.busy && !state.draft;
  const sending = state.pending.some((p) => p.seq === null);

  return (
    <div className="thread">
      {connection === 'reconnecting' ? (
        <div className="thread-banner" role="status">
          <Spinner /> Connection lost; reconnecting…
        </div>
      ) : null}
      <div className="thread-scroll" ref={scroller} onScroll={onScroll}>
        <ol className="thread-lines" aria-label="Conversation" aria-live="polite" aria-busy={state.busy}>
          {!state.loaded && !loadError ? (
            <li className="thread-loading">
              <Spinner label="Loading the conversation" /> Loading the conversation…
            </li>
          ) : null}
          {loadError && items.length === 0 ? (
            <li>
              <Notice tone="error" title="The earlier messages could not be loaded">
                <p>{loadError}</p>
              </Notice>
            </li>
          ) : null}
          {empty ? (
            <li className="thread-empty">
              <p className="thread-empty-title">Nothing here yet</p>
              <p>{emptyHint}</p>
              {provider ? <AgentGuide provider={provider} onPick={pick} /> : null}
            </li>
          ) : null}
          {items.map((item) => (
            <Item key={item.key} item={item} audience={audience} slug={slug} turns={turns} />
          ))}
          {waiting ? (
            <li className="msg msg-assistant msg-thinking">
              <span className="dots" role="img" aria-label="The agent is working">
                <span />
                <span />
                <span />
              </span>
            </li>
          ) : null}
        </ol>
      </div>
      <Composer slug={slug} audience={audience} turnRunning={state.busy && !sending} sending={sending} loaded={state.loaded && state.heard} onSend={sendAndFollow} fill={fill} />
    </div>
  );
}

/** The provider the workspace's backend runs (GET /status), read once the thread turns out empty; null until known. */
function useProvider(slug: string, wanted: boolean): string | null {
  const [provider, setProvider] = useState<string | null>(null);
  useEffect(() => {
    if (!wanted || provider !== null) return;
    let live = true;
    // Without it the empty thread only lacks its examples: nothing to report.
    api.status(slug).then(
      (s) => live && setProvider(s.provider),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [slug, wanted, provider]);
  return provider;
}

/** What this workspace's agent can do, from contracts' AGENT_GUIDES; examples fill the composer. */
function AgentGuide({ provider, onPick }: { provider: string; onPick: (message: string) => void }) {
  const guide = agentGuideOf(provider);
  if (!guide) return null;
  return (
    <div className="thread-guide">
      <p>{guide.summary}</p>
      {guide.examples.length > 0 ? (
        <ul className="thread-examples" aria-label="Things to try">
          {guide.examples.map((e: AgentExample) => (
            <li key={e.message}>
              <button type="button" className="btn btn-small thread-example" onClick={() => onPick(e.message)} title="Put this message in the composer">
                <code>{e.message}</code>
              </button>
              <span className="thread-example-does">{e.does}</span>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

function Item({ item, audience, slug, turns }: { item: ThreadItem; audience: Audience; slug: string; turns: UseTurns }) {
  switch (item.kind) {
    case 'changes':
      return <TurnChanges slug={slug} item={item} summary={turns.byTurn.get(item.turn)} onUndone={turns.refresh} />;
    case 'undo':
      return (
        <li className="msg msg-note msg-undo">
          Undone: {item.files.length === 1 ? '1 file is' : `${item.files.length} files are`} back to how {item.files.length === 1 ? 'it was' : 'they were'} before that reply.
        </li>
      );
    case 'note':
      return <li className="msg msg-note">{item.text}</li>;
    case 'user':
      return (
        <Bubble who="user" state={item.pending ? 'pending' : undefined} at={item.at} meta={item.pending ? 'Sending…' : undefined}>
          {item.text}
        </Bubble>
      );
    case 'assistant':
      return (
        <Bubble who="assistant" state={item.streaming ? 'streaming' : undefined} at={item.at}>
          {item.text}
          {item.streaming ? <span className="caret" aria-hidden="true" /> : null}
        </Bubble>
      );
    case 'tool':
      return (
        <li className="msg msg-tool">
          <details>
            <summary>
              <span className="tool-verb">Used</span>
              <span className="tool-name">{item.tool}</span>
              <span className={item.result === null ? 'tool-state' : item.result.isError ? 'tool-state tool-failed' : 'tool-state tool-ok'}>
                {item.result === null ? 'running…' : item.result.isError ? 'failed' : 'done'}
              </span>
            </summary>
            {item.input !== undefined ? (
              <>
                <p className="tool-label">Input</p>
                <pre>{formatJson(item.input)}</pre>
              </>
            ) : null}
            {item.result ? (
              <>
                <p className="tool-label">Result</p>
                <pre className={item.result.isError ? 'tool-error' : undefined}>{item.result.output || '(no output)'}</pre>
              </>
            ) : null}
          </details>
        </li>
      );
    case 'error':
      return (
        <li className="msg msg-error" role="alert">
          <strong>Something went wrong.</strong> {item.message}
        </li>
      );
    case 'turn_end':
      return <li className="msg msg-note">{item.status === 'cancelled' ? 'The reply was stopped.' : 'The reply did not finish.'}</li>;
    case 'raw':
      // Provider events Grove does not model yet: kept for engineers, noise for everyone else.
      if (audience !== 'engineer') return null;
      return (
        <li className="msg msg-tool msg-raw">
          <details>
            <summary>
              <span className="tool-name">{item.provider} event</span>
            </summary>
            <pre>{formatJson(item.event)}</pre>
          </details>
        </li>
      );
  }
}

function formatJson(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}
