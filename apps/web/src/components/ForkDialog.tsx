// The fork dialog: name checked live with the server's own schema; where to start (the default branch, a branch, a
// pull request's head); an optional first message and, under More options, whether the checkout outlives its pull
// request; then real progress, including a fork that had to start at the default branch instead.
'use client';

import Link from 'next/link';
import { useRouter } from 'next/navigation';
import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import { forkRequestSchema, workspaceNameSchema, type ForkRequest, type Project, type Workspace } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { fallbackSentence } from '../lib/base.ts';
import { capacityReason, workspaceHref } from '../lib/capacity.ts';
import { useLifecycleProgress } from '../lib/use-progress.ts';
import { Modal } from './Dialog.tsx';
import { ForkSteps } from './ForkSteps.tsx';
import './ForkDialog.css';

interface ForkDialogProps {
  projects: Project[];
  workspaces: Workspace[];
  /** Every sandbox slot is taken (or others wait): the dialog offers a place in line, checked by default. */
  full?: boolean;
  onClose: () => void;
  /** The list should be read again (a workspace appeared, started or failed). */
  onChanged: () => void;
  /** The fork was accepted: its tab opens next to the others and shows the progress too. */
  onStarted?: (slug: string) => void;
}

interface Started {
  project: string;
  name: string;
  slug: string;
  message: string;
  /** Its place in line when the fork had to wait (202 queued); null when it started at once. */
  position: number | null;
  /** The pull request it was asked to start from, if any. */
  pullRequest: number | null;
}

/** Where the fork starts: the project's default branch, a branch or commit typed or picked, or a pull request's head. */
type BaseKind = 'default' | 'branch' | 'pull';

/** "42" or "#42" as a number; anything else NaN, which the schema then refuses in its own words. */
function pullNumber(text: string): number {
  const t = text.trim().replace(/^#/, '');
  return /^[0-9]+$/.test(t) ? Number(t) : Number.NaN;
}

/** The first rule the value breaks, in the schema's own words; null when it passes. */
function firstIssue(r: { success: boolean; error?: { issues: Array<{ message: string }> } }): string | null {
  if (r.success) return null;
  return r.error?.issues[0]?.message ?? 'invalid value';
}

export function ForkDialog({ projects, workspaces, full = false, onClose, onChanged, onStarted }: ForkDialogProps) {
  const [project, setProject] = useState(projects[0]?.name ?? '');
  const [name, setName] = useState('');
  const [baseKind, setBaseKind] = useState<BaseKind>('default');
  const [from, setFrom] = useState('');
  const [pullText, setPullText] = useState('');
  const [pullTouched, setPullTouched] = useState(false);
  const [keepCheckout, setKeepCheckout] = useState(false);
  const [message, setMessage] = useState('');
  /** Create was pressed: from then on every problem shows, an empty name too. */
  const [touched, setTouched] = useState(false);
  const [serverNameError, setServerNameError] = useState<string | null>(null);
  const [submitError, setSubmitError] = useState<string | null>(null);
  // A 429 that arrived after the dialog opened: the explanation, and from then on the offer of the line.
  const [capped, setCapped] = useState<{ running: number; creating: number; cap: number } | null>(null);
  const [submitting, setSubmitting] = useState(false);
  const [started, setStarted] = useState<Started | null>(null);
  const [queue, setQueue] = useState(true);
  const atCap = full || capped !== null;
  const ids = {
    name: useId(),
    nameMsg: useId(),
    base: useId(),
    from: useId(),
    fromHelp: useId(),
    pull: useId(),
    pullHelp: useId(),
    list: useId(),
    msg: useId(),
    project: useId(),
    keep: useId(),
  };

  const current = projects.find((p) => p.name === project);
  const taken = workspaces.some((w) => w.project === project && w.name === name && w.state !== 'gone');
  const nameError = firstIssue(workspaceNameSchema.safeParse(name)) ?? (taken ? `a workspace named "${name}" already exists in ${project}` : null) ?? serverNameError;
  const fromText = baseKind === 'branch' ? from.trim() : '';
  const fromError = fromText ? firstIssue(forkRequestSchema.shape.from.safeParse(fromText)) : null;
  const pullRequest = baseKind === 'pull' ? pullNumber(pullText) : null;
  const pullError = pullRequest === null ? null : firstIssue(forkRequestSchema.shape.pullRequest.safeParse(pullRequest));
  // Said once there is something to judge (typed, left, or a Create tried), not as soon as the choice is made.
  const showPullError = (pullTouched || pullText.length > 0) && pullError !== null;
  // What is typed is checked as it is typed; an empty name or number only once Create was pressed (leaving a field
  // to look at the other options is not a mistake).
  const showNameError = (touched || name.length > 0) && nameError !== null;
  // Other workspaces' branches, offered as you type (any branch, commit or recovery ref can be typed).
  const bases = [
    ...(current ? [current.defaultBranch] : []),
    ...workspaces.filter((w) => w.project === project && w.state !== 'gone' && !w.isDefault).map((w) => w.branch),
  ];
  const invalid = nameError !== null || fromError !== null || pullError !== null;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    setPullTouched(true);
    if (invalid || submitting) return;
    setSubmitting(true);
    setSubmitError(null);
    setCapped(null);
    try {
      const req: ForkRequest = {
        project,
        name,
        ...(fromText ? { from: fromText } : {}),
        ...(pullRequest !== null ? { pullRequest } : {}),
        // Sent only when asked for: otherwise the project's setting decides, now and if it changes later.
        ...(keepCheckout ? { keepCheckoutOnClose: true } : {}),
        ...(atCap && queue ? { queue: true } : {}),
      };
      const { workspace } = await api.fork(req);
      const position = workspace.state === 'queued' ? workspace.queuePosition : null;
      setStarted({ project, name, slug: workspace.slug, message: message.trim(), position, pullRequest });
      // A workspace in line has nothing to show in a tab yet; its card tells its place.
      if (position === null) onStarted?.(workspace.slug);
      onChanged();
    } catch (err) {
      if (isApiError(err) && err.code === 'capacity_reached') {
        // The cap was reached after the dialog opened: the same words as the disabled button, naming the
        // running workspaces from the list, which is read again now (it may not show the newest one yet).
        const running = typeof err.body.running === 'number' ? err.body.running : 0;
        const creating = typeof err.body.creating === 'number' ? err.body.creating : 0;
        const cap = typeof err.body.cap === 'number' ? err.body.cap : running + creating;
        setCapped({ running, creating, cap });
        onChanged();
      } else if (isApiError(err) && (err.code === 'invalid_name' || err.code === 'workspace_exists')) {
        setServerNameError(err.message);
      } else {
        setSubmitError(messageOf(err));
      }
    } finally {
      setSubmitting(false);
    }
  };

  if (started) {
    return (
      <Modal title={`Starting ${started.name}`} onClose={onClose}>
        <ForkProgressView
          started={started}
          workspaces={workspaces}
          onChanged={onChanged}
          onRetry={() => {
            setStarted(null);
            setServerNameError(null);
          }}
          onClose={onClose}
        />
      </Modal>
    );
  }

  return (
    <Modal title="New workspace" onClose={onClose}>
      <p className="dialog-lead">A workspace is its own branch, checkout and sandboxed agent. It runs next to the others; nothing is shared.</p>
      <form onSubmit={(e) => void submit(e)} noValidate>
        {submitError || capped ? (
          <p className="dialog-alert" role="alert">
            {capped ? capacityReason(capped, workspaces) : submitError}
          </p>
        ) : null}
        {projects.length > 1 ? (
          <div className="field">
            <label htmlFor={ids.project}>Project</label>
            <select id={ids.project} value={project} onChange={(e) => setProject(e.target.value)}>
              {projects.map((p) => (
                <option key={p.name} value={p.name}>
                  {p.name}
                </option>
              ))}
            </select>
          </div>
        ) : null}
        <div className="field">
          <label htmlFor={ids.name}>Name</label>
          <input
            id={ids.name}
            value={name}
            onChange={(e) => {
              setName(e.target.value);
              setServerNameError(null);
            }}
            placeholder="e.g. fix-login"
            autoComplete="off"
            autoCapitalize="none"
            spellCheck={false}
            autoFocus
            required
            aria-invalid={showNameError}
            aria-describedby={ids.nameMsg}
          />
          <p id={ids.nameMsg} className={showNameError ? 'field-error' : name && !nameError ? 'field-ok' : 'field-help'} aria-live="polite">
            {showNameError ? nameError : name && !nameError ? `"${name}" is available.` : 'Lowercase letters, digits and "-"; starts with a letter or digit.'}
          </p>
        </div>
        <fieldset className="field base-choice">
          <legend>Start from</legend>
          <label className="checkbox">
            <input type="radio" name={ids.base} checked={baseKind === 'default'} onChange={() => setBaseKind('default')} /> The default branch
            {current ? (
              <>
                {' '}
                <code>{current.defaultBranch}</code>
              </>
            ) : null}
          </label>
          <label className="checkbox">
            <input type="radio" name={ids.base} checked={baseKind === 'branch'} onChange={() => setBaseKind('branch')} /> Another branch or commit
          </label>
          {baseKind === 'branch' ? (
            <div className="base-detail">
              <label htmlFor={ids.from} className="sr-only">
                Branch or commit
              </label>
              <input
                id={ids.from}
                value={from}
                onChange={(e) => setFrom(e.target.value)}
                list={ids.list}
                placeholder={bases[1] ?? current?.defaultBranch ?? 'a branch name'}
                autoComplete="off"
                spellCheck={false}
                autoFocus
                aria-invalid={fromError !== null}
                aria-describedby={ids.fromHelp}
              />
              <datalist id={ids.list}>
                {bases.map((b) => (
                  <option key={b} value={b} />
                ))}
              </datalist>
              <p id={ids.fromHelp} className={fromError ? 'field-error' : 'field-help'}>
                {fromError ?? `Another workspace’s branch, any branch or commit. Empty means ${current?.defaultBranch ?? 'the project’s default branch'}.`}
              </p>
            </div>
          ) : null}
          <label className="checkbox">
            <input type="radio" name={ids.base} checked={baseKind === 'pull'} onChange={() => setBaseKind('pull')} /> A pull request
          </label>
          {baseKind === 'pull' ? (
            <div className="base-detail">
              <label htmlFor={ids.pull} className="sr-only">
                Pull request number
              </label>
              <span className="pull-input">
                <span aria-hidden="true">#</span>
                <input
                  id={ids.pull}
                  value={pullText}
                  onChange={(e) => setPullText(e.target.value)}
                  inputMode="numeric"
                  placeholder="42"
                  autoComplete="off"
                  autoFocus
                  aria-invalid={showPullError}
                  aria-describedby={ids.pullHelp}
                />
              </span>
              <p id={ids.pullHelp} className={showPullError ? 'field-error' : 'field-help'} aria-live="polite">
                {showPullError
                  ? pullError
                  : `Its head, fetched from the project’s remote now. If it cannot be fetched, the workspace starts at ${current?.defaultBranch ?? 'the default branch'} and says why.`}
              </p>
            </div>
          ) : null}
        </fieldset>
        <div className="field">
          <label htmlFor={ids.msg}>
            First message <span className="optional">(optional)</span>
          </label>
          <textarea id={ids.msg} value={message} onChange={(e) => setMessage(e.target.value)} rows={3} placeholder="Sent to the agent as soon as the workspace is ready" />
        </div>
        <details className="field fork-more">
          <summary>More options</summary>
          <label className="checkbox">
            <input type="checkbox" checked={keepCheckout} onChange={(e) => setKeepCheckout(e.target.checked)} aria-describedby={ids.keep} /> Keep the checkout when its pull
            request is merged or closed
          </label>
          <p id={ids.keep} className="field-help">
            Unchecked, the project’s setting decides; by default the sandbox and the checkout are cleaned up then (the branch is always kept). Its Changes panel can
            change this later.
          </p>
        </details>
        {atCap ? (
          <div className="field">
            <label className="checkbox">
              <input type="checkbox" checked={queue} onChange={(e) => setQueue(e.target.checked)} /> Wait in line for a free sandbox
            </label>
            <p className="field-help">All sandboxes are in use. In line, it starts by itself when one frees; otherwise the request is refused.</p>
          </div>
        ) : null}
        <div className="dialog-actions">
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={submitting || (touched && (nameError !== null || fromError !== null)) || showPullError}>
            {submitting ? 'Creating…' : atCap && queue ? 'Wait in line' : 'Create workspace'}
          </button>
        </div>
      </form>
    </Modal>
  );
}

function ForkProgressView({
  started,
  workspaces,
  onChanged,
  onRetry,
  onClose,
}: {
  started: Started;
  workspaces: Workspace[];
  onChanged: () => void;
  onRetry: () => void;
  onClose: () => void;
}) {
  const watch = useLifecycleProgress(started.slug, { op: 'fork' });
  // The list is kept live by events, so the place in line moves as others start or leave.
  const now = workspaces.find((w) => w.slug === started.slug);
  const position = now ? (now.state === 'queued' ? now.queuePosition : null) : started.position;
  const [firstMessage, setFirstMessage] = useState<'idle' | 'sending' | 'sent' | string>('idle');
  const sentOnce = useRef(false);
  const finished = watch.done || watch.failed !== null;
  // Held in a ref: the parent passes a fresh function on every render, and this must fire once per outcome.
  const onChangedRef = useRef(onChanged);
  onChangedRef.current = onChanged;

  useEffect(() => {
    if (finished) onChangedRef.current();
  }, [finished]);

  // The first message goes out once, as soon as the agent is ready.
  useEffect(() => {
    if (!watch.done || !started.message || sentOnce.current) return;
    sentOnce.current = true;
    setFirstMessage('sending');
    api.postMessage(started.slug, started.message).then(
      () => setFirstMessage('sent'),
      (e: unknown) => setFirstMessage(`The first message was not sent: ${messageOf(e)}`),
    );
  }, [watch.done, started]);

  const href = workspaceHref(started);
  // Once it is ready the new workspace opens in its tab by itself; the Open link stays for the moment before navigation lands.
  const router = useRouter();
  const openedOnce = useRef(false);
  const onCloseRef = useRef(onClose);
  onCloseRef.current = onClose;
  useEffect(() => {
    if (!watch.done || openedOnce.current) return;
    openedOnce.current = true;
    router.push(href);
    onCloseRef.current();
  }, [watch.done, href, router]);
  return (
    <>
      <p className="dialog-lead">
        {watch.done
          ? 'Ready.'
          : watch.failed
            ? 'It could not be started; everything it set up was undone.'
            : position !== null
              ? `Waiting in line: #${position}. It starts by itself when a sandbox frees; you can close this, the card shows its place.`
              : 'Setting up. You can close this; the card keeps showing progress.'}
      </p>
      <ForkSteps watch={watch} label={`Progress of ${started.name}`} />
      {watch.baseFallback ? (
        <p className="dialog-warn spaced" role="status">
          {fallbackSentence(watch.baseFallback)}
        </p>
      ) : started.pullRequest !== null && watch.reached >= 2 ? (
        <p className="field-help spaced">Started at the head of pull request #{started.pullRequest}.</p>
      ) : null}
      {watch.failed ? (
        <p className="dialog-alert spaced" role="alert">
          {watch.failed}
        </p>
      ) : null}
      {watch.timedOut && position === null ? (
        <p className="dialog-warn spaced" role="status">
          This is taking longer than usual. The card in the list shows its state.
        </p>
      ) : null}
      {watch.error && !finished ? <p className="field-help spaced">Progress could not be read: {watch.error}</p> : null}
      {started.message && watch.done ? (
        <p className={firstMessage.startsWith('The first') ? 'field-error spaced' : 'field-help spaced'}>
          {firstMessage === 'sending' ? 'Sending the first message…' : firstMessage === 'sent' ? 'First message sent.' : firstMessage === 'idle' ? '' : firstMessage}
        </p>
      ) : null}
      <div className="dialog-actions">
        {watch.failed ? (
          <button type="button" className="btn" onClick={onRetry}>
            Try again
          </button>
        ) : null}
        <button type="button" className="btn" onClick={onClose}>
          Close
        </button>
        {watch.done ? (
          // Opening it puts it in a tab; the dialog belongs to the list, which the tab replaces.
          <Link className="btn btn-primary" href={href} autoFocus onClick={onClose}>
            Open {started.name}
          </Link>
        ) : null}
      </div>
    </>
  );
}
