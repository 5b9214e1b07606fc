// The composer under a thread: draft and queue kept per browser tab, /resume, Stop during a reply. While the
// conversation is not open (paused, starting) it holds what is written and Conversation reopens it; the queue goes
// out once the thread is open again, since both composers keep it under the same key.
'use client';

import { useEffect, useLayoutEffect, useRef, useState, type KeyboardEvent } from 'react';
import { parseSlug } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { isResumeCommand, RESUME_COMMAND } from '../lib/resume.ts';
import type { SendResult } from '../lib/use-thread.ts';
import { useResume } from './Resume.tsx';
import type { Audience } from './ThreadView.tsx';
import { ErrorText, Spinner } from './ui.tsx';
import './Composer.css';

/** Text to put in the composer (an example picked in the empty thread); seq: picking the same one twice fills it again. */
export interface Fill {
  text: string;
  seq: number;
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
  fill?: Fill | null;
  /**
   * The conversation is not open (paused or starting): what is written waits in the queue, and onQueued is
   * called so it opens (starting: it is on its way already). The thread's own composer sends the queue once it is.
   */
  held?: Held;
}

/** Composer's held mode: see ComposerProps.held. */
export interface Held {
  onQueued: () => void;
  starting: boolean;
  /** The conversation has not begun yet: sending begins it. */
  fresh?: boolean;
}

/** What sending does while held: it reopens a paused one (begins a fresh one); while it starts (or once sent) it only waits. */
function heldHint(audience: Audience, { starting, fresh = false }: Held, queued: boolean): string {
  const when = audience === 'engineer' ? 'as soon as the workspace runs' : 'as soon as the conversation is open';
  if (queued) return `Sent ${when}.`;
  if (starting) return `Write now: it goes out ${when}.`;
  if (fresh) return 'Sending wakes the agent up; your message goes out as soon as it is ready.';
  return audience === 'engineer' ? 'Sending reopens the workspace; the message goes out once it runs.' : 'Sending reopens the conversation; the message goes out once it is open.';
}

interface Queued {
  id: number;
  text: string;
}

export function Composer({ slug, audience, turnRunning, sending, loaded, onSend, fill = null, held }: ComposerProps) {
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
    if (held || busy || queue.length > 0) {
      setQueue((q) => [...q, { id: queueId.current++, text: message }]);
      held?.onQueued();
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
    : held
      ? heldHint(audience, held, queue.length > 0)
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
        {/* Not "Message" while held: that label means "the thread is open" (and the e2e tests wait on it so). */}
        <label htmlFor={`composer-${slug}`} className="sr-only">
          {held ? (audience === 'engineer' ? 'Write to the agent (sent once it runs)' : held.fresh ? 'Write to start the conversation' : 'Write to carry on the conversation') : 'Message'}
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
            {command ? 'Open' : held ? 'Send' : busy && text.trim() ? 'Queue' : sending ? 'Sending' : 'Send'}
          </button>
        ) : null}
      </div>
      <p className="composer-hint" id={hintId}>
        {hint}
      </p>
    </form>
  );
}

/**
 * Messages that were waiting in this tab for a conversation that can no longer open (it failed, or was torn down):
 * shown once so they can be copied, and taken out of storage, so a later workspace of the same name never sends them.
 */
export function UnsentMessages({ slug }: { slug: string }) {
  const [texts, setTexts] = useState<string[]>([]);
  useEffect(() => {
    const saved = readQueue(window.sessionStorage.getItem(queueKey(slug)));
    window.sessionStorage.removeItem(queueKey(slug));
    if (saved.length > 0) setTexts(saved);
  }, [slug]);
  if (texts.length === 0) return null;
  return (
    <section className="unsent" aria-label="Not sent">
      <p className="unsent-title">{texts.length === 1 ? 'This message was waiting and was not sent:' : 'These messages were waiting and were not sent:'}</p>
      <ul>
        {texts.map((t, i) => (
          <li key={i}>{t}</li>
        ))}
      </ul>
    </section>
  );
}

