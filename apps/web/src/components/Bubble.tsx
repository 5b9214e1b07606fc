// One message of a thread, as a bubble: the live thread (ThreadView) and a paused conversation's earlier messages
// (EarlierMessages) draw them alike.
import type { ReactNode } from 'react';
import { clockTime } from '../lib/time.ts';
import './ThreadView.css';

export interface BubbleProps {
  who: 'user' | 'assistant';
  /** A message still being sent, or a reply still being written. */
  state?: 'pending' | 'streaming' | undefined;
  /** When it was written; the meta line shows its clock time. */
  at?: string | null | undefined;
  /** The meta line instead of the time (a pending message's "Sending…"). */
  meta?: string | undefined;
  children: ReactNode;
}

export function Bubble({ who, state, at, meta, children }: BubbleProps) {
  // A message of yours always has its meta line, so the bubble does not jump when "Sending…" becomes its time.
  const line = meta ?? (at ? clockTime(at) : who === 'user' ? '' : null);
  return (
    <li className={`msg msg-${who}${state ? ` msg-${state}` : ''}`}>
      <span className="sr-only">{who === 'user' ? 'You said: ' : 'Agent: '}</span>
      <div className="msg-text">{children}</div>
      {line !== null ? <div className="msg-meta">{line}</div> : null}
    </li>
  );
}
