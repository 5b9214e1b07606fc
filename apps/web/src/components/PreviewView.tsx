// The workspace's Preview view: the page a dev server in its sandbox serves, framed from the preview origin (never the
// dashboard's), with a chooser of the listening ports, Reload and Open in new tab. It follows the port: a dev server
// that starts shows by itself, one that stops says so, and the chosen port (kept per workspace) shows again after a
// reopen at the same address.
'use client';

import { useCallback, useEffect, useRef, useState } from 'react';
import type { ListeningPort, Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { decide, listedPorts, loadPort, previewablePorts, savePort } from '../lib/preview.ts';
import { useWorkbench } from '../lib/workbench.ts';
import { StoppedView } from './StoppedView.tsx';
import './PreviewView.css';

interface Props {
  slug: string;
  workspace: Workspace;
  visible: boolean;
  onChanged: () => void;
}

// Nothing tells the dashboard when a process in the sandbox starts or stops listening (the backend reads the ports
// from the kernel's tables when asked; there is no event to wait for), so the view re-reads /ports on a timer. It
// is one small read, only while the view is on screen and the workspace runs, and it stops with either.
const PORTS_EVERY_MS = 3_000;

export function PreviewView({ slug, workspace, visible, onChanged }: Props) {
  const { show, requestedPreview } = useWorkbench();
  const running = workspace.state === 'running';
  // Read in the initializer: the view mounts only in the browser, when it is first shown.
  const [chosen, setChosen] = useState<number | null>(() => (typeof window === 'undefined' ? null : loadPort(slug)));
  const [ports, setPorts] = useState<ListeningPort[] | null>(null);
  const [urls, setUrls] = useState<ReadonlyMap<number, string>>(() => new Map());
  const [error, setError] = useState<string | null>(null);
  const [frameKey, setFrameKey] = useState(0);
  const reading = useRef(false);

  const read = useCallback(async () => {
    // A slow answer is not asked again on top of itself.
    if (reading.current) return;
    reading.current = true;
    try {
      const r = await api.ports(slug);
      setPorts(r.ports);
      setError(null);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      reading.current = false;
    }
  }, [slug]);

  useEffect(() => {
    if (!running) {
      // What listened before a stop says nothing about what listens after the reopen.
      setPorts(null);
      return;
    }
    if (!visible) return;
    void read();
    const timer = setInterval(() => void read(), PORTS_EVERY_MS);
    return () => clearInterval(timer);
  }, [running, visible, read]);

  const shown = ports ? decide(chosen, previewablePorts(ports)) : null;
  const shownPort = shown?.kind === 'showing' ? shown.port : null;
  const url = shownPort === null ? undefined : urls.get(shownPort);

  const choose = useCallback(
    (port: number) => {
      setChosen(port);
      savePort(slug, port);
    },
    [slug],
  );

  // "Show in preview" on the conversation's ports row: that port becomes the choice (also when it mounts the view).
  const requestedSeq = requestedPreview?.seq;
  const requestedPort = requestedPreview?.port;
  useEffect(() => {
    if (requestedPort !== undefined) choose(requestedPort);
  }, [requestedSeq, requestedPort, choose]);

  // A dev server that appeared while nothing was chosen becomes the choice, so it is the one shown after a reopen.
  useEffect(() => {
    if (chosen === null && shownPort !== null) choose(shownPort);
  }, [chosen, shownPort, choose]);

  // The address of the shown port, asked once per port: it depends only on the token, slug and port.
  useEffect(() => {
    if (shownPort === null || urls.has(shownPort)) return;
    let cancelled = false;
    api.previewUrl(slug, shownPort).then(
      (r) => {
        if (cancelled) return;
        // Never frame anything on the dashboard's own origin: there a page would act with the user's cookie.
        if (new URL(r.url).origin === window.location.origin) {
          setError(`Grove answered a preview address on the dashboard's own origin (${r.url}); it is not shown here.`);
          return;
        }
        setUrls((m) => new Map(m).set(r.port, r.url));
      },
      (e: unknown) => {
        if (!cancelled) setError(messageOf(e));
      },
    );
    return () => {
      cancelled = true;
    };
  }, [slug, shownPort, urls]);

  const reload = () => {
    setFrameKey((k) => k + 1);
    void read();
  };

  if (!running) {
    return (
      <StoppedView
        slug={slug}
        workspace={workspace}
        onChanged={onChanged}
        lives="its preview shows here once it runs"
        whenStopped="The workspace is stopped; its preview shows here again, at the same address, once its dev server listens after Reopen."
      />
    );
  }

  const listed = ports ? listedPorts(ports) : [];
  const openTerminal = (
    <button type="button" className="btn btn-small" onClick={() => show('terminal')}>
      Open the Terminal
    </button>
  );

  return (
    <div className="preview-view">
      <div className="view-bar">
        <label className="preview-port">
          Port{' '}
          <select
            aria-label="Preview port"
            value={chosen ?? ''}
            onChange={(e) => {
              if (e.target.value) choose(Number(e.target.value));
            }}
            disabled={listed.length === 0 && chosen === null}
          >
            {chosen === null ? <option value="">none</option> : null}
            {chosen !== null && !listed.some((p) => p.port === chosen) ? <option value={chosen}>:{chosen} (not listening)</option> : null}
            {listed.map((p) => (
              <option key={p.port} value={p.port} disabled={!p.preview}>
                :{p.port}
                {p.preview ? '' : ' (cannot be previewed)'}
              </option>
            ))}
          </select>
        </label>
        <button type="button" className="btn btn-small" onClick={reload} disabled={!url}>
          Reload
        </button>
        {url ? (
          <a className="btn btn-small" href={url} target="_blank" rel="noopener noreferrer" title={url}>
            Open in new tab ↗
          </a>
        ) : null}
        {url ? <span className="preview-address ellipsis">{url}</span> : null}
      </div>
      {error ? (
        <p className="preview-error" role="alert">
          {error}
        </p>
      ) : null}
      {shown === null ? (
        <p className="preview-note" role="status">
          Reading the ports…
        </p>
      ) : shown.kind === 'empty' ? (
        <div className="preview-note" role="status">
          <p>Nothing listens yet: start a dev server (for example in the Terminal) and it shows here.</p>
          {openTerminal}
        </div>
      ) : shown.kind === 'gone' ? (
        <div className="preview-note" role="status">
          <p>Nothing listens on :{shown.port} now.</p>
          {shown.others.length > 0 ? (
            <p className="preview-others">
              Listening instead:{' '}
              {shown.others.map((p) => (
                <button key={p} type="button" className="btn btn-small" onClick={() => choose(p)}>
                  Show :{p}
                </button>
              ))}
            </p>
          ) : (
            <p>Start its dev server again (for example in the Terminal) and it shows here.</p>
          )}
          {openTerminal}
        </div>
      ) : url ? (
        // sandbox: the dev page needs its scripts and forms. allow-same-origin keeps it in its own origin (its storage,
        // its fetches and hot reload work); with allow-scripts that would let a same-origin page lift its own sandbox,
        // and it is acceptable only because this origin is the preview listener's, never the dashboard's (checked
        // above). No Referer, so the address (its capability) stays out of what the page loads.
        <iframe
          key={frameKey}
          className="preview-frame"
          src={url}
          title={`Preview of port ${shown.port}`}
          sandbox="allow-scripts allow-forms allow-same-origin"
          referrerPolicy="no-referrer"
        />
      ) : (
        <p className="preview-note" role="status">
          Opening :{shown.port}…
        </p>
      )}
    </div>
  );
}
