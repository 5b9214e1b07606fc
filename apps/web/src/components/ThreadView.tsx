// The chat thread of one workspace: history, the reply streaming in, tool blocks, inline errors, and the composer.
'use client';

import { useEffect, useLayoutEffect, useMemo, useRef, useState, type KeyboardEvent } from 'react';
import { GROVE_LINE_PROVIDER, agentGuideOf, parseSlug, type AgentExample } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { isResumeCommand, RESUME_COMMAND } from '../lib/resume.ts';
import { toItems, type ThreadItem } from '../lib/thread-state.ts';
import { useThread, type SendResult } from '../lib/use-thread.ts';
import { useTurns, type UseTurns } from '../lib/use-turns.ts';
import { clockTime } from '../lib/time.ts';
import { useResume } from './Resume.tsx';
import { TurnChanges } from './TurnChanges.tsx';
import { ErrorText, Notice, Spinner } from './ui.tsx';
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

interface Fill {
  text: string;
  seq: number;
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
        <li className={item.pending ? 'msg msg-user msg-pending' : 'msg msg-user'}>
          <span className="sr-only">You said: </span>
          <div className="msg-text">{item.text}</div>
          <div className="msg-meta">{item.pending ? 'Sending…' : item.at ? clockTime(item.at) : ''}</div>
        </li>
      );
    case 'assistant':
      return (
        <li className={item.streaming ? 'msg msg-assistant msg-streaming' : 'msg msg-assistant'}>
          <span className="sr-only">Agent: </span>
          <div className="msg-text">
            {item.text}
            {item.streaming ? <span className="caret" aria-hidden="true" /> : null}
          </div>
          {item.at ? <div className="msg-meta">{clockTime(item.at)}</div> : null}
        </li>
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

const draftKey = (slug: string) => `grove:draft:${slug}`;
const queueKey = (slug: string) => `grove:queue:${slug}`;

/** The queue as this tab saved it: a list of strings, or nothing (storage is the page's, but it is read defensively). */
function readQueue(raw: string | null): string[] {
  if (!raw) return [];
  try {
    const v: unknown = JSON.parse(raw);
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x.trim() !== '') : [];
  } catch {
    return [];
  }
}

type StopState = 'idle' | 'stopping';

interface ComposerProps {
  slug: string;
  audience: Audience;
  /** A reply is being written: the button stops it, and sending waits until it ends. */
  turnRunning: boolean;
  /** A message is on its way to the agent. */
  sending: boolean;
  /** The thread has been read and the backend has said whether a reply runs: until then nothing queued goes out. */
  loaded: boolean;
  onSend: (text: string) => Promise<SendResult>;
  /** Text to put in the composer (an example picked in the empty thread). */
  fill: Fill | null;
}

interface Queued {
  id: number;
  text: string;
}

function Composer({ slug, audience, turnRunning, sending, loaded, onSend, fill }: ComposerProps) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [stop, setStop] = useState<StopState>('idle');
  // The backend takes no message while a turn runs (409), so messages written meanwhile wait here, in order,
  // and go out one per turn as each reply ends.
  const [queue, setQueue] = useState<Queued[]>([]);
  const queueId = useRef(1);
  const flushing = useRef(false);
  const area = useRef<HTMLTextAreaElement>(null);
  const resume = useResume();
  const busy = turnRunning || sending;
  const command = isResumeCommand(text);

  useEffect(() => {
    if (!fill) return;
    setText(fill.text);
    area.current?.focus();
  }, [fill]);

  // A reply ended (or the message before went out and its turn ended): send the next queued one.
  useEffect(() => {
    const next = queue[0];
    if (busy || !loaded || !next || flushing.current) return;
    flushing.current = true;
    setQueue((q) => q.filter((m) => m.id !== next.id));
    void onSend(next.text).then((r) => {
      flushing.current = false;
      if (r.ok) return;
      // Nothing typed is lost: a message that could not go out comes back to the composer.
      setText((now) => (now ? `${now}\n${next.text}` : next.text));
      setError(r.error ?? 'The queued message was not sent.');
    });
  }, [busy, loaded, queue, onSend]);

  // The queue survives a reload in this browser tab, as the draft does (sessionStorage: another tab has its own, so
  // two tabs never send the same queued message). Read once after mount; written on every change after that.
  const queueRead = useRef(false);
  useEffect(() => {
    const saved = readQueue(window.sessionStorage.getItem(queueKey(slug)));
    queueRead.current = true;
    if (saved.length > 0) setQueue(saved.map((text) => ({ id: queueId.current++, text })));
  }, [slug]);
  useEffect(() => {
    if (!queueRead.current) return;
    if (queue.length > 0) window.sessionStorage.setItem(queueKey(slug), JSON.stringify(queue.map((m) => m.text)));
    else window.sessionStorage.removeItem(queueKey(slug));
  }, [slug, queue]);

  // The draft survives a reload or switching away; read after mount so server and client render alike.
  useEffect(() => {
    const saved = window.sessionStorage.getItem(draftKey(slug));
    if (saved) setText(saved);
  }, [slug]);
  useEffect(() => {
    if (text) window.sessionStorage.setItem(draftKey(slug), text);
    else window.sessionStorage.removeItem(draftKey(slug));
  }, [slug, text]);

  // The stop request is done once the turn has ended (its turn_end line arrived).
  useEffect(() => {
    if (!turnRunning) setStop('idle');
  }, [turnRunning]);

  // Grow with the text up to a limit; the rest scrolls.
  useLayoutEffect(() => {
    const el = area.current;
    if (!el) return;
    el.style.height = 'auto';
    el.style.height = `${Math.min(el.scrollHeight, 240)}px`;
  }, [text, busy]);

  const submit = async () => {
    // A command, not a message: it works while a reply is being written too.
    if (isResumeCommand(text)) {
      setText('');
      setError(null);
      resume.open(parseSlug(slug).project);
      return;
    }
    const message = text.trim();
    if (!message) return;
    setError(null);
    setText('');
    if (busy || queue.length > 0) {
      setQueue((q) => [...q, { id: queueId.current++, text: message }]);
      return;
    }
    const r = await onSend(message);
    if (r.ok) return;
    // Nothing typed is lost: the message comes back unless something new was typed meanwhile.
    setText((now) => (now ? now : message));
    setError(r.error ?? 'The message was not sent.');
  };

  const stopTurn = async () => {
    setStop('stopping');
    setError(null);
    try {
      await api.cancelTurn(slug);
    } catch (e) {
      // 409: the reply ended by itself in the meantime, which is what the reader wanted anyway.
      if (isApiError(e) && e.status === 409) return;
      setStop('idle');
      setError(`The reply could not be stopped: ${messageOf(e)}`);
    }
  };

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key !== 'Enter' || e.shiftKey || e.nativeEvent.isComposing) return;
    e.preventDefault();
    void submit();
  };

  const hintId = `composer-hint-${slug}`;
  const switchHint = audience === 'engineer' ? 'switch workspace' : 'open another conversation';
  const hint = command
    ? `Press Enter to open the ${RESUME_COMMAND} picker.`
    : busy
      ? 'The agent is replying. Stop it, or write your next message: Enter queues it until the reply ends.'
      : `Enter to send, Shift+Enter for a new line. ${RESUME_COMMAND} or Ctrl+K to ${switchHint}.`;
  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <ErrorText message={error} className="composer-error" />
      {queue.length > 0 ? (
        <ul className="composer-queue" aria-label="Waiting to be sent">
          {queue.map((m) => (
            <li key={m.id} className="composer-queued">
              <span className="composer-queued-label">Queued</span>
              <span className="composer-queued-text">{m.text}</span>
              <button
                type="button"
                className="btn btn-small"
                aria-label={`Cancel “${m.text}”`}
                title="Take it out of the queue and back into the composer"
                onClick={() => {
                  setQueue((q) => q.filter((x) => x.id !== m.id));
                  setText((now) => (now ? `${now}\n${m.text}` : m.text));
                }}
              >
                Cancel
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      <div className="composer-row">
        <label htmlFor={`composer-${slug}`} className="sr-only">
          Message
        </label>
        <textarea
          id={`composer-${slug}`}
          ref={area}
          rows={1}
          value={text}
          placeholder={busy ? 'Write your next message…' : 'Write a message'}
          onChange={(e) => setText(e.target.value)}
          onKeyDown={onKeyDown}
          aria-describedby={hintId}
        />
        {turnRunning && !command ? (
          <button type="button" className="btn btn-stop" onClick={() => void stopTurn()} disabled={stop === 'stopping'} aria-label="Stop the reply">
            {stop === 'stopping' ? <Spinner /> : <span className="stop-mark" aria-hidden="true" />}
            {stop === 'stopping' ? 'Stopping…' : 'Stop'}
          </button>
        ) : null}
        {/* While a reply runs the button only appears for something typed, and queues it. */}
        {!turnRunning || command || text.trim() ? (
          <button type="submit" className="btn btn-primary" disabled={!command && !text.trim()}>
            {sending && !command && !text.trim() ? <Spinner /> : null}
            {command ? 'Open' : busy && text.trim() ? 'Queue' : sending ? 'Sending' : 'Send'}
          </button>
        ) : null}
      </div>
      <p className="composer-hint" id={hintId}>
        {hint}
      </p>
    </form>
  );
}
