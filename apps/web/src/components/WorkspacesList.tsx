// The list tab of the engineer view: every workspace as a card, the capacity meter, the fork dialog, and each
// project's settings.
'use client';

import { useEffect, useState } from 'react';
import type { Capacity, ListWorkspacesResponse, Project, Workspace } from '@grove/contracts';
import { api } from '../lib/api.ts';
import { byActivity, capacityReason, isFull } from '../lib/capacity.ts';
import { projectNames } from '../lib/landing.ts';
import type { TurnNotices } from '../lib/notifications.ts';
import type { UseWorkspaces } from '../lib/use-workspaces.ts';
import { ForkDialog } from './ForkDialog.tsx';
import { ProjectSettingsDialog } from './ProjectSettings.tsx';
import { Notice } from './ui.tsx';
import { WorkspaceCard } from './WorkspaceCard.tsx';
import './WorkspacesList.css';

/** The list and its live state come from the cockpit, which shares them with the tab strip. */
export function WorkspacesList({
  workspaces: { load, stale, refresh },
  onForked,
  notices = {},
}: {
  workspaces: UseWorkspaces;
  onForked?: (slug: string) => void;
  /** Turns that ended in workspaces not on screen (the cockpit's), shown on their cards. */
  notices?: TurnNotices;
}) {
  const [projects, setProjects] = useState<Project[]>([]);
  const [forking, setForking] = useState(false);
  // The project whose settings are open, or null.
  const [settingsOf, setSettingsOf] = useState<string | null>(null);
  const onChanged = () => void refresh();

  useEffect(() => {
    api.listProjects().then(
      (r) => setProjects(r.projects),
      () => setProjects([]),
    );
  }, []);

  return (
    <div className="page">
      {load.kind === 'error' ? (
        <div className="centered">
          <Notice tone="error" title="The workspaces could not be loaded" actions={<button className="btn" onClick={() => void refresh()}>Try again</button>}>
            <p>{load.message}</p>
          </Notice>
        </div>
      ) : load.kind === 'ready' ? (
        <Ready data={load.data} projects={projects} stale={stale} notices={notices} onFork={() => setForking(true)} onSettings={setSettingsOf} onChanged={onChanged} />
      ) : (
        <Loading />
      )}
      {forking && load.kind === 'ready' ? (
        <ForkDialog
          projects={projects.length ? projects : projectsFrom(load.data.workspaces)}
          workspaces={load.data.workspaces}
          full={isFull(load.data.capacity)}
          onClose={() => setForking(false)}
          onChanged={onChanged}
          onStarted={onForked}
        />
      ) : null}
      {settingsOf !== null && load.kind === 'ready' ? (
        <ProjectSettingsDialog projects={allProjects(projects, load.data.workspaces)} initial={settingsOf} onClose={() => setSettingsOf(null)} />
      ) : null}
    </div>
  );
}

/** When /api/projects failed, the projects can still be read off the workspaces (default branch unknown). */
function projectsFrom(workspaces: Workspace[]): Project[] {
  const names = [...new Set(workspaces.map((w) => w.project))].sort();
  return names.map((name) => ({ name, defaultBranch: workspaces.find((w) => w.project === name && w.isDefault)?.baseRef ?? 'main', createdAt: '' }));
}

/** Every project, including one without a workspace yet (added with the API or `grove project add`). */
const allProjects = (projects: Project[], workspaces: Workspace[]): string[] => projectNames(projects.map((p) => p.name), workspaces);

function Loading() {
  return (
    <>
      <div className="toolbar">
        <h2>All workspaces</h2>
      </div>
      <ul className="cards" aria-label="Loading workspaces" aria-busy="true">
        {[0, 1, 2].map((i) => (
          <li key={i} className="card card-skeleton" />
        ))}
      </ul>
    </>
  );
}

interface ReadyProps {
  data: ListWorkspacesResponse;
  projects: Project[];
  stale: string | null;
  notices: TurnNotices;
  onFork: () => void;
  /** Opens the settings of that project. */
  onSettings: (project: string) => void;
  onChanged: () => void;
}

function Ready({ data, projects, stale, notices, onFork, onSettings, onChanged }: ReadyProps) {
  const { workspaces, capacity } = data;
  const firstProject = allProjects(projects, workspaces)[0];
  const full = isFull(capacity);
  const reason = full ? capacityReason(capacity, workspaces) : null;
  const visible = workspaces.filter((w) => w.state !== 'gone').sort(byActivity);
  const groups = groupByProject(visible);

  return (
    <>
      <div className="toolbar">
        <h2>All workspaces</h2>
        <Meter capacity={capacity} />
        <span className="toolbar-spacer" />
        {/* Opens on the first project; the dialog picks another, so projects without workspaces are reachable too. */}
        {firstProject !== undefined ? (
          <button className="btn" onClick={() => onSettings(firstProject)}>
            Project settings
          </button>
        ) : null}
        {/* At the cap the dialog offers a place in line instead. */}
        <button className="btn btn-primary" onClick={onFork} aria-describedby={full ? 'cap-reason' : undefined}>
          New workspace
        </button>
      </div>
      {reason ? (
        <div className="cap-reason" id="cap-reason" role="status">
          <span aria-hidden="true">⚠</span>
          <p>
            <strong>New workspaces wait in line.</strong> {reason}
          </p>
        </div>
      ) : null}
      {stale ? (
        <p className="field-error" role="status">
          Showing the last known state; refreshing failed: {stale}
        </p>
      ) : null}
      {visible.length === 0 ? (
        <div className="centered">
          <Notice
            tone="empty"
            title="No workspaces yet"
            actions={
              <button className="btn btn-primary" onClick={onFork}>
                New workspace
              </button>
            }
          >
            <p>
              {projects.length === 0
                ? 'No project has been added yet. The demo project appears here a few seconds after the first start.'
                : 'Create one to put an agent to work on its own branch.'}
            </p>
          </Notice>
        </div>
      ) : (
        groups.map(([project, list]) => (
          <section key={project} aria-labelledby={`proj-${project}`} className="project-group">
            {groups.length > 1 ? (
              <div className="project-heading-row">
                <h3 className="project-heading" id={`proj-${project}`}>
                  {project}
                </h3>
                <button type="button" className="btn-link" onClick={() => onSettings(project)}>
                  Settings<span className="sr-only"> of {project}</span>
                </button>
              </div>
            ) : (
              <h3 className="sr-only" id={`proj-${project}`}>
                Project {project}
              </h3>
            )}
            <ul className="cards">
              {list.map((w) => (
                <WorkspaceCard key={w.slug} workspace={w} fullReason={reason} turnNotice={notices[w.slug] ?? null} onChanged={onChanged} />
              ))}
            </ul>
          </section>
        ))
      )}
    </>
  );
}

function groupByProject(list: Workspace[]): Array<[string, Workspace[]]> {
  const m = new Map<string, Workspace[]>();
  for (const w of list) m.set(w.project, [...(m.get(w.project) ?? []), w]);
  return [...m.entries()].sort(([a], [b]) => a.localeCompare(b));
}

function Meter({ capacity }: { capacity: Capacity }) {
  const { running, creating, cap, queued } = capacity;
  // Warm sandboxes wait for the next fork; they give way to any workspace, so they never make the meter full.
  const warm = capacity.warm ?? 0;
  const full = isFull(capacity);
  const pct = (n: number) => `${Math.min(100, (n / cap) * 100)}%`;
  return (
    <div className={full ? 'meter meter-full' : 'meter'}>
      <div className="meter-bar" role="meter" aria-valuemin={0} aria-valuemax={cap} aria-valuenow={running + creating} aria-label="Sandboxes in use">
        <span className="meter-fill" style={{ width: pct(running) }} />
        <span className="meter-fill meter-fill-creating" style={{ width: pct(creating) }} />
        {warm ? <span className="meter-fill meter-fill-warm" style={{ width: pct(Math.min(warm, Math.max(0, cap - running - creating))) }} /> : null}
      </div>
      <span className="meter-label">
        <strong>
          {running} / {cap}
        </strong>{' '}
        sandboxes running{creating ? `, ${creating} starting` : ''}
        {queued ? `, ${queued} waiting in line` : ''}
        {warm ? `, ${warm} warm` : ''}
      </span>
    </div>
  );
}
