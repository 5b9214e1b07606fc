// One workspace in its tab: name, state and branch, stop / tear down / close, its listening ports, its changes, and its conversation.
'use client';

import { useCallback, useState } from 'react';
import { parseSlug, type Workspace } from '@grove/contracts';
import { ChangesPanel } from './ChangesPanel.tsx';
import { Conversation } from './Conversation.tsx';
import { PortsList } from './PortsList.tsx';
import { StateBadge } from './ui.tsx';
import { WorkspaceActions } from './WorkspaceActions.tsx';
import './WorkspacePane.css';

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

export function WorkspacePane({ slug, active, pinned, canPin, onPin, onBusyChange, onClose }: PaneProps) {
  const [workspace, setWorkspace] = useState<Workspace | null>(null);
  const [revision, setRevision] = useState(0);
  const { project, name } = parseSlug(slug);
  const title = name === 'default' ? project : name;
  const onWorkspace = useCallback((w: Workspace) => setWorkspace(w), []);
  const busyChange = useCallback((b: boolean) => onBusyChange(slug, b), [onBusyChange, slug]);
  const close = useCallback(() => onClose(slug), [onClose, slug]);
  const changed = useCallback(() => setRevision((n) => n + 1), []);

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
          {workspace ? <WorkspaceActions workspace={workspace} variant="pane" errorClassName="pane-error" onChanged={changed} /> : null}
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
      {workspace ? <PortsList slug={slug} running={workspace.state === 'running'} /> : null}
      {/* Engineers only: the non-engineer default thread (Landing) never shows git words. */}
      {workspace && (workspace.state === 'running' || workspace.state === 'stopped') ? <ChangesPanel workspace={workspace} onChanged={changed} /> : null}
      <Conversation slug={slug} audience="engineer" onWorkspace={onWorkspace} revision={revision} active={active} onBusyChange={busyChange} onCloseTab={close} />
    </>
  );
}
