// The last thing said in a workspace, on its card: a board of parallel workspaces says what each one is about.
'use client';

import { useCallback, useEffect, useRef, useState } from 'react';
import { api } from '../lib/api.ts';
import { quoteLine, quoteOf, type Quote } from '../lib/resume.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import './CardLastSaid.css';

/**
 * Read from the host's copy of the thread (so a stopped workspace is quoted too) when the card appears, when its
 * activity time moves, and when one of its turns ends (the reply is in the thread by then): no polling.
 */
export function CardLastSaid({ slug, activity }: { slug: string; activity: string }) {
  // undefined: not read yet (nothing is shown); null: nothing said yet.
  const [quote, setQuote] = useState<Quote | null | undefined>(undefined);
  // Replies can land out of order; only the newest read counts.
  const seq = useRef(0);

  const read = useCallback(async () => {
    const mine = ++seq.current;
    try {
      const { lastMessage } = await api.lastMessage(slug);
      // The server sends it on one line, already shortened; CSS clamps it to two lines of the card.
      if (mine === seq.current) setQuote(quoteOf(lastMessage));
    } catch {
      // A nicety: the card says everything else without it, and the next turn's end reads again.
    }
  }, [slug]);

  useEffect(() => {
    void read();
    return () => {
      seq.current++;
    };
  }, [read, activity]);

  useEventTrigger((e) => e.slug === slug && e.type === 'turn.ended', () => void read());

  if (quote === undefined) return null;
  return quote ? (
    <p className={`card-last card-last-${quote.who}`} title={quoteLine(quote)}>
      {quoteLine(quote)}
    </p>
  ) : (
    <p className="card-last card-last-none">No messages yet.</p>
  );
}
