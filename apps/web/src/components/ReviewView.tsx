// The Review view of a workspace tab: every change against the fork point on one scrollable page, file by file, with
// a list to jump to each file; ahead/behind and uncommitted work; and the pull request beside Publish: its state, the
// checks (CI) of its head commit, and what its end does to the workspace (docs/git-flow.md, Dashboard).
// The diff is read when the view is shown and after the workspace's own events; the pull request (a remote forge)
// when the view is shown, on Refresh and after a publish or the watcher's events, never on a timer.
'use client';

import { useCallback, useEffect, useId, useRef, useState } from 'react';
import type { DiffResponse, GroveEvent, PullRequestResponse } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { parseUnifiedDiff, type DiffFile } from '../lib/diff.ts';
import { aheadBehind, changesSummary, refreshesChanges, type Explained } from '../lib/git-changes.ts';
import { CHECKS_LABEL, CHECK_LABEL, checksCounts, cleanupOutcome, cleanupSentence, explainPullRequestError, refreshesPullRequest, type CleanupOutcome } from '../lib/review.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { useWorkbench } from '../lib/workbench.ts';
import { FileDiff, FileLabel } from './FileDiff.tsx';
import { GitErrorBox } from './GitErrorBox.tsx';
import { PrLink } from './PrLink.tsx';
import { PublishDialog } from './PublishDialog.tsx';
import { Spinner } from './ui.tsx';
import type { ViewProps } from './WorkspacePane.tsx';
import './diff.css';
import './ReviewView.css';

type DiffLoad = { kind: 'loading' } | { kind: 'ready'; diff: DiffResponse; files: DiffFile[] } | { kind: 'error'; message: string };
type PrLoad = { kind: 'loading' } | { kind: 'ready'; pr: PullRequestResponse } | { kind: 'error'; error: Explained };

/** The events that tell what the watcher did once the pull request ended. */
const OUTCOME_TYPES = ['workspace.pr_state', 'workspace.kept', 'workspace.cleaned'] as const;

export function ReviewView({ slug, workspace: w, visible }: ViewProps) {
  const [diff, setDiff] = useState<DiffLoad>({ kind: 'loading' });
  const [pr, setPr] = useState<PrLoad>({ kind: 'loading' });
  const [outcome, setOutcome] = useState<CleanupOutcome | null>(null);
  const [publishing, setPublishing] = useState(false);
  const baseId = useId();
  const diffSeq = useRef(0);
  const prSeq = useRef(0);
  const workbench = useWorkbench();

  const readDiff = useCallback(async () => {
    const mine = ++diffSeq.current;
    try {
      const d = await api.diff(slug);
      // An older read that answers late must not replace a newer one.
      if (mine === diffSeq.current) setDiff({ kind: 'ready', diff: d, files: parseUnifiedDiff(d.patch) });
    } catch (e) {
      if (mine === diffSeq.current) setDiff({ kind: 'error', message: messageOf(e) });
    }
  }, [slug]);

  const readPr = useCallback(async () => {
    const mine = ++prSeq.current;
    setPr((p) => (p.kind === 'ready' ? p : { kind: 'loading' }));
    try {
      const r = await api.pullRequest(slug);
      if (mine === prSeq.current) setPr({ kind: 'ready', pr: r });
    } catch (e) {
      if (mine !== prSeq.current) return;
      setPr({ kind: 'error', error: isApiError(e) ? explainPullRequestError(e, w.project) : { title: 'The pull request could not be read.', fix: 'Refresh to try again.', detail: messageOf(e) } });
    }
  }, [slug, w.project]);

  // Shown (again): both are read. Hidden, nothing is, and the events below wait for the next time it is shown.
  useEffect(() => {
    if (!visible) return;
    void readDiff();
    void readPr();
  }, [visible, readDiff, readPr, w.state]);
  useEventTrigger((e) => refreshesChanges(e, slug), () => void readDiff(), visible);
  useEventTrigger((e) => refreshesPullRequest(e, slug), () => void readPr(), visible);

  const stored = w.pullRequest ?? null;
  const live = pr.kind === 'ready' ? pr.pr.pullRequest : null;
  const state = live?.state ?? stored?.state ?? null;
  const ended = state === 'merged' || state === 'closed';

  // Once the pull request ended, what the watcher did is in the trail; read again with every pull-request read.
  useEffect(() => {
    if (!ended || !visible) return;
    let on = true;
    Promise.all(OUTCOME_TYPES.map((t) => api.events(slug, undefined, t).then((r) => r.events))).then(
      (lists) => on && setOutcome(cleanupOutcome(([] as GroveEvent[]).concat(...lists), w.createdAt)),
      // Without the trail the view says what the cleanup will do instead of what it did.
      () => undefined,
    );
    return () => {
      on = false;
    };
  }, [ended, visible, slug, w.createdAt, pr]);

  const refresh = () => {
    void readDiff();
    void readPr();
  };
  const d = diff.kind === 'ready' ? diff.diff : null;
  const canPublish = w.state === 'running' || w.state === 'stopped';
  const fileId = (i: number) => `${baseId}-file-${i}`;
  const jump = (i: number) => {
    const el = document.getElementById(fileId(i));
    el?.scrollIntoView({ block: 'start' });
    // The heading takes the focus, so the keyboard goes on from the file it jumped to.
    el?.querySelector<HTMLElement>('.review-file-title')?.focus();
  };

  return (
    <section className="review" aria-label="Review">
      <div className="review-bar">
        <h3 className="review-heading">Review</h3>
        <span className="review-facts" aria-live="polite">
          {diff.kind === 'loading' ? (
            <>
              <Spinner /> reading…
            </>
          ) : diff.kind === 'error' ? (
            <span className="error-text" role="alert">
              The changes could not be read: {diff.message}
            </span>
          ) : d ? (
            <>
              <span className="review-summary">{changesSummary(d)}</span>
              <span aria-hidden="true">·</span>
              <span>{aheadBehind(d)}</span>
            </>
          ) : null}
        </span>
        <span className="review-actions">
          <button type="button" className="btn btn-small" onClick={refresh} aria-label="Refresh the review">
            Refresh
          </button>
          {canPublish ? (
            <button type="button" className="btn btn-small btn-primary" onClick={() => setPublishing(true)}>
              Publish
            </button>
          ) : null}
        </span>
      </div>

      <div className="review-scroll">
        <section className="review-pr" aria-label="Pull request">
          {pr.kind === 'loading' && !stored ? (
            <p className="review-muted">
              <Spinner /> Reading the pull request…
            </p>
          ) : pr.kind === 'error' ? (
            <>
              {stored ? <p className="review-pr-head"><PrLink pr={stored} /></p> : null}
              <GitErrorBox error={pr.error} className="review-alert" />
            </>
          ) : live ? (
            <>
              <p className="review-pr-head"><PrLink pr={live} /></p>
              {pr.kind === 'ready' && pr.pr.checks ? <Checks checks={pr.pr.checks} /> : <p className="review-muted">The forge names no head commit, so there are no checks to show.</p>}
              {ended && pr.kind === 'ready' && (live.state === 'merged' || live.state === 'closed') ? (
                <p className="review-cleanup" role="status">
                  {cleanupSentence({ state: live.state, branch: w.branch, cleanup: pr.pr.cleanup, outcome })}
                </p>
              ) : null}
            </>
          ) : (
            <p className="review-muted">Not published yet. Publish pushes {w.branch} and opens a pull request into the default branch.</p>
          )}
        </section>

        {d && d.uncommitted ? (
          <p className="review-uncommitted" role="note">
            Uncommitted work: some of these changes are not checkpointed on {d.branch} yet. Publish checkpoints them first.
          </p>
        ) : null}
        {d && d.truncated ? <p className="diff-status">The changes are long: only the first 1 MB is shown.</p> : null}
        {d && d.files.length === 0 ? <p className="diff-status">Nothing changed since this workspace forked from {d.defaultBranch}.</p> : null}

        {d && d.files.length > 0 ? (
          <div className="review-layout">
            <nav className="review-nav" aria-label="Changed files">
              <ul className="changes-files">
                {d.files.map((f, i) => (
                  <li key={f.path}>
                    <button type="button" className="changes-file" onClick={() => jump(i)}>
                      <FileLabel file={f} />
                    </button>
                  </li>
                ))}
              </ul>
            </nav>
            <div className="review-files">
              {d.files.map((f, i) => (
                <article key={f.path} id={fileId(i)} className="review-file" aria-label={f.path}>
                  <header className="review-file-head">
                    <h4 className="review-file-title" tabIndex={-1}>
                      <FileLabel file={f} />
                    </h4>
                    {f.status !== 'D' ? (
                      <button type="button" className="btn btn-small" onClick={() => workbench.openFile(f.path)} aria-label={`Open file ${f.path}`}>
                        Open file
                      </button>
                    ) : null}
                  </header>
                  <FileDiff path={f.path} file={diff.kind === 'ready' ? diff.files.find((x) => x.path === f.path) : undefined} truncated={d.truncated} />
                </article>
              ))}
            </div>
          </div>
        ) : null}
      </div>

      {publishing ? (
        <PublishDialog
          workspace={w}
          onClose={() => setPublishing(false)}
          onPublished={() => {
            void readDiff();
            void readPr();
          }}
        />
      ) : null}
    </section>
  );
}

function Checks({ checks: c }: { checks: NonNullable<PullRequestResponse['checks']> }) {
  return (
    <div className="review-checks">
      <p className={`review-checks-state checks-${c.state}`}>
        Checks: {CHECKS_LABEL[c.state]}
        {c.total > 0 ? ` (${checksCounts(c)})` : ''}
      </p>
      {c.checks.length > 0 ? (
        <ul className="review-check-list" aria-label="Checks">
          {c.checks.map((k, i) => (
            <li key={`${k.name}-${i}`} className={`review-check check-${k.state}`}>
              <span className="review-check-state">{CHECK_LABEL[k.state]}</span>{' '}
              {k.url ? (
                <a href={k.url} target="_blank" rel="noopener noreferrer">
                  {k.name}
                </a>
              ) : (
                <span>{k.name}</span>
              )}
              {k.description ? <span className="review-muted"> — {k.description}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
      {c.total > c.checks.length ? <p className="review-muted">and {c.total - c.checks.length} more on the forge.</p> : null}
    </div>
  );
}
