// A stopped conversation's last messages, read on the host, under its Reopen notice: "everything is kept" is
// something the reader can see, without starting the sandbox.
'use client';

import { useEffect, useState } from 'react';
import type { LastMessage } from '@grove/contracts';
import { api } from '../lib/api.ts';
import { Bubble } from './Bubble.tsx';
import './EarlierMessages.css';

export function EarlierMessages({ slug }: { slug: string }) {
  const [messages, setMessages] = useState<LastMessage[]>([]);

  useEffect(() => {
    let live = true;
    api.recentMessages(slug).then(
      (r) => {
        if (live) setMessages(r.messages);
      },
      // A nicety: the notice and its Reopen say everything needed without it.
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [slug]);

  if (messages.length === 0) return null;
  return (
    <section className="earlier" aria-label="Earlier in this conversation">
      <h2 className="earlier-title">Earlier in this conversation</h2>
      <ol className="thread-lines earlier-lines">
        {messages.map((m, i) => (
          <Bubble key={`${i}-${m.at}`} who={m.who === 'user' ? 'user' : 'assistant'} at={m.at}>
            {m.text}
          </Bubble>
        ))}
      </ol>
    </section>
  );
}
