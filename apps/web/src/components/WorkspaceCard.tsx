// One workspace in the engineer view: name, branch, state, last activity, and stop / reopen / tear down.
'use client';

import Link from 'next/link';
import { useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { workspaceHref } from '../lib/capacity.ts';
import { relativeTime } from '../lib/time.ts';
import { useLifecycleProgress } from '../lib/use-progress.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { ConfirmDialog } from './Dialog.tsx';
import { ForkSteps } from './ForkSteps.tsx';
import { Spinner, StateBadge } from './ui.tsx';

type Action = 'stop' | 'start' | 'teardown';

interface CardProps {
  workspace: Workspace;
  /** Set when the cap is reached: reopening would be refused, so the button says why instead. */
  fullReason: string | null;
  onChanged: () => void;
}

export function WorkspaceCard({ workspace: w, fullReason, onChanged }: CardProps) {
  const [busy, setBusy] = useState<Action | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const elapsed = useElapsed(busy !== null);
  const last = w.lastActivityAt ?? w.updatedAt;
  const title = w.isDefault ? w.project : w.name;

  const run = async (action: Action) => {
    setBusy(action);
    setError(null);
    try {
      if (action === 'stop') await api.stop(w.slug);
      else if (action === 'start') await api.start(w.slug);
      else await api.teardown(w.slug);
      setConfirming(false);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(null);
      onChanged();
    }
  };

  // Only a stopped workspace reopens; the server refuses a failed one (tear down and fork again).
  const canReopen = w.state === 'stopped';
  // The default workspace is the non-engineers' conversation; it is stopped, never torn down, from here.
  const canTeardown = !w.isDefault && (w.state === 'running' || w.state === 'stopped' || w.state === 'failed');
  const reopenBlocked = canReopen && fullReason !== null;
  const reasonId = `cap-${w.slug}`;

  return (
    <li className="card" aria-busy={busy !== null}>
      <div className="card-head">
        <h3 className="card-title">
          <Link href={workspaceHref(w)}>
            {title}
            {w.isDefault ? (
              <>
                {' '}
                <span className="card-tag">default</span>
              </>
            ) : null}
          </Link>
        </h3>
        <StateBadge state={w.state} />
      </div>
      <dl className="card-facts">
        <dt>Branch</dt>
        <dd className="branch">{w.branch}</dd>
        <dt>From</dt>
        <dd className="branch">{w.baseRef}</dd>
        <dt>Active</dt>
        <dd>
          <time dateTime={last} title={new Date(last).toLocaleString()}>
            {relativeTime(last)}
          </time>
        </dd>
      </dl>
      {w.state === 'creating' ? <CreatingSteps slug={w.slug} name={title} /> : null}
      {w.state === 'failed' && w.failureReason ? <p className="card-reason">{w.failureReason}</p> : null}
      {w.state === 'queued' ? (
        <p className="card-queue" role="status">
          <strong>#{w.queuePosition ?? '?'} in line</strong> for a sandbox; it starts by itself when one frees.
        </p>
      ) : null}
      {error ? (
        <p className="card-error" role="alert">
          {error}
        </p>
      ) : null}
      <div className="card-actions">
        {w.state === 'running' ? (
          <button className="btn btn-small" onClick={() => void run('stop')} disabled={busy !== null}>
            {busy === 'stop' ? <Spinner /> : null}
            {busy === 'stop' ? `Stopping… ${elapsed} s` : 'Stop'}
          </button>
        ) : null}
        {canReopen ? (
          <button
            className="btn btn-small btn-primary"
            onClick={() => void run('start')}
            disabled={busy !== null || reopenBlocked}
            aria-describedby={reopenBlocked ? reasonId : undefined}
            title={reopenBlocked ? (fullReason ?? undefined) : undefined}
          >
            {busy === 'start' ? <Spinner /> : null}
            {busy === 'start' ? `Reopening… ${elapsed} s` : 'Reopen'}
          </button>
        ) : null}
        {w.state === 'queued' ? (
          // Nothing was made for it yet, so leaving the line needs no confirmation.
          <button className="btn btn-small" onClick={() => void run('teardown')} disabled={busy !== null}>
            {busy === 'teardown' ? 'Leaving the line…' : 'Leave the line'}
          </button>
        ) : null}
        {canTeardown ? (
          <button className="btn btn-small btn-danger" onClick={() => setConfirming(true)} disabled={busy !== null}>
            Tear down
          </button>
        ) : null}
        {reopenBlocked ? (
          <span id={reasonId} className="sr-only">
            {fullReason}
          </span>
        ) : null}
      </div>
      {confirming ? (
        <ConfirmDialog
          title={`Tear down ${w.name}?`}
          confirmLabel="Tear down"
          busyLabel={`Tearing down… ${elapsed} s`}
          busy={busy === 'teardown'}
          error={error}
          danger
          onConfirm={() => void run('teardown')}
          onCancel={() => {
            if (busy === null) setConfirming(false);
          }}
        >
          <p>
            Its sandbox stops and its checkout is removed. <strong>The branch <code>{w.branch}</code> is kept</strong> with everything committed on it, and the
            conversation is archived.
          </p>
        </ConfirmDialog>
      ) : null}
    </li>
  );
}

function CreatingSteps({ slug, name }: { slug: string; name: string }) {
  const watch = useLifecycleProgress(slug);
  return <ForkSteps watch={watch} label={`Progress of ${name}`} />;
}
