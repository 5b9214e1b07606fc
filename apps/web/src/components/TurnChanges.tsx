// Under a reply that changed files: "N files changed" with each file's diff, changes put back because
// they were outside the allowed paths, and the undo button on the reply undo would restore.
'use client';

import { useId, useState } from 'react';
import type { TurnFile, TurnSummary } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { parseUnifiedDiff, type DiffFile } from '../lib/diff.ts';
import type { ThreadItem } from '../lib/thread-state.ts';
import { ErrorText, Spinner } from './ui.tsx';
import { DiffLines, FileStatus, LineCounts } from './FileDiff.tsx';
import { OpenFileButton } from './OpenFileButton.tsx';
import './diff.css';
import './TurnChanges.css';

type ChangesItem = Extract<ThreadItem, { kind: 'changes' }>;

interface TurnChangesProps {
  slug: string;
  item: ChangesItem;
  /** From GET /turns: statuses, line counts, undone, and whether undo would restore this one. Undefined until loaded. */
  summary: TurnSummary | undefined;
  /** The turn list should be read again (an undo happened). */
  onUndone: () => void;
}

type DiffState =
  | { state: 'idle' }
  | { state: 'loading' }
  | { state: 'ready'; files: DiffFile[]; truncated: boolean; limitBytes: number }
  | { state: 'error'; message: string };

const STATUS_LABEL: Record<TurnFile['status'], string> = { added: 'added', modified: 'changed', deleted: 'deleted', type_changed: 'changed' };

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** Turn ids in the thread are turn-<n>; the API numbers them n. */
function turnNumber(turn: string): number | null {
  const m = /^turn-([1-9][0-9]{0,8})$/.exec(turn);
  return m?.[1] ? Number(m[1]) : null;
}

export function TurnChanges({ slug, item, summary, onUndone }: TurnChangesProps) {
  const n = turnNumber(item.turn);
  const [diff, setDiff] = useState<DiffState>({ state: 'idle' });
  /** The file whose diff is open, 'all' for every file, null for none. */
  const [shown, setShown] = useState<string | null>(null);
  const diffId = useId();

  // The thread line knows the paths; the API adds what happened to each and the line counts.
  const files: Array<Partial<TurnFile> & { path: string }> = summary?.recorded ? summary.files : item.files.map((path) => ({ path }));
  const reverted = summary && summary.reverted.length > 0 ? summary.reverted : item.reverted;
  const allowedPaths = summary && summary.allowedPaths.length > 0 ? summary.allowedPaths : item.allowedPaths;
  const added = files.reduce((sum, f) => sum + (f.added ?? 0), 0);
  const removed = files.reduce((sum, f) => sum + (f.removed ?? 0), 0);

  const loadDiff = async () => {
    if (n === null) return;
    setDiff({ state: 'loading' });
    try {
      const r = await api.turnDiff(slug, n);
      setDiff({ state: 'ready', files: parseUnifiedDiff(r.diff), truncated: r.truncated, limitBytes: r.limitBytes });
    } catch (e) {
      setDiff({ state: 'error', message: messageOf(e) });
    }
  };

  const toggle = (which: string) => {
    if (shown === which) {
      setShown(null);
      return;
    }
    setShown(which);
    if (diff.state === 'idle' || diff.state === 'error') void loadDiff();
  };

  return (
    <li className="msg msg-changes">
      {files.length > 0 ? (
        <details className="changes">
          <summary>
            <span className="changes-title">{plural(files.length, 'file', 'files')} changed</span>
            {summary?.recorded ? (
              <span className="changes-counts" aria-label={`${plural(added, 'line', 'lines')} added, ${plural(removed, 'line', 'lines')} removed`}>
                <span className="count-add">+{added}</span> <span className="count-del">−{removed}</span>
              </span>
            ) : null}
            {summary?.undone ? <span className="changes-undone">undone</span> : null}
          </summary>
          <ul className="changes-files" aria-label="Files changed">
            {files.map((f) => (
              <li key={f.path} className="changes-file-row">
                <button type="button" className="changes-file" aria-expanded={shown === f.path} aria-controls={diffId} onClick={() => toggle(f.path)}>
                  {f.status ? <FileStatus label={STATUS_LABEL[f.status]} /> : null}
                  <span className="file-path">{f.path}</span>
                  {f.status ? <LineCounts added={f.added ?? null} removed={f.removed ?? null} /> : null}
                </button>
                {f.status === 'deleted' ? null : <OpenFileButton path={f.path} />}
              </li>
            ))}
          </ul>
          <div className="changes-actions">
            <button type="button" className="btn btn-small" aria-expanded={shown === 'all'} aria-controls={diffId} onClick={() => toggle('all')}>
              {shown === 'all' ? 'Hide changes' : 'Show changes'}
            </button>
          </div>
          {shown !== null ? <DiffView id={diffId} diff={diff} which={shown} onRetry={() => void loadDiff()} /> : null}
        </details>
      ) : null}
      {reverted.length > 0 ? (
        <div className="changes-reverted">
          <p>
            {reverted.length === 1 ? '1 change was put back because it is' : `${reverted.length} changes were put back because they are`} outside the allowed paths
            {allowedPaths.length > 0 ? (
              <>
                {' '}
                (<code>{allowedPaths.join(', ')}</code>)
              </>
            ) : null}
            :
          </p>
          <ul aria-label="Changes put back">
            {reverted.map((r) => (
              <li key={`${r.action}:${r.path}`}>
                <code>{r.path}</code> {r.action === 'removed' ? 'removed' : 'restored'}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {summary?.undoNext ? <UndoButton slug={slug} onUndone={onUndone} /> : null}
    </li>
  );
}

function DiffView({ id, diff, which, onRetry }: { id: string; diff: DiffState; which: string; onRetry: () => void }) {
  if (diff.state === 'idle' || diff.state === 'loading') {
    return (
      <p id={id} className="diff-status">
        <Spinner label="Loading the changes" /> Loading the changes…
      </p>
    );
  }
  if (diff.state === 'error') {
    return (
      <p id={id} className="diff-status field-error" role="alert">
        The changes could not be loaded: {diff.message}{' '}
        <button type="button" className="btn btn-small" onClick={onRetry}>
          Try again
        </button>
      </p>
    );
  }
  const files = which === 'all' ? diff.files : diff.files.filter((f) => f.path === which);
  return (
    <div id={id} className="diff" role="region" aria-label={which === 'all' ? 'Changes' : `Changes in ${which}`}>
      {diff.truncated ? <p className="diff-status">These changes are long: only the first {Math.round(diff.limitBytes / 1024)} KB are shown.</p> : null}
      {files.length === 0 ? <p className="diff-status">Nothing to show for this file{diff.truncated ? ' (beyond the part shown)' : ''}.</p> : null}
      {files.map((f) => (
        <section key={f.path} className="diff-file">
          <h4 className="diff-path">{f.path}</h4>
          <DiffLines file={f} />
        </section>
      ))}
    </div>
  );
}

type UndoState = 'idle' | 'confirm' | 'undoing' | 'done';

function UndoButton({ slug, onUndone }: { slug: string; onUndone: () => void }) {
  const [state, setState] = useState<UndoState>('idle');
  const [error, setError] = useState<string | null>(null);
  const promptId = useId();

  const undo = async () => {
    setState('undoing');
    setError(null);
    try {
      await api.undo(slug);
      // The list is read again; this reply is no longer the one undo would restore.
      setState('done');
      onUndone();
      return;
    } catch (e) {
      if (isApiError(e) && e.code === 'workspace_stopped') setError('This conversation is paused. Reopen it, then undo.');
      else if (isApiError(e) && e.status === 409) setError(`Not undone: ${e.message}`);
      else setError(`Not undone: ${messageOf(e)}`);
    }
    setState('idle');
  };

  if (state === 'done') return null;
  return (
    <div className="changes-undo">
      {state === 'confirm' ? (
        <div className="undo-confirm" role="group" aria-labelledby={promptId}>
          <p id={promptId}>Put these files back to how they were before this reply?</p>
          <button type="button" className="btn btn-small btn-danger-solid" autoFocus onClick={() => void undo()}>
            Yes, undo
          </button>
          <button type="button" className="btn btn-small" onClick={() => setState('idle')}>
            Keep them
          </button>
        </div>
      ) : (
        <button type="button" className="btn btn-small" disabled={state === 'undoing'} onClick={() => setState('confirm')}>
          {state === 'undoing' ? <Spinner /> : null}
          {state === 'undoing' ? 'Undoing…' : 'Undo these changes'}
        </button>
      )}
      <ErrorText message={error} className="field-error" />
    </div>
  );
}
