// /resume: a picker of the project's workspaces, most recent first, opened by typing /resume in a
// composer, by Ctrl/Cmd+K anywhere, or by the Resume button. Choosing one opens it in a tab and starts
// it when it is stopped.
'use client';

import { usePathname, useRouter } from 'next/navigation';
import { createContext, useCallback, useContext, useEffect, useId, useMemo, useRef, useState, type KeyboardEvent, type ReactNode } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { conversationHref, workspaceHref } from '../lib/capacity.ts';
import { conversations } from '../lib/landing.ts';
import { matchesQuery, quoteLine, quoteOf, resumeCandidates, type Quote } from '../lib/resume.ts';
import { requestStart } from '../lib/start-intents.ts';
import { routeOf } from '../lib/tabs.ts';
import { relativeTime } from '../lib/time.ts';
import { Modal } from './Dialog.tsx';
import type { Audience } from './ThreadView.tsx';
import { Spinner, StateBadge } from './ui.tsx';
import './Resume.css';

interface ResumeApi {
  /** Opens the picker, limited to one project when given (the composer's own). */
  open(project?: string | null): void;
}

const ResumeContext = createContext<ResumeApi>({ open: () => {} });

export function useResume(): ResumeApi {
  return useContext(ResumeContext);
}

/** Last messages are read for the first few rows only: one small host-side read each. */
const MAX_THREAD_READS = 8;

export function ResumeProvider({ children }: { children: ReactNode }) {
  const [target, setTarget] = useState<{ project: string | null } | null>(null);
  const router = useRouter();
  const pathname = usePathname();
  const pathProject = useMemo(() => {
    const r = routeOf(pathname);
    return r.kind === 'workspace' ? r.project : null;
  }, [pathname]);

  const open = useCallback((project?: string | null) => setTarget({ project: project ?? null }), []);
  const openRef = useRef(pathProject);
  openRef.current = pathProject;

  useEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || e.altKey || e.shiftKey || e.key.toLowerCase() !== 'k') return;
      // Another dialog (fork, teardown) has the keyboard; do not stack a second one on top.
      if (document.querySelector('dialog[open]')) return;
      e.preventDefault();
      setTarget({ project: openRef.current });
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);

  // On `/`, the default conversation, the reader is not an engineer: the picker offers the projects' conversations
  // and opens them there, never a workspace with its branch.
  const audience: Audience = pathname === '/' ? 'everyone' : 'engineer';
  const choose = useCallback(
    (row: Row) => {
      setTarget(null);
      // Not begun yet: `/` lands on its first message, which begins it.
      if (row.kind === 'fresh') return router.push(conversationHref(row.project));
      const w = row.workspace;
      // Whichever conversation shows it (an open tab, or the one the URL is about to mount) starts it.
      if (w.state === 'stopped') requestStart(w.slug);
      router.push(audience === 'everyone' ? conversationHref(w.project) : workspaceHref(w));
    },
    [router, audience],
  );

  const value = useMemo(() => ({ open }), [open]);
  return (
    <ResumeContext.Provider value={value}>
      {children}
      {target ? <ResumePicker project={audience === 'everyone' ? null : target.project} audience={audience} onChoose={choose} onClose={() => setTarget(null)} /> : null}
    </ResumeContext.Provider>
  );
}

/** The shortcut as this platform writes it; decided after mount so server and browser render alike. */
function useShortcutLabel(): string {
  const [label, setLabel] = useState('Ctrl K');
  useEffect(() => {
    if (/Mac|iPhone|iPad/.test(navigator.platform)) setLabel('⌘ K');
  }, []);
  return label;
}

export function ResumeButton() {
  const { open } = useResume();
  const pathname = usePathname();
  const shortcut = useShortcutLabel();
  const r = routeOf(pathname);
  return (
    <button type="button" className="navlink navbutton" onClick={() => open(r.kind === 'workspace' ? r.project : null)} aria-keyshortcuts="Control+K Meta+K">
      Resume <kbd className="kbd">{shortcut}</kbd>
    </button>
  );
}

/** A row of the picker: a workspace, or (for everyone) a project whose conversation has not begun. */
type Row = { kind: 'workspace'; workspace: Workspace } | { kind: 'fresh'; project: string };
/** The row's id: a fresh project's name is the slug its conversation will have, which no live workspace holds. */
const rowKey = (r: Row) => (r.kind === 'workspace' ? r.workspace.slug : r.project);

type Load = { kind: 'loading' } | { kind: 'error'; message: string } | { kind: 'ready'; list: Workspace[]; fresh: string[] };
type Last = Record<string, Quote | null>;

/** The picker's words for each reader: workspaces for engineers, conversations (one per project) for everyone else. */
const WORDS = {
  engineer: {
    title: 'Resume a workspace',
    lead: (scope: string) => `Most recent first, ${scope}. A stopped workspace starts again when you choose it.`,
    find: 'Find a workspace',
    placeholder: 'Type to filter by name or branch',
    loading: 'Loading workspaces…',
    failed: 'The workspaces could not be loaded',
    none: (scope: string) => `There are no workspaces ${scope} yet.`,
    list: 'Workspaces, most recent first',
    stopped: 'Stopped: its files and conversation are kept; choosing it starts it again.',
  },
  everyone: {
    title: 'Open a conversation',
    lead: () => 'One conversation per project, most recent first. A paused one opens again when you choose it.',
    find: 'Find a conversation',
    placeholder: 'Type to filter by project',
    loading: 'Loading conversations…',
    failed: 'The conversations could not be loaded',
    none: () => 'There are no conversations yet.',
    list: 'Conversations, most recent first',
    stopped: 'Paused: everything is kept; choosing it opens it again.',
  },
} as const;

/** The line under a project whose conversation has not begun (only everyone's picker has them). */
const FRESH_LINE = 'Not started yet: your first message starts it.';

interface PickerProps {
  project: string | null;
  audience: Audience;
  onChoose: (row: Row) => void;
  onClose: () => void;
}

function ResumePicker({ project, audience, onChoose, onClose }: PickerProps) {
  const words = WORDS[audience];
  const [load, setLoad] = useState<Load>({ kind: 'loading' });
  const [last, setLast] = useState<Last>({});
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(0);
  const ids = { list: useId(), help: useId() };

  const read = useCallback(async () => {
    setLoad({ kind: 'loading' });
    try {
      const [{ workspaces }, projects] = await Promise.all([
        api.listWorkspaces(),
        // Only everyone's picker offers the projects whose conversation has not begun; without the list it has none.
        audience === 'everyone' ? api.projectNames() : null,
      ]);
      const list = audience === 'engineer' ? resumeCandidates(workspaces, project) : resumeCandidates(conversations(workspaces), project);
      const begun = new Set(list.map((w) => w.project));
      setLoad({ kind: 'ready', list, fresh: (projects ?? []).filter((p) => !begun.has(p)).sort() });
      // Read on the host from the thread file, so stopped workspaces are quoted too.
      await Promise.all(
        list.slice(0, MAX_THREAD_READS).map(async (w) => {
          try {
            const { lastMessage } = await api.lastMessage(w.slug);
            setLast((prev) => ({ ...prev, [w.slug]: quoteOf(lastMessage) }));
          } catch {
            // The quote is a nicety; the row is still there without it.
          }
        }),
      );
    } catch (e) {
      setLoad({ kind: 'error', message: isApiError(e) && e.status === 401 ? 'Open Grove with your access link first.' : messageOf(e) });
    }
  }, [project, audience]);

  useEffect(() => {
    void read();
  }, [read]);

  const q = query.trim().toLowerCase();
  const shown: Row[] =
    load.kind === 'ready'
      ? [
          ...load.list.filter((w) => matchesQuery(w, query)).map((workspace): Row => ({ kind: 'workspace', workspace })),
          // Never used, so they come after the ones that were (most recent first).
          ...load.fresh.filter((p) => p.includes(q)).map((project): Row => ({ kind: 'fresh', project })),
        ]
      : [];
  const current = Math.min(active, Math.max(0, shown.length - 1));
  const optionId = (key: string) => `${ids.list}-${key}`;
  const activeRow = shown[current];
  const activeSlug = activeRow ? rowKey(activeRow) : undefined;
  const listShown = shown.length > 0;

  useEffect(() => {
    if (!activeSlug) return;
    // The highlighted row stays in view while the arrows move past the list's edge.
    document.getElementById(`${ids.list}-${activeSlug}`)?.scrollIntoView({ block: 'nearest' });
  }, [activeSlug, ids.list]);

  const onKeyDown = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      if (shown.length === 0) return;
      const step = e.key === 'ArrowDown' ? 1 : -1;
      setActive((current + step + shown.length) % shown.length);
      return;
    }
    if (e.key === 'Home' || e.key === 'End') {
      if (shown.length === 0) return;
      e.preventDefault();
      setActive(e.key === 'Home' ? 0 : shown.length - 1);
      return;
    }
    if (e.key === 'Enter') {
      e.preventDefault();
      const row = shown[current];
      if (row) onChoose(row);
    }
  };

  const scope = project ? `in ${project}` : 'in every project';
  // The project is named on each row only when the rows come from more than one.
  const manyProjects = load.kind === 'ready' && new Set(load.list.map((w) => w.project)).size > 1;
  return (
    <Modal title={words.title} onClose={onClose}>
      <p className="dialog-lead" id={ids.help}>
        {words.lead(scope)}
      </p>
      <input
        className="picker-input"
        type="text"
        role="combobox"
        aria-label={words.find}
        aria-expanded={listShown}
        // Only while the list is rendered: an id that names nothing is an invalid reference.
        aria-controls={listShown ? ids.list : undefined}
        aria-autocomplete="list"
        aria-activedescendant={activeSlug ? optionId(activeSlug) : undefined}
        aria-describedby={ids.help}
        placeholder={words.placeholder}
        value={query}
        onChange={(e) => {
          setQuery(e.target.value);
          setActive(0);
        }}
        onKeyDown={onKeyDown}
        autoFocus
        autoComplete="off"
        spellCheck={false}
      />
      {load.kind === 'loading' ? (
        <p className="picker-state" role="status">
          <Spinner /> {words.loading}
        </p>
      ) : load.kind === 'error' ? (
        <div className="picker-state" role="alert">
          <p>
            {words.failed}: {load.message}
          </p>
          <button type="button" className="btn btn-small" onClick={() => void read()}>
            Try again
          </button>
        </div>
      ) : shown.length === 0 ? (
        <p className="picker-state" role="status">
          {load.list.length + load.fresh.length === 0 ? words.none(scope) : `Nothing matches “${query}”.`}
        </p>
      ) : (
        <ul className="picker-list" role="listbox" id={ids.list} aria-label={words.list}>
          {shown.map((row, i) => {
            const key = rowKey(row);
            const option = { id: optionId(key), role: 'option', 'aria-selected': i === current, className: i === current ? 'picker-option picker-option-active' : 'picker-option' } as const;
            const select = {
              onClick: () => onChoose(row),
              onMouseMove: () => {
                if (i !== current) setActive(i);
              },
            };
            if (row.kind === 'fresh') {
              return (
                <li key={key} {...option} {...select}>
                  <span className="picker-row">
                    <span className="picker-name">{row.project}</span>
                    <span className="badge">
                      <span className="badge-dot" aria-hidden="true" />
                      New
                    </span>
                  </span>
                  <span className="picker-last">{FRESH_LINE}</span>
                </li>
              );
            }
            const w = row.workspace;
            const when = w.lastActivityAt ?? w.updatedAt;
            const quote = last[w.slug];
            return (
              <li key={key} {...option} {...select}>
                <span className="picker-row">
                  <span className="picker-name">
                    {w.isDefault ? w.project : w.name}
                    {w.isDefault && audience === 'engineer' ? <span className="card-tag">default</span> : null}
                    {manyProjects && !w.isDefault ? <span className="muted"> · {w.project}</span> : null}
                  </span>
                  <StateBadge state={w.state} audience={audience} />
                  <time className="picker-time" dateTime={when}>
                    {relativeTime(when)}
                  </time>
                </span>
                <span className="picker-last">
                  {quote
                    ? quoteLine(quote)
                    : w.state === 'stopped'
                      ? words.stopped
                      : w.state === 'failed'
                        ? (w.failureReason ?? 'Failed to start.')
                        : w.state === 'creating'
                          ? 'Starting…'
                          : quote === null
                            ? 'No messages yet.'
                            : '\u00a0'}
                </span>
              </li>
            );
          })}
        </ul>
      )}
      <div className="dialog-actions picker-actions">
        <span className="picker-keys" aria-hidden="true">
          <kbd className="kbd">↑</kbd> <kbd className="kbd">↓</kbd> move · <kbd className="kbd">Enter</kbd> open · <kbd className="kbd">Esc</kbd> close
        </span>
        <button type="button" className="btn" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Modal>
  );
}
