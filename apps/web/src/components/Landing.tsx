// The default screen: the project's main conversation, one continuous thread, in plain words.
'use client';

import Link from 'next/link';
import { useSearchParams } from 'next/navigation';
import { useCallback, useEffect, useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { Conversation } from './Conversation.tsx';
import { ResumeButton } from './Resume.tsx';
import { Notice, Shell, SignInNotice } from './ui.tsx';

/** Lifecycle events say when the project appears; this slow re-read covers a feed that is down. */
const RECHECK_MS = 15_000;

type Found = { kind: 'loading' } | { kind: 'signin' } | { kind: 'error'; message: string } | { kind: 'none' } | { kind: 'found'; workspace: Workspace };

/**
 * The default workspace to land in: the asked project's (`/?project=`, from the conversation picker), else the first
 * project's by name, so the choice is stable across reloads.
 */
function pickDefault(workspaces: Workspace[], wanted: string | null): Workspace | undefined {
  const defaults = workspaces.filter((w) => w.isDefault).sort((a, b) => a.project.localeCompare(b.project));
  return defaults.find((w) => w.project === wanted) ?? defaults[0];
}

export function Landing() {
  const [found, setFound] = useState<Found>({ kind: 'loading' });
  const wanted = useSearchParams().get('project');

  const look = useCallback(async () => {
    try {
      const { workspaces } = await api.listWorkspaces();
      const w = pickDefault(workspaces, wanted);
      setFound(w ? { kind: 'found', workspace: w } : { kind: 'none' });
    } catch (e) {
      if (isApiError(e) && e.status === 401) setFound({ kind: 'signin' });
      else setFound({ kind: 'error', message: messageOf(e) });
    }
  }, [wanted]);

  useEffect(() => {
    void look();
  }, [look]);

  // The server sets the project up in the background at first start; look again until it is there.
  const waiting = found.kind === 'none' || found.kind === 'error';
  useEventTrigger(() => true, () => void look(), waiting);
  useEffect(() => {
    if (!waiting) return;
    const t = setInterval(() => void look(), RECHECK_MS);
    return () => clearInterval(t);
  }, [waiting, look]);

  const project = found.kind === 'found' ? found.workspace.project : null;
  const nav = (
    <>
      <ResumeButton />
      <Link href="/workspaces" className="navlink">
        Workspaces
      </Link>
    </>
  );

  return (
    <Shell title={project ?? 'Welcome'} subtitle={project ? 'Your conversation with the project’s agent' : undefined} nav={nav} fill>
      {found.kind === 'loading' ? (
        <div className="centered">
          <Notice tone="wait" title="Opening…" />
        </div>
      ) : found.kind === 'signin' ? (
        <div className="centered">
          <SignInNotice />
        </div>
      ) : found.kind === 'error' ? (
        <div className="centered">
          <Notice tone="error" title="Grove could not be reached" actions={<button className="btn" onClick={() => void look()}>Try again</button>}>
            <p>{found.message}</p>
            <p className="muted">Grove keeps trying by itself.</p>
          </Notice>
        </div>
      ) : found.kind === 'none' ? (
        <div className="centered">
          <Notice tone="wait" title="Getting things ready">
            <p>The project is being set up. The conversation opens here by itself when it is ready.</p>
          </Notice>
        </div>
      ) : (
        <Conversation key={found.workspace.slug} slug={found.workspace.slug} audience="everyone" />
      )}
    </Shell>
  );
}

/** What `/` shows before the browser has read its address (the prerendered page): the same "Opening…". */
export function LandingOpening() {
  return (
    <Shell title="Welcome" fill>
      <div className="centered">
        <Notice tone="wait" title="Opening…" />
      </div>
    </Shell>
  );
}
