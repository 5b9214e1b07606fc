// The default screen: the project's main conversation, one continuous thread, in plain words.
'use client';

import Link from 'next/link';
import { useSearchParams } from 'next/navigation';
import { useCallback, useEffect, useState } from 'react';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { pickLanding, type LandingChoice } from '../lib/landing.ts';
import { ASK_ANYTHING, Conversation, HeldView } from './Conversation.tsx';
import { ResumeButton } from './Resume.tsx';
import { Notice, Shell, SignInNotice } from './ui.tsx';

/** Lifecycle events say when the project appears; this slow re-read covers a feed that is down. */
const RECHECK_MS = 15_000;

type Found = { kind: 'loading' } | { kind: 'signin' } | { kind: 'error'; message: string } | LandingChoice;

export function Landing() {
  const [found, setFound] = useState<Found>({ kind: 'loading' });
  const wanted = useSearchParams().get('project');

  const look = useCallback(async () => {
    try {
      // Without the project list (an older server, a failed read) the workspaces still name the projects.
      const [{ workspaces }, projects] = await Promise.all([api.listWorkspaces(), api.projectNames()]);
      setFound(pickLanding(workspaces, projects, wanted));
    } catch (e) {
      if (isApiError(e) && e.status === 401) setFound({ kind: 'signin' });
      else setFound({ kind: 'error', message: messageOf(e) });
    }
  }, [wanted]);

  useEffect(() => {
    void look();
  }, [look]);

  // The server sets the project up in the background at first start; look again until it is there (or until another
  // tab begins the conversation of a fresh one).
  const waiting = found.kind === 'none' || found.kind === 'empty' || found.kind === 'error' || found.kind === 'fresh';
  // A fresh project's page only cares about its own slug (another tab begins it); the others about anything.
  const freshProject = found.kind === 'fresh' ? found.project : null;
  useEventTrigger((e) => freshProject === null || e.slug === freshProject, () => void look(), waiting);
  useEffect(() => {
    if (!waiting) return;
    const t = setInterval(() => void look(), RECHECK_MS);
    return () => clearInterval(t);
  }, [waiting, look]);

  const project = found.kind === 'found' ? found.workspace.project : found.kind === 'fresh' ? found.project : null;
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
      ) : found.kind === 'empty' ? (
        <div className="centered">
          <Notice tone="empty" title="No projects yet">
            <p>There is nothing to talk about yet: Grove has no project. The conversation opens here once one is added.</p>
            <p className="muted">
              Whoever runs Grove adds one with <code>grove project add &lt;name&gt; &lt;repository&gt;</code>.
            </p>
          </Notice>
        </div>
      ) : found.kind === 'unknown' ? (
        <div className="centered">
          <Notice tone="empty" title={`There is no project called “${found.project}”`} actions={<Link className="btn" href="/">Open a conversation</Link>}>
            <p>It may have been removed, or the link has a typo.</p>
          </Notice>
        </div>
      ) : found.kind === 'fresh' ? (
        <FirstMessage key={found.project} project={found.project} onBegun={() => void look()} />
      ) : (
        <Conversation
          key={found.workspace.slug}
          slug={found.workspace.slug}
          audience="everyone"
          onBeginAgain={() => setFound({ kind: 'fresh', project: found.workspace.project })}
        />
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

/**
 * A project whose conversation has not begun: what is written waits in the tab's queue (Composer's held mode) while
 * its default workspace is begun; the conversation that then shows sends it once it is open.
 */
function FirstMessage({ project, onBegun }: { project: string; onBegun: () => void }) {
  const [state, setState] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null });
  const begin = useCallback(async () => {
    setState({ busy: true, error: null });
    try {
      await api.ensureDefault(project);
      onBegun();
    } catch (e) {
      setState({ busy: false, error: messageOf(e) });
    }
  }, [project, onBegun]);

  return (
    <HeldView slug={project} audience="everyone" held={{ starting: state.busy, fresh: true, onQueued: () => void begin() }}>
      {state.error ? (
        <Notice tone="error" title="The conversation could not be started" actions={<button className="btn" onClick={() => void begin()}>Try again</button>}>
          <p>{state.error}</p>
          <p className="muted">Your message is kept below and goes out once it starts.</p>
        </Notice>
      ) : (
        <Notice tone={state.busy ? 'wait' : 'empty'} title={state.busy ? 'Getting things ready' : 'Start the conversation'}>
          <p>{ASK_ANYTHING}</p>
          <p className="muted">It wakes up with your first message; that takes a few seconds.</p>
        </Notice>
      )}
    </HeldView>
  );
}
