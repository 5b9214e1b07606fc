// The network line of a workspace card: the hosts its sandbox may reach, the latest denials, and a reset.
'use client';

import { useCallback, useEffect, useRef, useState } from 'react';
import type { EgressResponse } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { changesEgress, networkLine, recentDenials } from '../lib/egress.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { relativeTime } from '../lib/time.ts';
import { ErrorText, Spinner } from './ui.tsx';
import './CardNetwork.css';

/**
 * Read once, then again only when an egress.denied / egress.policy event of this workspace arrives on the
 * page's event feed (and when the feed reconnects): no polling.
 */
export function CardNetwork({ slug, name }: { slug: string; name: string }) {
  const [data, setData] = useState<EgressResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [resetting, setResetting] = useState(false);
  const mounted = useRef(true);

  const read = useCallback(async () => {
    try {
      const r = await api.egress(slug);
      if (!mounted.current) return;
      setData(r);
      setError(null);
    } catch (e) {
      if (mounted.current) setError(messageOf(e));
    }
  }, [slug]);

  useEffect(() => {
    mounted.current = true;
    void read();
    return () => {
      mounted.current = false;
    };
  }, [read]);

  useEventTrigger((e) => changesEgress(slug, e), () => void read());

  const reset = async () => {
    setResetting(true);
    setError(null);
    try {
      await api.resetEgress(slug);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setResetting(false);
      void read();
    }
  };

  if (!data) {
    return error ? (
      <p className="card-net card-net-error" role="status">
        Network: unknown ({error})
      </p>
    ) : null;
  }
  const line = networkLine(data.policy);
  const denials = recentDenials(data.decisions);

  return (
    <section className="card-net" aria-label={`Network of ${name}`}>
      <p className="card-net-line">
        <span className="card-net-label">Network:</span>{' '}
        <span className="branch" title={line.all || undefined}>
          {line.text}
        </span>
        {data.source === 'workspace' ? (
          <>
            {' '}
            <span className="card-tag" title="This workspace has its own policy instead of the project default">
              custom
            </span>{' '}
            <button className="btn-link" onClick={() => void reset()} disabled={resetting}>
              {resetting ? <Spinner /> : null}
              Reset to project default
            </button>
          </>
        ) : null}
      </p>
      {denials.length ? (
        <ul className="card-denials" aria-label={`Recent denials of ${name}`}>
          {denials.map((d) => (
            <li key={d.id} title={d.reason}>
              <span className="card-denial-tag">Denied</span> <span className="branch">{d.target}</span> <span className="card-denial-rule">{d.rule}</span>
              {d.count > 1 ? ` ×${d.count}` : ''}{' '}
              <time dateTime={d.at} title={new Date(d.at).toLocaleString()}>
                {relativeTime(d.at)}
              </time>
            </li>
          ))}
        </ul>
      ) : null}
      <ErrorText message={error} className="card-error" />
    </section>
  );
}
