// `/p/<project>/w/<name>`: one workspace's thread for engineers, with its state and stop / reopen in the header.
'use client';

import Link from 'next/link';
import { useCallback, useState } from 'react';
import { makeSlug, nameSchema, type Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { Conversation } from './Conversation.tsx';
import { Notice, Shell, Spinner, StateBadge } from './ui.tsx';

export function WorkspaceScreen({ project, name }: { project: string; name: string }) {
  const [workspace, setWorkspace] = useState<Workspace | null>(null);
  const [revision, setRevision] = useState(0);
  const [stopping, setStopping] = useState(false);
  const [stopError, setStopError] = useState<string | null>(null);
  const onWorkspace = useCallback((w: Workspace) => setWorkspace(w), []);

  const nav = (
    <>
      {workspace?.state === 'running' ? (
        <button
          className="btn btn-small"
          disabled={stopping}
          onClick={() => {
            setStopping(true);
            setStopError(null);
            api
              .stop(workspace.slug)
              .then((r) => setWorkspace(r.workspace), (e: unknown) => setStopError(messageOf(e)))
              .finally(() => {
                setStopping(false);
                setRevision((n) => n + 1);
              });
          }}
          title="Stop the sandbox; files, thread and agent session are kept"
        >
          {stopping ? <Spinner /> : null}
          {stopping ? 'Stopping…' : 'Stop'}
        </button>
      ) : null}
      <Link href="/workspaces" className="navlink">
        Workspaces
      </Link>
    </>
  );

  // The URL is typed by people: check it with the same rules as the server before building a slug.
  if (!nameSchema.safeParse(project).success || !nameSchema.safeParse(name).success) {
    return (
      <Shell title="Not a workspace address" nav={nav}>
        <div className="centered">
          <Notice tone="empty" title="This address does not name a workspace">
            <p>
              Workspace addresses look like <code>/p/demo/w/fix-login</code>. <Link href="/workspaces">See all workspaces</Link>.
            </p>
          </Notice>
        </div>
      </Shell>
    );
  }

  const slug = makeSlug(project, name);
  const title = name === 'default' ? project : name;
  // State and branch share the second line, which stays visible on phones (unlike other subtitles).
  const subtitle = (
    <span className="topbar-sub-keep">
      {workspace ? <StateBadge state={workspace.state} /> : null}
      <span className="ellipsis">
        {project}
        {workspace ? (
          <>
            {' · '}
            <span className="branch">{workspace.branch}</span>
          </>
        ) : null}
      </span>
    </span>
  );

  return (
    <Shell title={title} subtitle={subtitle} nav={nav} fill>
      {stopError ? (
        <p className="thread-banner error-text" role="alert">
          {stopError}
        </p>
      ) : null}
      <Conversation slug={slug} audience="engineer" onWorkspace={onWorkspace} revision={revision} />
    </Shell>
  );
}
