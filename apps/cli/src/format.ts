// Pure text helpers of the CLI: tables, relative times, one-line cells, the workspace URL, resume order.
import type { DiffResponse, LastMessage, OverlayFileInfo, Workspace } from '@grove/contracts';

/** Columns padded to their widest cell, two spaces apart; trailing blanks trimmed. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()).join('\n');
}

/**
 * Text an agent wrote, made safe to print in a terminal: control characters (ESC and the sequences it starts, a bell,
 * a carriage return; C1 too) become spaces, so a reply cannot set the clipboard, retitle the window or redraw the
 * screen. Newlines and tabs stay unless `flat`.
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, ' ');
}

/** A cell on one line of at most `max` characters. */
export function oneLine(text: string, max: number): string {
  const flat = printable(text).replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  return max <= 1 ? flat.slice(0, max) : `${flat.slice(0, max - 1).trimEnd()}…`;
}

/** "just now", "5m ago", "3h ago", "2d ago"; "-" for no time. */
export function ago(iso: string | null, now: number): string {
  if (!iso) return '-';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '-';
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/** Where the dashboard opens a workspace: <url>/p/<project>/w/<name> (the default workspace's name is "default"). */
export function workspaceUrl(base: string, w: Pick<Workspace, 'project' | 'name'>): string {
  return `${base}/p/${encodeURIComponent(w.project)}/w/${encodeURIComponent(w.name)}`;
}

function activity(w: Workspace): number {
  const t = Date.parse(w.lastActivityAt ?? w.updatedAt);
  return Number.isNaN(t) ? 0 : t;
}

/** Workspaces one can go back to (not gone or being torn down), most recently active first. */
export function resumeCandidates(workspaces: readonly Workspace[]): Workspace[] {
  return workspaces
    .filter((w) => w.state !== 'gone' && w.state !== 'tearing-down')
    .sort((a, b) => activity(b) - activity(a) || a.slug.localeCompare(b.slug));
}

export function quote(m: LastMessage | null | undefined, max: number): string {
  if (!m) return '-';
  return oneLine(`${m.who}: ${m.text}`, max);
}

/** The non-interactive `grove resume` list. */
export function resumeTable(rows: ReadonlyArray<{ workspace: Workspace; lastMessage: LastMessage | null }>, now: number, messageWidth = 60): string {
  return table([
    ['#', 'SLUG', 'STATE', 'LAST ACTIVITY', 'LAST MESSAGE'],
    ...rows.map((r, i) => [String(i + 1), r.workspace.slug, r.workspace.state, ago(r.workspace.lastActivityAt, now), quote(r.lastMessage, messageWidth)]),
  ]);
}

/** The PR column of `grove ls`: "#12 open", or "-" without a pull request. */
export function prCell(pr: Workspace['pullRequest']): string {
  return pr ? `#${pr.number} ${pr.state}` : '-';
}

/** Where the branch stands against the default branch, and whether there is work not yet checkpointed. */
export function diffHeadline(d: Pick<DiffResponse, 'branch' | 'defaultBranch' | 'ahead' | 'behind' | 'uncommitted' | 'files'>): string {
  const commits = (n: number) => `${n} ${n === 1 ? 'commit' : 'commits'}`;
  const files = d.files.length === 1 ? '1 file changed' : `${d.files.length} files changed`;
  return `${d.branch}: ${commits(d.ahead)} ahead of ${d.defaultBranch}, ${commits(d.behind)} behind; ${files}${d.uncommitted ? ' (some not checkpointed yet)' : ''}`;
}

/** `grove diff --stat`: one row per file with its +/- counts ("bin" for a binary file), and the totals. */
export function diffStat(files: DiffResponse['files']): string {
  if (!files.length) return 'No changes against the fork point.';
  // Paths are the agent's to choose, control characters included.
  const rows = files.map((f) => [f.status, f.additions === null ? 'bin' : `+${f.additions}`, f.deletions === null ? '' : `-${f.deletions}`, printable(f.from ? `${f.from} -> ${f.path}` : f.path)]);
  const add = files.reduce((n, f) => n + (f.additions ?? 0), 0);
  const del = files.reduce((n, f) => n + (f.deletions ?? 0), 0);
  return `${table(rows)}\n${files.length} ${files.length === 1 ? 'file' : 'files'}, +${add} -${del}`;
}

/** `grove project overlay ls|set|rm`: the project's overlay files and how its sandboxes get each. */
export function overlayTable(files: readonly OverlayFileInfo[], project: string): string {
  if (!files.length) return `No overlay files for ${project}. Add one: grove project overlay set ${project} .env --from ./.env`;
  return table([['PATH', 'IN THE SANDBOX', 'SIZE'], ...files.map((f) => [f.path, f.writable ? 'copied (writable)' : 'mounted read-only', `${f.size} B`])]);
}
