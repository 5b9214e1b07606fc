// One workspace in its tab: name, state and branch, stop / tear down / close, and its conversation.
'use client';

import { useCallback, useState } from 'react';
import { parseSlug, type Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { Conversation } from './Conversation.tsx';
import { ConfirmDialog } from './Dialog.tsx';
import { Spinner, StateBadge } from './ui.tsx';

interface PaneProps {
  slug: string;
  /** On screen (the active tab, or the one pinned beside it). */
  active: boolean;
  /** Pinned to the right half (side by side with whichever tab is active). */
  pinned: boolean;
  /** Another tab is open to be shown beside this one. */
  canPin: boolean;
  onPin: (slug: string, pin: boolean) => void;
  onBusyChange: (slug: string, busy: boolean) => void;
  onClose: (slug: string) => void;
}

type Action = 'stop' | 'teardown';

export function WorkspacePane({ slug, active, pinned, canPin, onPin, onBusyChange, onClose }: PaneProps) {
  const [workspace, setWorkspace] = useState<Workspace | null>(null);
  const [revision, setRevision] = useState(0);
  const [busy, setBusy] = useState<Action | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirming, setConfirming] = useState(false);
  const elapsed = useElapsed(busy !== null);
  const { project, name } = parseSlug(slug);
  const title = name === 'default' ? project : name;
  const onWorkspace = useCallback((w: Workspace) => setWorkspace(w), []);
  const busyChange = useCallback((b: boolean) => onBusyChange(slug, b), [onBusyChange, slug]);
  const close = useCallback(() => onClose(slug), [onClose, slug]);

  const run = async (action: Action) => {
    setBusy(action);
    setError(null);
    try {
      if (action === 'stop') await api.stop(slug);
      else await api.teardown(slug);
      setConfirming(false);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setBusy(null);
      setRevision((n) => n + 1);
    }
  };

  const state = workspace?.state;
  const canTeardown = workspace !== null && !workspace.isDefault && (state === 'running' || state === 'stopped' || state === 'failed');

  return (
    <>
      <div className="pane-head">
        <div className="pane-title">
          <h2>{title}</h2>
          {workspace ? <StateBadge state={workspace.state} /> : null}
          <span className="pane-sub ellipsis">
            {name === 'default' ? 'default workspace' : project}
            {workspace ? (
              <>
                {' · '}
                <span className="branch">{workspace.branch}</span>
              </>
            ) : null}
          </span>
        </div>
        <div className="pane-actions">
          {state === 'running' ? (
            <button className="btn btn-small" disabled={busy !== null} onClick={() => void run('stop')} title="Stop the sandbox; files, thread and agent session are kept">
              {busy === 'stop' ? <Spinner /> : null}
              {busy === 'stop' ? `Stopping… ${elapsed} s` : 'Stop workspace'}
            </button>
          ) : null}
          {canTeardown ? (
            <button className="btn btn-small btn-danger" disabled={busy !== null} onClick={() => setConfirming(true)}>
              Tear down
            </button>
          ) : null}
          {canPin || pinned ? (
            <button
              className="btn btn-small pane-pin"
              aria-pressed={pinned}
              onClick={() => onPin(slug, !pinned)}
              title={pinned ? 'Stop showing this tab beside the others' : 'Keep this tab on the right, beside whichever tab is open'}
            >
              Side by side
            </button>
          ) : null}
          <button className="btn btn-small" onClick={close} title="Close the tab; the workspace keeps running">
            Close tab
          </button>
        </div>
      </div>
      {error && !confirming ? (
        <p className="thread-banner error-text" role="alert">
          {error}
        </p>
      ) : null}
      <Conversation slug={slug} audience="engineer" onWorkspace={onWorkspace} revision={revision} active={active} onBusyChange={busyChange} onCloseTab={close} />
      {confirming && workspace ? (
        <ConfirmDialog
          title={`Tear down ${workspace.name}?`}
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
            Its sandbox stops and its checkout is removed. <strong>The branch <code>{workspace.branch}</code> is kept</strong> with everything committed on it, and the
            conversation is archived.
          </p>
        </ConfirmDialog>
      ) : null}
    </>
  );
}
