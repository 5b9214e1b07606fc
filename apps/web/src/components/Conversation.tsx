// A workspace's conversation behind its lifecycle: the thread when running, otherwise what is going on and how to reopen.
'use client';

import Link from 'next/link';
import { useCallback, useEffect, useState, type ReactNode } from 'react';
import { parseSlug, type Workspace } from '@grove/contracts';
import { api, isApiError, messageOf, type ApiError } from '../lib/api.ts';
import { BUSY_FOR_EVERYONE, capacityReason } from '../lib/capacity.ts';
import { onStartRequest, takeStart } from '../lib/start-intents.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { useLifecycleProgress } from '../lib/use-progress.ts';
import { Composer, UnsentMessages, type Held } from './Composer.tsx';
import { ForkSteps } from './ForkSteps.tsx';
import { EarlierMessages } from './EarlierMessages.tsx';
import { ErrorText, Notice, SignInNotice } from './ui.tsx';
import { ThreadView, type Audience } from './ThreadView.tsx';
import './Conversation.css';

/** States that change by themselves. Their events say when; this slow re-read is only a safety net. */
const SETTLING = new Set(['queued', 'creating', 'tearing-down']);
const SAFETY_RECHECK_MS = 30_000;

interface ConversationProps {
  slug: string;
  audience: Audience;
  /** Lets the page header follow the workspace (state badge, buttons). */
  onWorkspace?: (w: Workspace) => void;
  /** Bumped by the parent after it changed the workspace (stop, reopen) so this view re-reads it. */
  revision?: number;
  /** This conversation is the one on screen (tabs keep the others mounted but hidden). */
  active?: boolean;
  onBusyChange?: (busy: boolean) => void;
  /** Engineers close the tab of a torn-down workspace from here. */
  onCloseTab?: () => void;
  /**
   * A project's conversation that failed to start or was closed can begin afresh (`/`: its first message begins a
   * new default workspace). Only offered to everyone; engineers tear down and fork.
   */
  onBeginAgain?: () => void;
}

interface Reopen {
  busy: boolean;
  /** Events up to this id belong to earlier starts; the progress shown is this one's. */
  since: number | null;
  error: string | null;
}

/** Why a start was refused, with the way out when the cap is the reason (for engineers: which workspaces to stop). */
async function explainStartError(e: unknown, audience: Audience): Promise<string> {
  if (!isApiError(e) || e.code !== 'capacity_reached') return messageOf(e);
  if (audience !== 'engineer') return BUSY_FOR_EVERYONE;
  const running = typeof e.body.running === 'number' ? e.body.running : 0;
  const cap = typeof e.body.cap === 'number' ? e.body.cap : running;
  try {
    const { workspaces, capacity } = await api.listWorkspaces();
    return capacityReason(capacity, workspaces);
  } catch {
    return capacityReason({ running, cap }, []);
  }
}

export function Conversation({ slug, audience, onWorkspace, revision = 0, active = true, onBusyChange, onCloseTab, onBeginAgain }: ConversationProps) {
  const [workspace, setWorkspace] = useState<Workspace | null>(null);
  const [error, setError] = useState<ApiError | Error | null>(null);
  const [reopen, setReopen] = useState<Reopen>({ busy: false, since: null, error: null });
  const elapsed = useElapsed(reopen.busy);
  const engineer = audience === 'engineer';
  const state = workspace?.state;
  // Read while the workspace is not running, so the history is there before a start is asked for.
  const watch = useLifecycleProgress(state && state !== 'running' ? slug : null, reopen.since === null ? {} : { since: reopen.since, op: 'start' });

  const show = useCallback(
    (w: Workspace) => {
      setWorkspace(w);
      setError(null);
      onWorkspace?.(w);
    },
    [onWorkspace],
  );

  const refresh = useCallback(async () => {
    try {
      show((await api.getWorkspace(slug)).workspace);
    } catch (e) {
      setError(e instanceof Error ? e : new Error(messageOf(e)));
    }
  }, [slug, show]);

  useEffect(() => {
    void refresh();
  }, [refresh, revision]);

  // Someone stopped, started or tore it down (here, in another tab, from the CLI): read it again.
  useEventTrigger((e) => e.slug === slug, () => void refresh());

  useEffect(() => {
    if (!state || !SETTLING.has(state)) return;
    const t = setInterval(() => void refresh(), SAFETY_RECHECK_MS);
    return () => clearInterval(t);
  }, [state, refresh]);

  useEffect(() => {
    if (state !== 'running') onBusyChange?.(false);
  }, [state, onBusyChange]);

  const start = useCallback(
    async (since: number) => {
      setReopen({ busy: true, since, error: null });
      // The server reserves the slot at once; say so in the header before its event arrives.
      if (workspace?.state === 'stopped') onWorkspace?.({ ...workspace, state: 'creating', failureReason: null });
      try {
        const { workspace: w } = await api.start(slug);
        show(w);
        setReopen((r) => ({ ...r, busy: false }));
      } catch (e) {
        const message = await explainStartError(e, audience);
        setReopen((r) => ({ ...r, busy: false, error: message }));
        void refresh();
      }
    },
    [slug, audience, show, refresh, workspace, onWorkspace],
  );

  // "Open and start if stopped" (the URL, a new tab, /resume): done once the trail is read, so the
  // progress shown is this start's and not the last one's.
  const [nudge, setNudge] = useState(0);
  useEffect(() => onStartRequest(() => setNudge((n) => n + 1)), []);
  useEffect(() => {
    if (!state || reopen.busy) return;
    if (state !== 'stopped') {
      // Running or starting already: the request is fulfilled; failed or gone cannot be started.
      if (state !== 'creating') takeStart(slug);
      return;
    }
    if (!watch.loaded && !watch.error) return;
    if (takeStart(slug)) void start(watch.lastId);
  }, [state, slug, watch.loaded, watch.error, watch.lastId, reopen.busy, start, nudge]);

  if (error && isApiError(error) && error.status === 401) return <Centered><SignInNotice /></Centered>;
  if (error && isApiError(error) && error.status === 404) {
    return (
      <Centered>
        <Notice tone="empty" title={engineer ? 'No such workspace' : 'This conversation does not exist'}>
          <p>{engineer ? `There is no workspace "${parseSlug(slug).name}" in ${parseSlug(slug).project}. It may have been torn down.` : 'The link may be old.'}</p>
          <p>
            <Link href={engineer ? '/workspaces' : '/'}>{engineer ? 'See all workspaces' : 'Go to the main conversation'}</Link>
          </p>
          {onCloseTab ? (
            <p>
              <button className="btn" onClick={onCloseTab}>
                Close this tab
              </button>
            </p>
          ) : null}
        </Notice>
      </Centered>
    );
  }
  if (error && !workspace) {
    return (
      <Centered>
        <Notice tone="error" title="Grove could not be reached" actions={<button className="btn" onClick={() => void refresh()}>Try again</button>}>
          <p>{error.message}</p>
        </Notice>
      </Centered>
    );
  }
  if (!workspace) {
    return (
      <Centered>
        <Notice tone="wait" title="Opening…" />
      </Centered>
    );
  }

  const steps = engineer ? <ForkSteps watch={watch} label={`Progress of ${workspace.isDefault ? workspace.project : workspace.name}`} /> : null;

  if (workspace.state === 'running') {
    return (
      <ThreadView
        key={slug}
        slug={slug}
        audience={audience}
        active={active}
        onBusyChange={onBusyChange}
        onDisconnect={() => void refresh()}
        emptyHint={engineer ? 'Send the first message to this workspace’s agent.' : ASK_ANYTHING}
      />
    );
  }

  // Paused or starting: what was said stays in view, and what is written now waits and goes out once it is open
  // (sending to a paused one reopens it).
  const held = (notice: ReactNode, starting: boolean) => (
    <HeldView slug={slug} audience={audience} held={{ starting, onQueued: () => (starting || reopen.busy ? undefined : void start(watch.lastId)) }}>
      {notice}
      <EarlierMessages slug={workspace.slug} />
    </HeldView>
  );

  if (reopen.busy || workspace.state === 'creating') {
    const reopening = reopen.busy || watch.op === 'start';
    return held(
      <Notice
        tone="wait"
        title={engineer ? (reopening ? 'Reopening the workspace' : 'The workspace is starting') : 'Getting things ready'}
      >
        <p>
          {engineer
            ? 'Its sandbox and agent are coming up; the thread opens here as soon as it is running.'
            : 'Waking up the agent. This takes a few seconds; the conversation opens by itself.'}
          {reopen.busy ? <span className="muted"> {elapsed} s</span> : null}
        </p>
        {steps}
        {watch.timedOut ? <p className="muted">This is taking longer than usual.</p> : null}
      </Notice>,
      true,
    );
  }

  switch (workspace.state) {
    case 'queued':
      // Forked (or reopened) at the cap with "wait in line": it starts by itself when a slot frees.
      return held(
        <Notice tone="wait" title={engineer ? `Waiting in line for a sandbox (#${workspace.queuePosition ?? '?'})` : 'Waiting for a free place'}>
          <p>
            {engineer
              ? 'Every sandbox is in use. It starts by itself as soon as one frees; stopping another workspace frees one.'
              : 'Everyone’s agents are busy right now. It starts by itself in a moment; the conversation opens then.'}
          </p>
        </Notice>,
        true,
      );
    case 'stopped': {
      const failedBefore = reopen.error ?? (watch.failed && reopen.since !== null ? watch.failed : null);
      return held(
        <Notice
          tone={failedBefore ? 'error' : 'info'}
          title={failedBefore ? (engineer ? 'The workspace could not be reopened' : 'The conversation could not be reopened') : engineer ? 'This workspace is stopped' : 'This conversation is paused'}
          actions={
            <button className="btn btn-primary" onClick={() => void start(watch.lastId)}>
              {failedBefore ? 'Try again' : 'Reopen'}
            </button>
          }
        >
          {/* A reason is recorded only when it stopped on its own (a crash, a Docker restart): then "put to sleep" is not true. */}
          {engineer ? (
            <>
              {workspace.failureReason ? <p>It stopped on its own: {workspace.failureReason}.</p> : null}
              <p>Stopped workspaces keep their files, thread and agent session. Reopening starts the sandbox again.</p>
            </>
          ) : workspace.failureReason ? (
            <>
              <p>It stopped unexpectedly. Everything is kept: write below, or reopen it, to carry on where you left off.</p>
              <details className="fine-print">
                <summary>Details for whoever runs Grove</summary>
                <p>{workspace.failureReason}</p>
              </details>
            </>
          ) : (
            <p>It was put to sleep to save resources. Everything is kept: write below, or reopen it, to carry on where you left off.</p>
          )}
          <ErrorText message={failedBefore} className="error-text" />
          {failedBefore && reopen.since !== null ? steps : null}
        </Notice>,
        false,
      );
    }
    case 'failed':
      // The server does not restart a failed workspace (it answers "tear it down and fork again").
      return (
        <Centered>
          <Notice
            tone="error"
            title={engineer ? 'This workspace failed' : 'Something went wrong'}
            actions={
              engineer ? (
                <Link className="btn" href="/workspaces">
                  Go to workspaces
                </Link>
              ) : onBeginAgain ? (
                <button className="btn btn-primary" onClick={onBeginAgain}>
                  Try again
                </button>
              ) : (
                <button className="btn" onClick={() => void refresh()}>
                  Check again
                </button>
              )
            }
          >
            {engineer ? (
              <>
                <p>{workspace.failureReason ?? 'No reason was recorded.'}</p>
                <p className="muted">A failed workspace cannot be reopened: tear it down (its branch {workspace.branch} is kept) and fork again.</p>
                <UnsentMessages slug={slug} />
              </>
            ) : (
              <>
                <p>
                  The assistant could not be started.{' '}
                  {onBeginAgain ? 'Try again; if it fails again, tell whoever runs Grove for this project.' : 'Please tell whoever runs Grove for this project.'}
                </p>
                <UnsentMessages slug={slug} />
                {workspace.failureReason ? (
                  <details className="fine-print">
                    <summary>Details for whoever runs Grove</summary>
                    <p>{workspace.failureReason}</p>
                  </details>
                ) : null}
              </>
            )}
          </Notice>
        </Centered>
      );
    case 'tearing-down':
    case 'gone':
      return (
        <Centered>
          <Notice
            tone="empty"
            title={engineer ? 'This workspace was torn down' : 'This conversation was closed'}
            actions={
              onCloseTab ? (
                <button className="btn" onClick={onCloseTab}>
                  Close this tab
                </button>
              ) : !engineer && onBeginAgain ? (
                <button className="btn btn-primary" onClick={onBeginAgain}>
                  Start a new conversation
                </button>
              ) : undefined
            }
          >
            <p>{engineer ? `Its branch ${workspace.branch} is kept.` : 'Its history is archived.'}</p>
            <UnsentMessages slug={slug} />
            {onBeginAgain && !engineer ? null : (
              <p>
                <Link href={engineer ? '/workspaces' : '/'}>{engineer ? 'See all workspaces' : 'Go to the main conversation'}</Link>
              </p>
            )}
          </Notice>
        </Centered>
      );
  }
}

/** What an empty conversation tells everyone (and a project's first-message page). */
export const ASK_ANYTHING = 'Ask anything about this project. The agent can read and change its files, and will tell you what it did.';

/** The held composer queues everything (Composer's held mode); this only answers if it were ever asked to send. */
const notOpen = async () => ({ ok: false, error: 'The conversation is not open yet.' });

/** A conversation that is not open: its notice (and what was said) above a composer in held mode. */
export function HeldView({ slug, audience, held, children }: { slug: string; audience: Audience; held: Held; children: ReactNode }) {
  return (
    <div className="held">
      <div className="paused">{children}</div>
      <Composer slug={slug} audience={audience} turnRunning={false} sending={false} loaded={false} onSend={notOpen} held={held} />
    </div>
  );
}

function Centered({ children }: { children: ReactNode }) {
  return <div className="centered">{children}</div>;
}
