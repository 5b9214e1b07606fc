// The engineer's settings of a project (docs/git-flow.md): what happens to its workspaces' checkouts when their
// pull request is merged or closed (keepCheckoutOnClose in the project config), and its config-parity overlay
// files: local files a workspace needs that git does not carry, like .env. Opened from the workspaces list only;
// the default thread at / never shows it.
'use client';

import { useEffect, useId, useRef, useState, type FormEvent, type RefObject } from 'react';
import { overlayFilePathSchema, type OverlayFileInfo, type ProjectConfig } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { announceProjectKeep, byPath, overlayEntries, overlayModeLabel, plainEntries, sizeLabel } from '../lib/project-settings.ts';
import { Modal } from './Dialog.tsx';
import { ErrorText, Spinner } from './ui.tsx';
import './KeepCheckout.css';
import './ProjectSettings.css';

type Load<T> = { kind: 'loading' } | { kind: 'ready'; value: T } | { kind: 'error'; message: string };

interface DialogProps {
  /** Every project's name; more than one adds a picker. */
  projects: string[];
  /** The project shown first. */
  initial: string;
  onClose: () => void;
}

export function ProjectSettingsDialog({ projects, initial, onClose }: DialogProps) {
  const [project, setProject] = useState(initial);
  const pickerId = useId();

  return (
    <Modal title={`Settings of ${project}`} onClose={onClose}>
      <p className="dialog-lead">Shared by every workspace of the project.</p>
      {projects.length > 1 ? (
        <div className="field">
          <label htmlFor={pickerId}>Project</label>
          <select id={pickerId} value={project} onChange={(e) => setProject(e.target.value)}>
            {projects.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </div>
      ) : null}
      {/* Keyed: another project starts from its own reads, and a late answer about the previous one lands nowhere. */}
      <SettingsBody key={project} project={project} />
      <div className="dialog-actions">
        <button type="button" className="btn" onClick={onClose}>
          Close
        </button>
      </div>
    </Modal>
  );
}

function SettingsBody({ project }: { project: string }) {
  const [config, setConfig] = useState<Load<ProjectConfig>>({ kind: 'loading' });
  const [files, setFiles] = useState<Load<OverlayFileInfo[]>>({ kind: 'loading' });
  const [attempt, setAttempt] = useState(0);
  const [path, setPath] = useState('');
  const contentRef = useRef<HTMLTextAreaElement>(null);

  useEffect(() => {
    let live = true;
    api.projectConfig(project).then(
      ({ config: c }) => live && setConfig({ kind: 'ready', value: c }),
      (e: unknown) => live && setConfig({ kind: 'error', message: messageOf(e) }),
    );
    api.overlay(project).then(
      (r) => live && setFiles({ kind: 'ready', value: byPath(r.files) }),
      (e: unknown) => live && setFiles({ kind: 'error', message: messageOf(e) }),
    );
    return () => {
      live = false;
    };
  }, [project, attempt]);

  const retry = () => {
    setConfig({ kind: 'loading' });
    setFiles({ kind: 'loading' });
    setAttempt((n) => n + 1);
  };
  // Every overlay call answers the whole list: it replaces what is shown.
  const showFiles = (list: OverlayFileInfo[]) => setFiles({ kind: 'ready', value: byPath(list) });
  // Replace: the path is taken over, the content is typed anew (the API never sends a file's content back).
  const replace = (p: string) => {
    setPath(p);
    contentRef.current?.focus();
  };

  return (
    <>
      <KeepCheckoutDefault project={project} config={config} onSaved={(c) => setConfig({ kind: 'ready', value: c })} onRetry={retry} />
      <OverlayFiles project={project} files={files} onFiles={showFiles} onReplace={replace} onRetry={retry} />
      <OverlayForm
        project={project}
        config={config.kind === 'ready' ? config.value : null}
        existing={files.kind === 'ready' ? files.value : []}
        path={path}
        onPath={setPath}
        contentRef={contentRef}
        onFiles={showFiles}
      />
    </>
  );
}

function LoadError({ what, message, onRetry }: { what: string; message: string; onRetry: () => void }) {
  return (
    <div className="settings-error" role="alert">
      <p>
        {what} could not be read: {message}
      </p>
      <button type="button" className="btn btn-small" onClick={onRetry}>
        Try again
      </button>
    </div>
  );
}

type Keep = 'clean' | 'keep';

/** The project-wide default of keepCheckoutOnClose; a workspace's own choice (its card, its Changes panel) comes first. */
function KeepCheckoutDefault({ project, config, onSaved, onRetry }: { project: string; config: Load<ProjectConfig>; onSaved: (c: ProjectConfig) => void; onRetry: () => void }) {
  const headingId = useId();
  const selectId = useId();
  const helpId = useId();
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // Shown at once while saving; the config the server answers replaces it.
  const [pending, setPending] = useState<Keep | null>(null);

  if (config.kind === 'error') return <LoadError what="The project's settings" message={config.message} onRetry={onRetry} />;
  const stored: Keep = config.kind === 'ready' && config.value.keepCheckoutOnClose === true ? 'keep' : 'clean';

  const change = async (next: Keep) => {
    setPending(next);
    setSaving(true);
    setError(null);
    try {
      // PATCH: only this key changes; whatever else the config says (or someone saves meanwhile) is kept.
      const { config: saved } = await api.patchProjectConfig(project, { keepCheckoutOnClose: next === 'keep' });
      onSaved(saved);
      // No event is written for a config change; the cards that name the project's setting are told here.
      announceProjectKeep(project, saved.keepCheckoutOnClose === true);
    } catch (e) {
      setError(`Not saved: ${messageOf(e)}`);
    } finally {
      setPending(null);
      setSaving(false);
    }
  };

  return (
    <section className="settings-section" aria-labelledby={headingId}>
      <h3 id={headingId}>Pull requests</h3>
      <div className="settings-keep">
        <label htmlFor={selectId}>When a workspace&apos;s pull request is merged or closed</label>
        <span className="keep-control">
          <select
            id={selectId}
            value={pending ?? stored}
            onChange={(e) => void change(e.target.value as Keep)}
            disabled={saving || config.kind === 'loading'}
            aria-describedby={helpId}
          >
            <option value="clean">Clean up</option>
            <option value="keep">Keep the checkout</option>
          </select>
          {saving || config.kind === 'loading' ? <Spinner label={saving ? 'Saving' : 'Reading the settings'} /> : null}
        </span>
      </div>
      <p id={helpId} className="field-help">
        Clean up removes the sandbox and the checkout, never while they hold work the branch does not have; the branch itself is always kept. A workspace&apos;s own
        choice, on its card or in its Changes panel, comes first.
      </p>
      <ErrorText message={error} className="field-error" />
    </section>
  );
}

function OverlayFiles({
  project,
  files,
  onFiles,
  onReplace,
  onRetry,
}: {
  project: string;
  files: Load<OverlayFileInfo[]>;
  onFiles: (list: OverlayFileInfo[]) => void;
  onReplace: (path: string) => void;
  onRetry: () => void;
}) {
  const headingId = useId();

  const body = () => {
    if (files.kind === 'loading') {
      return (
        <p className="field-help">
          <Spinner /> Reading the overlay files…
        </p>
      );
    }
    if (files.kind === 'error') return <LoadError what="The overlay files" message={files.message} onRetry={onRetry} />;
    if (files.value.length === 0) {
      return (
        <p className="settings-empty">
          No overlay files: these are local files a workspace needs that git does not carry, like <code>.env</code> or <code>.claude/settings.local.json</code>. Add one
          below; every workspace of {project} gets it at its next fork or start, and it never enters a commit.
        </p>
      );
    }
    return (
      <>
        <p className="field-help settings-help">Local files a workspace needs that git does not carry; never committed. A change reaches a workspace at its next fork or start.</p>
        <ul className="overlay-files" aria-labelledby={headingId}>
          {files.value.map((f) => (
            <OverlayRow key={f.path} project={project} file={f} onFiles={onFiles} onReplace={onReplace} />
          ))}
        </ul>
      </>
    );
  };

  return (
    <section className="settings-section" aria-labelledby={headingId}>
      <h3 id={headingId}>Overlay files</h3>
      {body()}
    </section>
  );
}

function OverlayRow({ project, file: f, onFiles, onReplace }: { project: string; file: OverlayFileInfo; onFiles: (list: OverlayFileInfo[]) => void; onReplace: (path: string) => void }) {
  const [state, setState] = useState<'idle' | 'confirm' | 'removing'>('idle');
  const [error, setError] = useState<string | null>(null);
  const promptId = useId();

  const remove = async () => {
    setState('removing');
    setError(null);
    try {
      // The row goes with the list the server answers; nothing to reset here.
      onFiles((await api.deleteOverlayFile(project, f.path)).files);
    } catch (e) {
      setError(`Not removed: ${messageOf(e)}`);
      setState('idle');
    }
  };

  return (
    <li className="overlay-file">
      <span className="overlay-file-facts">
        <code className="overlay-path">{f.path}</code>
        <span className="overlay-meta">
          {overlayModeLabel(f)} · {sizeLabel(f.size)}
        </span>
      </span>
      {state === 'confirm' ? null : (
        <span className="overlay-actions">
          <button type="button" className="btn btn-small" aria-label={`Replace ${f.path}`} onClick={() => onReplace(f.path)} disabled={state === 'removing'}>
            Replace
          </button>
          <button type="button" className="btn btn-small btn-danger" aria-label={`Remove ${f.path}`} onClick={() => setState('confirm')} disabled={state === 'removing'}>
            {state === 'removing' ? <Spinner /> : null}
            {state === 'removing' ? 'Removing…' : 'Remove'}
          </button>
        </span>
      )}
      {state === 'confirm' ? (
        <div className="undo-confirm overlay-confirm" role="group" aria-labelledby={promptId}>
          <p id={promptId}>
            Remove <code>{f.path}</code>? Workspaces forked or reopened from now on no longer get it; a running one keeps it until it stops, and a writable copy stays in
            its workspace.
          </p>
          <button type="button" className="btn btn-small btn-danger-solid" autoFocus onClick={() => void remove()}>
            Yes, remove
          </button>
          <button type="button" className="btn btn-small" onClick={() => setState('idle')}>
            Keep it
          </button>
        </div>
      ) : null}
      <ErrorText message={error} className="field-error overlay-error" />
    </li>
  );
}

/** The first rule the path breaks, in the contracts' own words; null when it passes. */
function pathProblem(path: string): string | null {
  const r = overlayFilePathSchema.safeParse(path);
  return r.success ? null : (r.error.issues[0]?.message ?? 'invalid path');
}

function OverlayForm({
  project,
  config,
  existing,
  path,
  onPath,
  contentRef,
  onFiles,
}: {
  project: string;
  /** null until read (or when it could not be): the help then names no entries. */
  config: ProjectConfig | null;
  existing: OverlayFileInfo[];
  path: string;
  onPath: (p: string) => void;
  contentRef: RefObject<HTMLTextAreaElement | null>;
  onFiles: (list: OverlayFileInfo[]) => void;
}) {
  const ids = { heading: useId(), path: useId(), pathHelp: useId(), list: useId(), content: useId(), contentHelp: useId() };
  const [content, setContent] = useState('');
  const [touched, setTouched] = useState(false);
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);

  const entries = config ? overlayEntries(config) : null;
  const problem = pathProblem(path);
  const showProblem = (touched || path.length > 0) && problem !== null;
  const replacing = existing.some((f) => f.path === path);
  const suggestions = entries ? plainEntries(entries.files).filter((p) => !existing.some((f) => f.path === p)) : [];

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    if (problem !== null || saving) return;
    setSaving(true);
    setError(null);
    setSaved(null);
    try {
      const r = await api.putOverlayFile(project, { path, content });
      onFiles(r.files);
      const size = r.files.find((f) => f.path === path)?.size;
      setSaved(`Saved ${path}${size === undefined ? '' : ` (${sizeLabel(size)})`}.`);
      // The content may be a secret: it does not stay in the form once stored.
      setContent('');
      onPath('');
      setTouched(false);
    } catch (err) {
      // A 422 says which rule the path broke or that overlay.files does not name it, and how to fix that.
      setError(messageOf(err));
    } finally {
      setSaving(false);
    }
  };

  return (
    <form className="settings-section" onSubmit={(e) => void submit(e)} noValidate aria-labelledby={ids.heading}>
      <h3 id={ids.heading}>Add or replace a file</h3>
      <ErrorText message={error} className="dialog-alert" />
      <div className="field">
        <label htmlFor={ids.path}>Path in the checkout</label>
        <input
          id={ids.path}
          value={path}
          onChange={(e) => {
            onPath(e.target.value);
            setSaved(null);
          }}
          onBlur={() => setTouched(true)}
          list={ids.list}
          placeholder="e.g. .env"
          autoComplete="off"
          autoCapitalize="none"
          spellCheck={false}
          aria-invalid={showProblem}
          aria-describedby={ids.pathHelp}
        />
        <datalist id={ids.list}>
          {suggestions.map((p) => (
            <option key={p} value={p} />
          ))}
        </datalist>
        <p id={ids.pathHelp} className={showProblem ? 'field-error' : 'field-help'} aria-live="polite">
          {showProblem
            ? problem
            : entries
              ? `Relative to the repository root, one that overlay.files in the project config names (${entries.isDefault ? 'by default ' : ''}${entries.files.join(', ')}).`
              : 'Relative to the repository root, one that overlay.files in the project config names.'}
        </p>
      </div>
      <div className="field">
        <label htmlFor={ids.content}>Content</label>
        <textarea
          id={ids.content}
          ref={contentRef}
          className="overlay-content"
          value={content}
          onChange={(e) => setContent(e.target.value)}
          rows={5}
          autoComplete="off"
          spellCheck={false}
          aria-describedby={ids.contentHelp}
        />
        <p id={ids.contentHelp} className="field-help">
          Text, at most 1 MiB; never committed.{' '}
          {entries && entries.writable.length > 0
            ? `Mounted read-only in the sandbox, except what overlay.writable names (${entries.writable.join(', ')}): copied at fork for the agent to change.`
            : 'Mounted read-only in the sandbox; overlay.writable in the project config makes an entry a copy the agent may change.'}
        </p>
      </div>
      <div className="settings-form-actions">
        {saved ? (
          <p className="field-ok" role="status">
            {saved}
          </p>
        ) : null}
        <button type="submit" className="btn btn-primary" disabled={saving || showProblem}>
          {saving ? <Spinner /> : null}
          {saving ? 'Saving…' : replacing ? 'Replace file' : 'Add file'}
        </button>
      </div>
    </form>
  );
}
