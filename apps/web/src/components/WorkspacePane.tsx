// One workspace in its tab: name, state and branch, stop / tear down / close, and its views: the conversation (with its
// listening ports and changes) and the workbench views registered in VIEWS.
'use client';

import { useCallback, useMemo, useState, type ReactNode } from 'react';
import { parseSlug, type Workspace } from '@grove/contracts';
import { ChangesPanel } from './ChangesPanel.tsx';
import { Conversation } from './Conversation.tsx';
import { FilesView } from './FilesView.tsx';
import { PortsList } from './PortsList.tsx';
import { PreviewView } from './PreviewView.tsx';
import { ReviewView } from './ReviewView.tsx';
import { StateBadge } from './ui.tsx';
import { TerminalView } from './Terminal.tsx';
import { WorkspaceActions } from './WorkspaceActions.tsx';
import { WorkbenchContext, type PaneView, type WorkbenchApi } from '../lib/workbench.ts';
import './WorkspacePane.css';

export interface ViewProps {
  slug: string;
  workspace: Workspace;
  /** This view is the one on screen in a tab that is on screen. */
  visible: boolean;
  /** Something changed the workspace (a stop, a checkpoint): re-read what depends on it. */
  onChanged: () => void;
}

interface ViewEntry {
  id: Exclude<PaneView, 'conversation'>;
  label: string;
  render: (props: ViewProps) => ReactNode;
}

// The workbench views after the conversation, in the order of the switcher. A view is mounted the first time it is
// shown and stays mounted (hidden) after that, so a terminal or a preview keeps its state while the conversation is up.
const VIEWS: ViewEntry[] = [
  { id: 'terminal', label: 'Terminal', render: (p) => <TerminalView {...p} /> },
  { id: 'files', label: 'Files', render: (p) => <FilesView {...p} /> },
  { id: 'preview', label: 'Preview', render: (p) => <PreviewView {...p} /> },
  { id: 'review', label: 'Review', render: (p) => <ReviewView {...p} /> },
];

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
  const [view, setView] = useState<PaneView>('conversation');
  const [opened, setOpened] = useState<ReadonlySet<PaneView>>(() => new Set<PaneView>(['conversation']));
  const [requestedFile, setRequestedFile] = useState<WorkbenchApi['requestedFile']>(null);
  const [requestedPreview, setRequestedPreview] = useState<WorkbenchApi['requestedPreview']>(null);
  const show = useCallback((v: PaneView) => {
    setView(v);
    setOpened((o) => (o.has(v) ? o : new Set([...o, v])));
  }, []);
  const workbench = useMemo<WorkbenchApi>(
    () => ({
      show,
      openFile: (path: string) => {
        setRequestedFile((r) => ({ path, seq: (r?.seq ?? 0) + 1 }));
        show('files');
      },
      requestedFile,
      showPreview: (port: number) => {
        setRequestedPreview((r) => ({ port, seq: (r?.seq ?? 0) + 1 }));
        show('preview');
      },
      requestedPreview,
    }),
    [show, requestedFile, requestedPreview],
  );

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
          <button className="btn btn-small pane-close" onClick={close} title="Close the tab; the workspace keeps running">
            Close tab
          </button>
        </div>
      </div>
      {VIEWS.length > 0 ? (
        <div className="pane-views" role="tablist" aria-label={`Views of ${title}`}>
          {[{ id: 'conversation' as const, label: 'Conversation' }, ...VIEWS].map((v) => (
            <button
              key={v.id}
              role="tab"
              id={`${slug}-view-${v.id}`}
              aria-selected={view === v.id}
              aria-controls={`${slug}-panel-${v.id}`}
              tabIndex={view === v.id ? 0 : -1}
              className="pane-view-tab"
              onClick={() => show(v.id)}
              onKeyDown={(e) => {
                if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
                const ids: PaneView[] = ['conversation', ...VIEWS.map((x) => x.id)];
                const next = ids[(ids.indexOf(view) + (e.key === 'ArrowRight' ? 1 : ids.length - 1)) % ids.length] ?? 'conversation';
                show(next);
                document.getElementById(`${slug}-view-${next}`)?.focus();
              }}
            >
              {v.label}
            </button>
          ))}
        </div>
      ) : null}
      <WorkbenchContext.Provider value={workbench}>
        <div className="pane-panel" role="tabpanel" id={`${slug}-panel-conversation`} aria-labelledby={`${slug}-view-conversation`} hidden={view !== 'conversation'}>
          {workspace ? <PortsList slug={slug} state={workspace.state} /> : null}
          {/* Engineers only: the non-engineer default thread (Landing) never shows git words. */}
          {workspace && (workspace.state === 'running' || workspace.state === 'stopped') ? <ChangesPanel workspace={workspace} onChanged={changed} /> : null}
          <Conversation slug={slug} audience="engineer" onWorkspace={onWorkspace} revision={revision} active={active && view === 'conversation'} onBusyChange={busyChange} onCloseTab={close} />
        </div>
        {workspace
          ? VIEWS.filter((v) => opened.has(v.id)).map((v) => (
              <div key={v.id} className="pane-panel" role="tabpanel" id={`${slug}-panel-${v.id}`} aria-labelledby={`${slug}-view-${v.id}`} hidden={view !== v.id}>
                {v.render({ slug, workspace, visible: active && view === v.id, onChanged: changed })}
              </div>
            ))
          : null}
      </WorkbenchContext.Provider>
    </>
  );
}
