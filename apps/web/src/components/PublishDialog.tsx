// Publish a workspace: checkpoint what is not saved, push its branch, open (or update) its pull request, with the
// steps shown as the workspace's events arrive and every refusal explained. Opened from the Changes panel and the
// Review view.
'use client';

import { useEffect, useId, useState, type FormEvent } from 'react';
import type { PullRequest, Workspace } from '@grove/contracts';
import { api } from '../lib/api.ts';
import { eventFeed } from '../lib/events.ts';
import { PR_STATE_LABEL, type Explained } from '../lib/git-changes.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { FormActions, Modal } from './Dialog.tsx';
import { GitErrorBox, explainError } from './GitErrorBox.tsx';
import { Spinner } from './ui.tsx';
import './PublishDialog.css';

type Step = 'checkpoint' | 'push' | 'pull-request';
const STEPS: Array<{ step: Step; label: string }> = [
  { step: 'checkpoint', label: 'Checkpoint the changes' },
  { step: 'push', label: 'Push the branch to the remote' },
  { step: 'pull-request', label: 'Open the pull request' },
];

export function PublishDialog({ workspace: w, onClose, onPublished }: { workspace: Workspace; onClose: () => void; onPublished: (pr: PullRequest) => void }) {
  const [title, setTitle] = useState('');
  const [body, setBody] = useState('');
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<Set<Step>>(new Set());
  const [error, setError] = useState<Explained | null>(null);
  const [pr, setPr] = useState<PullRequest | null>(null);
  const elapsed = useElapsed(busy);
  const titleId = useId();
  const bodyId = useId();

  // Progress from the workspace's own events while the request runs: the checkpoint, then the push.
  useEffect(() => {
    if (!busy) return;
    return eventFeed().subscribe({
      onEvent: (e) => {
        if (e.slug !== w.slug) return;
        if (e.type === 'workspace.checkpoint') setDone((s) => new Set(s).add('checkpoint'));
        if (e.type === 'workspace.pushed') setDone((s) => new Set(s).add('checkpoint').add('push'));
      },
    });
  }, [busy, w.slug]);

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    setBusy(true);
    setDone(new Set());
    setError(null);
    try {
      const r = await api.publish(w.slug, { ...(title.trim() ? { title: title.trim() } : {}), ...(body.trim() ? { body } : {}) });
      setDone(new Set(['checkpoint', 'push', 'pull-request']));
      setPr(r.pullRequest);
      onPublished(r.pullRequest);
    } catch (e) {
      setError(explainError(e, w.project));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Modal title={`Publish ${w.name}`} onClose={onClose}>
      {pr ? (
        <div role="status">
          <p className="dialog-lead">
            Published. Pull request #{pr.number} is {PR_STATE_LABEL[pr.state]}:{' '}
            <a href={pr.url} target="_blank" rel="noopener noreferrer">
              {pr.url}
            </a>
          </p>
          <div className="dialog-actions">
            <button type="button" className="btn btn-primary" onClick={onClose} autoFocus>
              Close
            </button>
          </div>
        </div>
      ) : (
        <form onSubmit={(ev) => void submit(ev)}>
          <p className="dialog-lead">
            Checkpoints what is not saved yet, pushes {w.branch} to the project&apos;s remote and opens a pull request into the default branch (or updates the open one).
          </p>
          <div className="field">
            <label htmlFor={titleId}>
              Title <span className="optional">(optional)</span>
            </label>
            <input id={titleId} value={title} onChange={(e) => setTitle(e.target.value)} placeholder={`${w.name} (from Grove workspace ${w.slug})`} maxLength={256} autoFocus disabled={busy} />
          </div>
          <div className="field">
            <label htmlFor={bodyId}>
              Description <span className="optional">(optional)</span>
            </label>
            <textarea id={bodyId} value={body} onChange={(e) => setBody(e.target.value)} rows={4} maxLength={65_536} disabled={busy} />
          </div>
          {busy ? (
            <ol className="git-steps" aria-label="Publishing">
              {STEPS.map(({ step, label }, i) => {
                const isDone = done.has(step);
                const current = !isDone && STEPS.slice(0, i).every((s) => done.has(s.step));
                return (
                  <li key={step} className={isDone ? 'git-step-done' : current ? 'git-step-now' : undefined}>
                    {isDone ? '✓ ' : current ? <Spinner /> : null} {label}
                    {current ? ` (${elapsed} s)` : ''}
                  </li>
                );
              })}
            </ol>
          ) : null}
          {error ? <GitErrorBox error={error} /> : null}
          <FormActions label={error ? 'Publish again' : 'Publish'} busyLabel="Publishing…" busy={busy} onCancel={onClose} />
        </form>
      )}
    </Modal>
  );
}
