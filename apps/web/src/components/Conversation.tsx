// A workspace's conversation behind its lifecycle: the thread when running, otherwise what is going on and how to reopen.
'use client';

import Link from 'next/link';
import { useCallback, useEffect, useState, type ReactNode } from 'react';
import { parseSlug, type Workspace } from '@grove/contracts';
import { api, isApiError, messageOf, type ApiError } from '../lib/api.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { Notice, SignInNotice, Spinner } from './ui.tsx';
import { ThreadView, type Audience } from './ThreadView.tsx';

/** States that change by themselves: re-check them, never faster than every 5 s. */
const SETTLING = new Set(['creating', 'tearing-down']);
const RECHECK_MS = 5_000;

interface ConversationProps {
  slug: string;
  audience: Audience;
  /** Lets the page header follow the workspace (state badge, buttons). */
  onWorkspace?: (w: Workspace) => void;
  /** Bumped by the parent after it changed the workspace (stop, reopen) so this view re-reads it. */
  revision?: number;
}

export function Conversation({ slug, audience, onWorkspace, revision = 0 }: ConversationProps) {
  const [workspace, setWorkspace] = useState<Workspace | null>(null);
  const [error, setError] = useState<ApiError | Error | null>(null);
  const [reopening, setReopening] = useState(false);
  const [reopenError, setReopenError] = useState<string | null>(null);
  const elapsed = useElapsed(reopening);
  const engineer = audience === 'engineer';

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

  const state = workspace?.state;
  useEffect(() => {
    if (!state || !SETTLING.has(state)) return;
    const t = setInterval(() => void refresh(), RECHECK_MS);
    return () => clearInterval(t);
  }, [state, refresh]);

  const reopen = async () => {
    setReopening(true);
    setReopenError(null);
    try {
      show((await api.start(slug)).workspace);
    } catch (e) {
      setReopenError(messageOf(e));
      void refresh();
    } finally {
      setReopening(false);
    }
  };

  if (error && isApiError(error) && error.status === 401) return <Centered><SignInNotice /></Centered>;
  if (error && isApiError(error) && error.status === 404) {
    return (
      <Centered>
        <Notice tone="empty" title={engineer ? 'No such workspace' : 'This conversation does not exist'}>
          <p>{engineer ? `There is no workspace "${parseSlug(slug).name}" in ${parseSlug(slug).project}. It may have been torn down.` : 'The link may be old.'}</p>
          <p>
            <Link href={engineer ? '/workspaces' : '/'}>{engineer ? 'See all workspaces' : 'Go to the main conversation'}</Link>
          </p>
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

  const reopenButton = (label: string) => (
    <button className="btn btn-primary" onClick={() => void reopen()} disabled={reopening}>
      {reopening ? <Spinner /> : null}
      {reopening ? `Reopening… ${elapsed} s` : label}
    </button>
  );

  switch (workspace.state) {
    case 'running':
      return (
        <ThreadView
          key={slug}
          slug={slug}
          audience={audience}
          onDisconnect={() => void refresh()}
          emptyHint={engineer ? 'Send the first message to this workspace’s agent.' : 'Ask anything about this project. The agent can read and change its files, and will tell you what it did.'}
        />
      );
    case 'creating':
      return (
        <Centered>
          <Notice tone="wait" title={engineer ? 'The workspace is starting' : 'Getting things ready'}>
            <p>{engineer ? 'Its sandbox and agent are coming up; this view opens the thread as soon as it is running.' : 'This takes a few seconds. The conversation opens by itself.'}</p>
          </Notice>
        </Centered>
      );
    case 'stopped':
      return (
        <Centered>
          <Notice tone="info" title={engineer ? 'This workspace is stopped' : 'This conversation is paused'} actions={reopenButton('Reopen')}>
            <p>
              {engineer
                ? 'Stopped workspaces keep their files, thread and agent session. Reopening starts the sandbox again.'
                : 'It was put to sleep to save resources. Everything is kept: reopen it to carry on where you left off.'}
            </p>
            {reopening ? <p className="muted">Waking up the agent. This usually takes a few seconds.</p> : null}
            {reopenError ? <p className="error-text" role="alert">{reopenError}</p> : null}
          </Notice>
        </Centered>
      );
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
              </>
            ) : (
              <>
                <p>The assistant could not be started. Please tell whoever runs Grove for this project.</p>
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
          <Notice tone="empty" title={engineer ? 'This workspace was torn down' : 'This conversation was closed'}>
            <p>{engineer ? `Its branch ${workspace.branch} is kept.` : 'Its history is archived.'}</p>
            <p>
              <Link href={engineer ? '/workspaces' : '/'}>{engineer ? 'See all workspaces' : 'Go to the main conversation'}</Link>
            </p>
          </Notice>
        </Centered>
      );
  }
}

function Centered({ children }: { children: ReactNode }) {
  return <div className="centered">{children}</div>;
}
