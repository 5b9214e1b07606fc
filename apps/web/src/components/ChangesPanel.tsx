// The engineer's view of what a workspace changed since it forked: ahead/behind the default branch, work not yet
// checkpointed, each file with its +/- counts and its diff, and the Checkpoint and Publish buttons (docs/git-flow.md).
// Read when asked and after the workspace's own events (a turn wrote files, a checkpoint, a publish); never on a timer.
'use client';

import { useCallback, useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { DiffResponse, PullRequest, Workspace } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { fallbackSentence } from '../lib/base.ts';
import { parseUnifiedDiff, type DiffFile } from '../lib/diff.ts';
import { eventFeed } from '../lib/events.ts';
import { FILE_STATUS, PR_STATE_LABEL, aheadBehind, changesSummary, explainGitError, refreshesChanges, type Explained } from '../lib/git-changes.ts';
import { useBaseFallback } from '../lib/use-base-fallback.ts';
import { useElapsed } from '../lib/use-elapsed.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { Modal } from './Dialog.tsx';
import { OpenFileButton } from './OpenFileButton.tsx';
import { KeepCheckoutSetting, hasKeepCheckout } from './KeepCheckout.tsx';
import { PrLink } from './PrLink.tsx';
import { Spinner } from './ui.tsx';
import './diff.css';
import './ChangesPanel.css';

type Load = { kind: 'loading' } | { kind: 'ready'; diff: DiffResponse; files: DiffFile[] } | { kind: 'error'; message: string };

/** Closed, the panel needs the counts only; the patch is read (up to the API's default 1 MiB) once it is opened. */
const SUMMARY_BYTES = 1024;

function explain(e: unknown, project: string): Explained {
  if (isApiError(e)) return explainGitError(e, project);
  return { title: 'It did not work.', fix: '', detail: messageOf(e) };
}

/** `onChanged`: the workspace's own settings changed (they write no event), so the tab reads it again. */
export function ChangesPanel({ workspace: w, onChanged }: { workspace: Workspace; onChanged?: () => void }) {
  const [open, setOpen] = useState(false);
  const [load, setLoad] = useState<Load>({ kind: 'loading' });
  const [shown, setShown] = useState<Set<string>>(new Set());
  const [dialog, setDialog] = useState<'checkpoint' | 'publish' | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const [published, setPublished] = useState<PullRequest | null>(null);
  const bodyId = useId();
  const seq = useRef(0);

  const read = useCallback(async () => {
    const mine = ++seq.current;
    try {
      const diff = await api.diff(w.slug, open ? undefined : SUMMARY_BYTES);
      // An older read that answers late must not replace a newer one.
      if (mine !== seq.current) return;
      setLoad({ kind: 'ready', diff, files: open ? parseUnifiedDiff(diff.patch) : [] });
    } catch (e) {
      if (mine === seq.current) setLoad({ kind: 'error', message: messageOf(e) });
    }
  }, [w.slug, open]);

  useEffect(() => {
    void read();
  }, [read, w.state]);
  useEventTrigger((e) => refreshesChanges(e, w.slug), () => void read());

  const fallback = useBaseFallback(w);
  const pr = w.pullRequest ?? published;
  const d = load.kind === 'ready' ? load.diff : null;
  const canAct = w.state === 'running' || w.state === 'stopped';
  const toggleFile = (path: string) =>
    setShown((prev) => {
      const next = new Set(prev);
      if (next.has(path)) next.delete(path);
      else next.add(path);
      return next;
    });

  return (
    <section className="git" aria-label="Changes">
      <div className="git-bar">
        <button type="button" className="git-toggle" aria-expanded={open} aria-controls={bodyId} onClick={() => setOpen((o) => !o)}>
          {/* A real element, not ::before: generated content would become part of the button's name. */}
          <span className="git-caret" aria-hidden="true">
            ▸
          </span>
          Changes
        </button>
        <span className="git-facts" aria-live="polite">
          {load.kind === 'loading' ? (
            <>
              <Spinner /> reading…
            </>
          ) : load.kind === 'error' ? (
            <span className="error-text" role="alert">
              The changes could not be read: {load.message}
            </span>
          ) : d ? (
            <>
              <span className="git-summary">{changesSummary(d)}</span>
              <span className="git-sep" aria-hidden="true">
                ·
              </span>
              <span>{aheadBehind(d)}</span>
              <span className="git-sep" aria-hidden="true">
                ·
              </span>
              {d.uncommitted ? <span className="git-uncommitted">uncommitted work</span> : <span className="git-clean">everything checkpointed</span>}
            </>
          ) : null}
        </span>
        {pr ? <PrLink pr={pr} /> : null}
        <span className="git-actions">
          <button type="button" className="btn btn-small" onClick={() => void read()} aria-label="Refresh the changes">
            Refresh
          </button>
          {canAct ? (
            <>
              <button type="button" className="btn btn-small" onClick={() => setDialog('checkpoint')}>
                Checkpoint
              </button>
              <button type="button" className="btn btn-small btn-primary" onClick={() => setDialog('publish')}>
                Publish
              </button>
            </>
          ) : null}
        </span>
      </div>
      {fallback ? <p className="git-fallback">{fallbackSentence(fallback)}</p> : null}
      {note ? (
        <p className="git-note" role="status">
          {note}
        </p>
      ) : null}
      {open ? (
        <div id={bodyId} className="git-body">
          {hasKeepCheckout(w) ? <KeepCheckoutSetting workspace={w} className="git-setting" onChanged={onChanged} /> : null}
          {d && d.files.length === 0 ? <p className="diff-status">Nothing changed since this workspace forked from {d.defaultBranch}.</p> : null}
          {d && d.truncated ? <p className="diff-status">The changes are long: only the first 1 MB is shown.</p> : null}
          {d && d.files.length > 0 ? (
            <ul className="changes-files" aria-label="Changed files">
              {d.files.map((f) => {
                const fileDiff = load.kind === 'ready' ? load.files.find((x) => x.path === f.path) : undefined;
                const diffId = `${bodyId}-${f.path}`;
                return (
                  <li key={f.path}>
                    <div className="changes-file-row">
                    <button type="button" className="changes-file" aria-expanded={shown.has(f.path)} aria-controls={diffId} onClick={() => toggleFile(f.path)}>
                      <span className={`file-status file-${FILE_STATUS[f.status]}`}>{FILE_STATUS[f.status]}</span>
                      <span className="file-path">{f.from ? `${f.from} → ${f.path}` : f.path}</span>
                      {f.additions === null || f.deletions === null ? (
                        <span className="file-counts">not text</span>
                      ) : (
                        <span className="file-counts" aria-label={`${f.additions} lines added, ${f.deletions} removed`}>
                          <span className="count-add">+{f.additions}</span> <span className="count-del">−{f.deletions}</span>
                        </span>
                      )}
                    </button>
                    {f.status === 'D' ? null : <OpenFileButton path={f.path} />}
                    </div>
                    {shown.has(f.path) ? <FileDiff id={diffId} path={f.path} file={fileDiff} truncated={d.truncated} /> : null}
                  </li>
                );
              })}
            </ul>
          ) : null}
        </div>
      ) : null}
      {dialog === 'checkpoint' ? (
        <CheckpointDialog
          workspace={w}
          onClose={() => setDialog(null)}
          onDone={(text) => {
            setDialog(null);
            setNote(text);
            void read();
          }}
        />
      ) : null}
      {dialog === 'publish' ? (
        <PublishDialog
          workspace={w}
          onClose={() => setDialog(null)}
          onPublished={(p) => {
            setPublished(p);
            void read();
          }}
        />
      ) : null}
    </section>
  );
}

function FileDiff({ id, path, file, truncated }: { id: string; path: string; file: DiffFile | undefined; truncated: boolean }) {
  if (!file) {
    return (
      <p id={id} className="diff-status">
        {truncated ? 'This file is beyond the part of the changes shown.' : 'Nothing to show for this file.'}
      </p>
    );
  }
  return (
    <div id={id} className="diff" role="region" aria-label={`Changes in ${path}`}>
      {file.binary ? (
        <p className="diff-status">This file is not text; its content is not shown.</p>
      ) : (
        <pre className="diff-lines">
          {file.lines.map((l, i) => (
            <span key={i} className={`diff-line diff-${l.kind}`}>
              {l.text}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </div>
  );
}

function ErrorBox({ error }: { error: Explained }) {
  return (
    <div className="dialog-alert" role="alert">
      <p className="git-error-title">{error.title}</p>
      {error.fix ? <p>{error.fix}</p> : null}
      <p className="git-error-detail">{error.detail}</p>
    </div>
  );
}

function CheckpointDialog({ workspace: w, onClose, onDone }: { workspace: Workspace; onClose: () => void; onDone: (note: string) => void }) {
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Explained | null>(null);
  const inputId = useId();

  const submit = async (ev: FormEvent) => {
    ev.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await api.checkpoint(w.slug, message.trim() || undefined);
      onDone(r.commit ? `Checkpoint ${r.commit.slice(0, 10)} saved on ${r.branch} (${r.files.length} ${r.files.length === 1 ? 'file' : 'files'}).` : 'Nothing to checkpoint: everything was already saved.');
    } catch (e) {
      setError(explain(e, w.project));
      setBusy(false);
    }
  };

  return (
    <Modal title={`Checkpoint ${w.name}`} onClose={onClose}>
      <form onSubmit={(ev) => void submit(ev)}>
        <p className="dialog-lead">Commits every change in the workspace on its branch {w.branch}, from the host.</p>
        <div className="field">
          <label htmlFor={inputId}>
            Message <span className="optional">(optional)</span>
          </label>
          <input id={inputId} value={message} onChange={(e) => setMessage(e.target.value)} placeholder={`grove: checkpoint of ${w.slug}`} maxLength={10_000} autoFocus />
        </div>
        {error ? <ErrorBox error={error} /> : null}
        <div className="dialog-actions">
          <button type="button" className="btn" onClick={onClose} disabled={busy}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={busy}>
            {busy ? <Spinner /> : null}
            {busy ? 'Saving…' : 'Checkpoint'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

type Step = 'checkpoint' | 'push' | 'pull-request';
const STEPS: Array<{ step: Step; label: string }> = [
  { step: 'checkpoint', label: 'Checkpoint the changes' },
  { step: 'push', label: 'Push the branch to the remote' },
  { step: 'pull-request', label: 'Open the pull request' },
];

function PublishDialog({ workspace: w, onClose, onPublished }: { workspace: Workspace; onClose: () => void; onPublished: (pr: PullRequest) => void }) {
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
      setError(explain(e, w.project));
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
          {error ? <ErrorBox error={error} /> : null}
          <div className="dialog-actions">
            <button type="button" className="btn" onClick={onClose} disabled={busy}>
              Cancel
            </button>
            <button type="submit" className="btn btn-primary" disabled={busy}>
              {busy ? <Spinner /> : null}
              {busy ? 'Publishing…' : error ? 'Publish again' : 'Publish'}
            </button>
          </div>
        </form>
      )}
    </Modal>
  );
}
