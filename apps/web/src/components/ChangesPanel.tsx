// The engineer's view of what a workspace changed since it forked: ahead/behind the default branch, work not yet
// checkpointed, each file with its +/- counts and its diff, and the Checkpoint and Publish buttons (docs/git-flow.md).
// Read when asked and after the workspace's own events (a turn wrote files, a checkpoint, a publish); never on a timer.
'use client';

import { useCallback, useEffect, useId, useRef, useState, type FormEvent } from 'react';
import type { DiffResponse, PullRequest, Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { fallbackSentence } from '../lib/base.ts';
import { parseUnifiedDiff, type DiffFile } from '../lib/diff.ts';
import { aheadBehind, changesSummary, refreshesChanges, type Explained } from '../lib/git-changes.ts';
import { useBaseFallback } from '../lib/use-base-fallback.ts';
import { useEventTrigger } from '../lib/use-events.ts';
import { FormActions, Modal } from './Dialog.tsx';
import { FileDiff, FileLabel } from './FileDiff.tsx';
import { GitErrorBox, explainError } from './GitErrorBox.tsx';
import { OpenFileButton } from './OpenFileButton.tsx';
import { KeepCheckoutSetting, hasKeepCheckout } from './KeepCheckout.tsx';
import { PrLink } from './PrLink.tsx';
import { PublishDialog } from './PublishDialog.tsx';
import { Spinner } from './ui.tsx';
import './diff.css';
import './ChangesPanel.css';

type Load = { kind: 'loading' } | { kind: 'ready'; diff: DiffResponse; files: DiffFile[] } | { kind: 'error'; message: string };

/** Closed, the panel needs the counts only; the patch is read (up to the API's default 1 MiB) once it is opened. */
const SUMMARY_BYTES = 1024;

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
                        <FileLabel file={f} />
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
      setError(explainError(e, w.project));
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
        {error ? <GitErrorBox error={error} /> : null}
        <FormActions label="Checkpoint" busyLabel="Saving…" busy={busy} onCancel={onClose} />
      </form>
    </Modal>
  );
}
