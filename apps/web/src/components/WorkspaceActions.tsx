// Stop / reopen / tear down for one workspace, shared by its card and its tab, with the teardown confirmation.
'use client';

import { useEffect, useState } from 'react';
import type { TeardownPreview, Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { ConfirmDialog } from './Dialog.tsx';
import { Spinner } from './ui.tsx';
import './WorkspaceActions.css';

type Action = 'stop' | 'start' | 'teardown';

interface ActionsProps {
  workspace: Workspace;
  /** Card: short labels and a Reopen button. Pane: the tab's own labels; reopening happens in its conversation. */
  variant: 'card' | 'pane';
  /** Set when the cap is reached: reopening would be refused, so the button says why instead. */
  fullReason?: string | null;
  /** Class of the paragraph that shows a failed action. */
  errorClassName: string;
  onChanged: () => void;
  onBusyChange?: (busy: boolean) => void;
}

export function WorkspaceActions({ workspace: w, variant, fullReason = null, errorClassName, onChanged, onBusyChange }: ActionsProps) {
  const [busy, setBusy] = useState<Action | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const elapsed = useElapsed(busy !== null);

  useEffect(() => {
    onBusyChange?.(busy !== null);
  }, [busy, onBusyChange]);

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
  const canReopen = variant === 'card' && w.state === 'stopped';
  // The default workspace is the non-engineers' conversation; it is stopped, never torn down, from here.
  const canTeardown = !w.isDefault && (w.state === 'running' || w.state === 'stopped' || w.state === 'failed');
  const reopenBlocked = canReopen && fullReason !== null;
  const reasonId = `cap-${w.slug}`;

  return (
    <>
      {error && !confirming ? (
        <p className={errorClassName} role="alert">
          {error}
        </p>
      ) : null}
      {w.state === 'running' ? (
        <button
          className="btn btn-small"
          onClick={() => void run('stop')}
          disabled={busy !== null}
          title={variant === 'pane' ? 'Stop the sandbox; files, thread and agent session are kept' : undefined}
        >
          {busy === 'stop' ? <Spinner /> : null}
          {busy === 'stop' ? `Stopping… ${elapsed} s` : variant === 'pane' ? 'Stop workspace' : 'Stop'}
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
          <TeardownFacts workspace={w} />
        </ConfirmDialog>
      ) : null}
    </>
  );
}

type Facts = { kind: 'loading' } | { kind: 'ready'; preview: TeardownPreview } | { kind: 'error'; message: string };

/** Shown in the confirmation: read from the host when it opens, with the rule itself when that read fails. */
function TeardownFacts({ workspace: w }: { workspace: Workspace }) {
  const [facts, setFacts] = useState<Facts>({ kind: 'loading' });

  useEffect(() => {
    let live = true;
    api.teardownPreview(w.slug).then(
      (preview) => live && setFacts({ kind: 'ready', preview }),
      (e: unknown) => live && setFacts({ kind: 'error', message: messageOf(e) }),
    );
    return () => {
      live = false;
    };
  }, [w.slug]);

  const p = facts.kind === 'ready' ? facts.preview : null;
  const ahead = p?.commitsAhead ?? null;

  return (
    <div className="teardown-facts">
      <h3>Kept</h3>
      <ul>
        <li>
          {/* "is kept" inside one element: e2e/web.test.ts waits for that phrase. */}
          <strong>
            The branch <code>{w.branch}</code> is kept
          </strong>{' '}
          with everything committed on it
          {ahead === null ? '' : ahead === 0 ? ` (no commits beyond ${w.baseRef} yet)` : ` (${ahead} ${ahead === 1 ? 'commit' : 'commits'} beyond ${w.baseRef})`}.
        </li>
        <li aria-live="polite">
          {facts.kind === 'loading' ? (
            <>
              <Spinner /> Checking for uncommitted changes…
            </>
          ) : p && p.uncommitted.total > 0 ? (
            <>
              {p.uncommitted.total} uncommitted {p.uncommitted.total === 1 ? 'change' : 'changes'} (
              {p.uncommitted.files
                .slice(0, 3)
                .map((f) => `${f.path} ${f.status}`)
                .join(', ')}
              {p.uncommitted.total > 3 ? `, and ${p.uncommitted.total - 3} more` : ''}), saved first to the recovery copy <code>{p.recoveryRef}</code>; it can be restored as a
              new workspace.
            </>
          ) : p ? (
            <>No uncommitted changes: nothing needs a recovery copy.</>
          ) : (
            <>
              Any uncommitted change is saved first to a recovery copy <code>refs/grove/…/teardown/&lt;n&gt;</code> that can be restored as a new workspace. (Checking
              this workspace failed: {facts.kind === 'error' ? facts.message : ''})
            </>
          )}
        </li>
        <li>The conversation, archived.</li>
      </ul>
      <h3>Removed</h3>
      <ul>
        <li>The sandbox and anything still running in it.</li>
        <li>The checkout (this workspace&apos;s worktree on the host).</li>
      </ul>
    </div>
  );
}
