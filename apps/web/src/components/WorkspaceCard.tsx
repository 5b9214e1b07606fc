// One workspace in the engineer view: name, branch, state, last activity and message, network, and stop / reopen / tear down.
'use client';

import Link from 'next/link';
import { useEffect, useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { baseLabel, fallbackSentence } from '../lib/base.ts';
import { workspaceHref } from '../lib/capacity.ts';
import { badgeOf, entryOf, type TurnNotice } from '../lib/notifications.ts';
import { relativeTime } from '../lib/time.ts';
import { useBaseFallback } from '../lib/use-base-fallback.ts';
import { useLifecycleProgress } from '../lib/use-progress.ts';
import { CardDisk } from './CardDisk.tsx';
import { CardLastSaid } from './CardLastSaid.tsx';
import { CardNetwork } from './CardNetwork.tsx';
import { ForkSteps } from './ForkSteps.tsx';
import { KeepCheckoutSetting, useKeepOnCard } from './KeepCheckout.tsx';
import { PrLink } from './PrLink.tsx';
import { StateBadge } from './ui.tsx';
import { WorkspaceActions } from './WorkspaceActions.tsx';
import './WorkspaceCard.css';

interface CardProps {
  workspace: Workspace;
  /** Set when the cap is reached: reopening would be refused, so the button says why instead. */
  fullReason: string | null;
  /** Its last turn ended while it was not on screen (cleared when its tab is shown). */
  turnNotice?: TurnNotice | null;
  onChanged: () => void;
}

export function WorkspaceCard({ workspace: w, fullReason, turnNotice = null, onChanged }: CardProps) {
  const [busy, setBusy] = useState(false);
  const last = w.lastActivityAt ?? w.updatedAt;
  const title = w.isDefault ? w.project : w.name;
  // The gate exists from fork to teardown; a failed or gone workspace has no policy to show.
  const hasNetwork = w.state === 'running' || w.state === 'stopped';
  const fallback = useBaseFallback(w);
  const keepOnCard = useKeepOnCard(w);

  return (
    <li className="card" aria-busy={busy}>
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
        <dd className="branch" title={w.baseRef}>
          {baseLabel(w.baseRef)}
        </dd>
        {w.pullRequest ? (
          <>
            <dt>Pull request</dt>
            <dd className="card-pr">
              <PrLink pr={w.pullRequest} />
            </dd>
          </>
        ) : null}
        <dt>Active</dt>
        <dd>
          <time dateTime={last} title={new Date(last).toLocaleString()}>
            {relativeTime(last)}
          </time>
        </dd>
      </dl>
      {/* What it is about; a workspace that is still being made or waits in line has said nothing yet. */}
      {w.state !== 'creating' && w.state !== 'queued' ? <CardLastSaid slug={w.slug} activity={last} /> : null}
      {turnNotice ? <TurnEntry notice={turnNotice} /> : null}
      {/* Asked to start at a pull request that could not be fetched: it started at the default branch, and says why. */}
      {fallback ? <p className="card-note">{fallbackSentence(fallback)}</p> : null}
      {keepOnCard ? <KeepCheckoutSetting workspace={w} className="card-setting" onChanged={onChanged} /> : null}
      {hasNetwork ? <CardNetwork slug={w.slug} name={title} /> : null}
      {/* The disk quota (worktree and agent state), once the workspace has its filesystem image. */}
      {w.disk ? <CardDisk disk={w.disk} /> : null}
      {w.state === 'creating' ? <CreatingSteps slug={w.slug} name={title} /> : null}
      {/* A stopped workspace carries a reason only when it stopped on its own (crash, out of memory). */}
      {(w.state === 'failed' || w.state === 'stopped') && w.failureReason ? <p className="card-reason">{w.failureReason}</p> : null}
      {/* Its pull request ended but cleanup would have removed work: kept, and why (docs/git-flow.md). */}
      {w.cleanupHeld ? (
        <p className="card-reason" role="status">
          Kept after the {w.pullRequest?.state === 'closed' ? 'close' : 'merge'}: {w.cleanupHeld}
        </p>
      ) : null}
      {w.state === 'queued' ? (
        <p className="card-queue" role="status">
          <strong>#{w.queuePosition ?? '?'} in line</strong> for a sandbox; it starts by itself when one frees.
        </p>
      ) : null}
      <div className="card-actions">
        <WorkspaceActions workspace={w} variant="card" fullReason={fullReason} errorClassName="card-error card-actions-error" onChanged={onChanged} onBusyChange={setBusy} />
      </div>
    </li>
  );
}

function CreatingSteps({ slug, name }: { slug: string; name: string }) {
  const watch = useLifecycleProgress(slug);
  return <ForkSteps watch={watch} label={`Progress of ${name}`} />;
}

/** "Finished 2 minutes ago, waiting for you" / "Failed just now: ...": re-rendered each 30 s so the time stays true. */
function TurnEntry({ notice }: { notice: TurnNotice }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 30_000);
    return () => clearInterval(timer);
  }, []);
  const { glyph } = badgeOf(notice);
  return (
    <p className={`card-turn card-turn-${notice.kind}`} role="status">
      <span className="card-turn-glyph" aria-hidden="true">
        {glyph}
      </span>{' '}
      <time dateTime={notice.at} title={new Date(notice.at).toLocaleString()}>
        {entryOf(notice, now)}
      </time>
    </p>
  );
}
