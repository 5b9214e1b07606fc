// The ports a workspace's sandbox listens on, each shown in the tab's Preview view or opened in a new browser tab;
// read when asked, never on a timer.
'use client';

import { useCallback, useEffect, useState } from 'react';
import { PROVIDER_RELAY_PORT, type ListeningPort, type WorkspaceState } from '@grove/contracts';
import { api, messageOf, previewPath } from '../lib/api.ts';
import { useWorkbench } from '../lib/workbench.ts';
import { Spinner } from './ui.tsx';
import './PortsList.css';

type Load = { kind: 'idle' } | { kind: 'loading' } | { kind: 'ready'; ports: ListeningPort[] } | { kind: 'error'; message: string };

/** What the line says while the sandbox is not running: one that has never run has no previews to bring back. */
function notRunningNote(state: WorkspaceState): string {
  if (state === 'queued' || state === 'creating') return 'the sandbox is not running yet; previews show here once it does.';
  return 'the sandbox is not running; previews come back at the same address when it is reopened.';
}

export function PortsList({ slug, state }: { slug: string; state: WorkspaceState }) {
  const running = state === 'running';
  const [load, setLoad] = useState<Load>({ kind: 'idle' });
  const { showPreview } = useWorkbench();

  const read = useCallback(async () => {
    setLoad({ kind: 'loading' });
    try {
      const { ports } = await api.ports(slug);
      // The credential relay listens in every sandbox on PROVIDER_RELAY_PORT; sandboxes built before the backend
      // reserved it still report it as previewable. It is Grove's, not the agent's.
      setLoad({ kind: 'ready', ports: ports.filter((p) => p.preview && p.port !== PROVIDER_RELAY_PORT) });
    } catch (e) {
      setLoad({ kind: 'error', message: messageOf(e) });
    }
  }, [slug]);

  // One read when the sandbox is (again) running; after that only the button reads.
  useEffect(() => {
    if (running) void read();
    else setLoad({ kind: 'idle' });
  }, [running, read]);

  return (
    <section className="view-bar ports" aria-label="Listening ports">
      <span className="ports-label">Ports:</span>
      {!running ? (
        <span className="ports-note">{notRunningNote(state)}</span>
      ) : load.kind === 'ready' && load.ports.length === 0 ? (
        <span className="ports-note">nothing listens yet (start a dev server in the workspace, then refresh).</span>
      ) : load.kind === 'error' ? (
        <span className="ports-note error-text" role="alert">
          {load.message}
        </span>
      ) : load.kind === 'ready' ? (
        <ul className="ports-list">
          {load.ports.map((p) => (
            <li key={p.port}>
              <span className="branch">{p.port}</span>{' '}
              <button type="button" className="btn btn-small" onClick={() => showPreview(p.port)} aria-label={`Show port ${p.port} in preview`}>
                Show in preview
              </button>{' '}
              <a href={previewPath(slug, p.port)} target="_blank" rel="noopener noreferrer" aria-label={`Open preview of port ${p.port}`} title={previewPath(slug, p.port)}>
                Open preview ↗
              </a>
            </li>
          ))}
        </ul>
      ) : null}
      {running ? (
        <button className="btn btn-small ports-refresh" onClick={() => void read()} disabled={load.kind === 'loading'}>
          {load.kind === 'loading' ? <Spinner /> : null}
          Refresh ports
        </button>
      ) : null}
    </section>
  );
}
