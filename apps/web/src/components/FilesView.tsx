// The workspace's Files view: the worktree as a keyboard-navigable tree (one directory read at a time, with git status
// marks) and a read-only viewer with line numbers and syntax highlighting (highlight.js, loaded on first use). Both read
// GET /w/<slug>/files/... from the sandbox, so a stopped workspace offers Reopen instead.
'use client';

import { useCallback, useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { FILE_CONTENT_CAP } from '@grove/contracts';
import type { FileContentResponse, FileEntry, GitMark, Workspace } from '@grove/contracts';
import { api, isApiError, messageOf } from '../lib/api.ts';
import { useWorkbench } from '../lib/workbench.ts';
import { StoppedView } from './StoppedView.tsx';
import './FilesView.css';

interface Props {
  slug: string;
  workspace: Workspace;
  visible: boolean;
  onChanged: () => void;
}

type DirState = { state: 'loading' } | { state: 'ready'; entries: FileEntry[]; truncated: boolean; gitError?: string } | { state: 'error'; message: string };
type OpenFile = { path: string; state: 'loading' } | { path: string; state: 'ready'; file: FileContentResponse } | { path: string; state: 'error'; message: string };

const MARK_LABEL: Record<GitMark, string> = { M: 'modified', A: 'added', D: 'deleted', R: 'renamed', U: 'conflicted', '?': 'untracked' };
const MARK_CLASS: Record<GitMark, string> = { M: 'm', A: 'a', D: 'd', R: 'r', U: 'u', '?': 'q' };

interface Row {
  entry: FileEntry;
  depth: number;
  parent: string;
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

export function FilesView({ slug, workspace, visible, onChanged }: Props) {
  const running = workspace.state === 'running';
  const { requestedFile } = useWorkbench();
  const [dirs, setDirs] = useState<ReadonlyMap<string, DirState>>(new Map());
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const [focused, setFocused] = useState<string | null>(null);
  const [open, setOpen] = useState<OpenFile | null>(null);
  const treeRef = useRef<HTMLUListElement>(null);
  const handled = useRef(0);

  const loadDir = useCallback(
    async (path: string): Promise<FileEntry[] | null> => {
      setDirs((m) => new Map(m).set(path, m.get(path)?.state === 'ready' ? (m.get(path) as DirState) : { state: 'loading' }));
      try {
        const r = await api.filesTree(slug, path);
        setDirs((m) => new Map(m).set(path, { state: 'ready', entries: r.entries, truncated: r.truncated, gitError: r.gitError }));
        return r.entries;
      } catch (e) {
        setDirs((m) => new Map(m).set(path, { state: 'error', message: messageOf(e) }));
        return null;
      }
    },
    [slug],
  );

  const openFile = useCallback(
    async (path: string) => {
      setOpen({ path, state: 'loading' });
      try {
        const file = await api.fileContent(slug, path);
        setOpen((o) => (o?.path === path ? { path, state: 'ready', file } : o));
      } catch (e) {
        const message = isApiError(e) && e.status === 404 ? `${path} is not in the workspace (deleted or moved?).` : messageOf(e);
        setOpen((o) => (o?.path === path ? { path, state: 'error', message } : o));
      }
    },
    [slug],
  );

  useEffect(() => {
    if (running) void loadDir('');
  }, [running, loadDir]);

  // "Open file" from a diff: expand every parent (reading each in turn), then open and focus the file.
  useEffect(() => {
    if (!running || !requestedFile || requestedFile.seq === handled.current) return;
    handled.current = requestedFile.seq;
    const path = requestedFile.path;
    void (async () => {
      const parts = path.split('/').filter(Boolean);
      const parents = parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
      setExpanded((s) => new Set([...s, ...parents]));
      for (const p of parents) await loadDir(p);
      setFocused(path);
      await openFile(path);
    })();
  }, [running, requestedFile, loadDir, openFile]);

  const rows: Row[] = [];
  const walk = (dir: string, depth: number) => {
    const d = dirs.get(dir);
    if (d?.state !== 'ready') return;
    for (const entry of d.entries) {
      rows.push({ entry, depth, parent: dir });
      if (entry.kind === 'dir' && !entry.deleted && expanded.has(entry.path)) walk(entry.path, depth + 1);
    }
  };
  walk('', 0);

  const toggle = (path: string, to?: boolean) => {
    const willOpen = to ?? !expanded.has(path);
    setExpanded((s) => {
      const next = new Set(s);
      if (willOpen) next.add(path);
      else next.delete(path);
      return next;
    });
    if (willOpen) void loadDir(path);
  };

  const activate = (row: Row) => {
    setFocused(row.entry.path);
    if (row.entry.kind === 'dir') {
      if (!row.entry.deleted) toggle(row.entry.path);
    } else if (row.entry.kind === 'file' && !row.entry.deleted) void openFile(row.entry.path);
    else setOpen({ path: row.entry.path, state: 'error', message: describeUnopenable(row.entry) });
  };

  const focusRow = (path: string) => {
    setFocused(path);
    // After React renders the new tabIndex; the row exists already.
    treeRef.current?.querySelector<HTMLElement>(`[data-path="${CSS.escape(path)}"]`)?.focus();
  };

  const onKeyDown = (e: KeyboardEvent<HTMLUListElement>) => {
    const i = rows.findIndex((r) => r.entry.path === focused);
    const row = rows[i];
    if (!row) return;
    const isDir = row.entry.kind === 'dir' && !row.entry.deleted;
    let next: string | undefined;
    switch (e.key) {
      case 'ArrowDown':
        next = rows[i + 1]?.entry.path;
        break;
      case 'ArrowUp':
        next = rows[i - 1]?.entry.path;
        break;
      case 'Home':
        next = rows[0]?.entry.path;
        break;
      case 'End':
        next = rows.at(-1)?.entry.path;
        break;
      case 'ArrowRight':
        if (isDir && !expanded.has(row.entry.path)) toggle(row.entry.path, true);
        else if (isDir) next = rows[i + 1]?.parent === row.entry.path ? rows[i + 1]?.entry.path : undefined;
        break;
      case 'ArrowLeft':
        if (isDir && expanded.has(row.entry.path)) toggle(row.entry.path, false);
        else if (row.parent !== '') next = row.parent;
        break;
      case 'Enter':
      case ' ':
        activate(row);
        break;
      default:
        return;
    }
    e.preventDefault();
    if (next !== undefined) focusRow(next);
  };

  const refresh = () => {
    void loadDir('');
    for (const p of expanded) void loadDir(p);
    if (open) void openFile(open.path);
  };

  if (!running) {
    return (
      <StoppedView slug={slug} workspace={workspace} onChanged={onChanged} lives="its files are read from its sandbox" />
    );
  }

  const top = dirs.get('');
  const tabStop = focused !== null && rows.some((r) => r.entry.path === focused) ? focused : (rows[0]?.entry.path ?? null);
  return (
    <div className="files-view">
      <div className="files-side">
        <div className="files-toolbar">
          <span className="files-title">Files</span>
          <button type="button" className="btn btn-small" onClick={refresh}>
            Refresh
          </button>
        </div>
        {top?.state === 'error' ? (
          <p className="files-error" role="alert">
            {top.message}
          </p>
        ) : null}
        {top?.state === 'ready' && top.gitError ? <p className="files-note">No git marks: {top.gitError}</p> : null}
        {top?.state === 'loading' ? <p className="files-note">Reading the files…</p> : null}
        <ul className="files-tree" role="tree" aria-label="Files of the workspace" ref={treeRef} onKeyDown={onKeyDown}>
          {rows.map((row) => (
            <TreeRow key={row.entry.path} row={row} expanded={expanded.has(row.entry.path)} dir={dirs.get(row.entry.path)} tabbable={row.entry.path === tabStop} selected={open?.path === row.entry.path} onActivate={activate} onFocus={setFocused} />
          ))}
        </ul>
      </div>
      <FileViewer open={open} visible={visible} />
    </div>
  );
}

function describeUnopenable(entry: FileEntry): string {
  if (entry.deleted) return `${entry.path} was deleted; its last version is in the diff.`;
  if (entry.kind === 'symlink') return `${entry.path} is a link to ${entry.target ?? '?'}; links are shown, never followed.`;
  return `${entry.path} is not a regular file (a FIFO, socket or device); it is not opened.`;
}

function TreeRow({
  row,
  expanded,
  dir,
  tabbable,
  selected,
  onActivate,
  onFocus,
}: {
  row: Row;
  expanded: boolean;
  dir: DirState | undefined;
  tabbable: boolean;
  selected: boolean;
  onActivate: (row: Row) => void;
  onFocus: (path: string) => void;
}) {
  const { entry } = row;
  const isDir = entry.kind === 'dir' && !entry.deleted;
  return (
    <li
      role="treeitem"
      aria-level={row.depth + 1}
      aria-expanded={isDir ? expanded : undefined}
      aria-selected={selected}
      data-path={entry.path}
      tabIndex={tabbable ? 0 : -1}
      className={`files-row${entry.deleted ? ' is-deleted' : ''}`}
      style={{ paddingLeft: `${0.5 + row.depth * 1}rem` }}
      onClick={(e) => {
        e.stopPropagation();
        onActivate(row);
      }}
      onFocus={(e) => {
        if (e.target === e.currentTarget) onFocus(entry.path);
      }}
    >
      <span className="files-icon" aria-hidden="true">
        {isDir ? (expanded ? '▾' : '▸') : entry.kind === 'symlink' ? '↪' : ' '}
      </span>
      <span className="files-name">{entry.name}</span>
      {entry.kind === 'symlink' ? <span className="files-target">→ {entry.target}</span> : null}
      {isDir && expanded && dir?.state === 'loading' ? <span className="files-note-inline">…</span> : null}
      {isDir && expanded && dir?.state === 'error' ? <span className="files-error-inline">{dir.message}</span> : null}
      {entry.mark ? (
        <span className={`files-mark mark-${MARK_CLASS[entry.mark]}`} title={MARK_LABEL[entry.mark]} aria-label={MARK_LABEL[entry.mark]}>
          {entry.mark}
        </span>
      ) : null}
    </li>
  );
}

/** Languages the viewer colours; anything else is shown as plain text. */
const LANGUAGE_BY_EXT: Record<string, string> = {
  js: 'javascript',
  mjs: 'javascript',
  cjs: 'javascript',
  jsx: 'javascript',
  ts: 'typescript',
  tsx: 'typescript',
  mts: 'typescript',
  json: 'json',
  css: 'css',
  html: 'xml',
  xml: 'xml',
  svg: 'xml',
  md: 'markdown',
  py: 'python',
  sh: 'bash',
  bash: 'bash',
  yml: 'yaml',
  yaml: 'yaml',
};

export function languageOf(path: string): string | null {
  const ext = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return ext ? (LANGUAGE_BY_EXT[ext] ?? null) : null;
}

type Highlighter = (text: string, language: string) => string;
let highlighter: Promise<Highlighter> | null = null;

/** highlight.js core with the few languages above, loaded once on the first file that needs it. */
function loadHighlighter(): Promise<Highlighter> {
  highlighter ??= (async () => {
    const [{ default: hljs }, js, ts, json, css, xml, md, py, bash, yaml] = await Promise.all([
      import('highlight.js/lib/core'),
      import('highlight.js/lib/languages/javascript'),
      import('highlight.js/lib/languages/typescript'),
      import('highlight.js/lib/languages/json'),
      import('highlight.js/lib/languages/css'),
      import('highlight.js/lib/languages/xml'),
      import('highlight.js/lib/languages/markdown'),
      import('highlight.js/lib/languages/python'),
      import('highlight.js/lib/languages/bash'),
      import('highlight.js/lib/languages/yaml'),
    ]);
    const langs = { javascript: js, typescript: ts, json, css, xml, markdown: md, python: py, bash, yaml };
    for (const [name, mod] of Object.entries(langs)) hljs.registerLanguage(name, mod.default);
    // hljs escapes the text itself; its output holds only its own <span class="hljs-..."> tags.
    return (text, language) => hljs.highlight(text, { language, ignoreIllegals: true }).value;
  })();
  return highlighter;
}

function FileViewer({ open, visible }: { open: OpenFile | null; visible: boolean }) {
  const [html, setHtml] = useState<{ text: string; html: string } | null>(null);
  const file = open?.state === 'ready' ? open.file : null;
  const text = file && !file.binary ? file.text : null;
  const language = open ? languageOf(open.path) : null;

  useEffect(() => {
    if (text === null || language === null || !visible) return;
    let cancelled = false;
    void loadHighlighter().then((hl) => {
      if (!cancelled) setHtml({ text, html: hl(text, language) });
    });
    return () => {
      cancelled = true;
    };
  }, [text, language, visible]);

  if (!open) return <div className="files-viewer files-empty">Choose a file to see its content.</div>;
  const lines = text === null ? 0 : text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  return (
    <div className="files-viewer" role="region" aria-label={`Content of ${open.path}`}>
      <div className="files-viewer-head">
        <span className="files-viewer-path">{open.path}</span>
        {file ? <span className="files-size">{formatSize(file.size)}</span> : null}
      </div>
      {open.state === 'loading' ? <p className="files-note">Reading {open.path}…</p> : null}
      {open.state === 'error' ? (
        <p className="files-error" role="alert">
          {open.message}
        </p>
      ) : null}
      {file?.binary ? <p className="files-note">This file is binary ({formatSize(file.size)}); its content is not shown.</p> : null}
      {file && !file.binary && file.truncated ? (
        <p className="files-note" role="status">
          This file is {formatSize(file.size)}: only its first {formatSize(FILE_CONTENT_CAP)} are shown.
        </p>
      ) : null}
      {text !== null ? (
        <div className="files-code">
          <pre className="files-lines" aria-hidden="true">
            {Array.from({ length: Math.max(lines, 1) }, (_, i) => i + 1).join('\n')}
          </pre>
          {html && html.text === text && language !== null ? (
            <pre className="files-text">
              <code className={`hljs language-${language ?? 'plaintext'}`} dangerouslySetInnerHTML={{ __html: html.html }} />
            </pre>
          ) : (
            <pre className="files-text">
              <code>{text}</code>
            </pre>
          )}
        </div>
      ) : null}
    </div>
  );
}
