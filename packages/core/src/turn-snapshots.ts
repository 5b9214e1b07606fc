import { existsSync } from 'node:fs';
import { lchown, lstat, mkdtemp, readdir, realpath, rm, rmdir, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { GroveError } from '@grove/contracts';
import type { TurnDiffResponse, TurnFile, TurnSummary } from '@grove/contracts';
import { snapshotTree, stageWorktree } from './git-snapshot.ts';
import { openStore, slugRefBase } from './git-store.ts';
import { execGit, gitText, raw } from './git-exec.ts';
import { PathPolicy } from './path-globs.ts';

/**
 * The host's after-turn guardrails and the per-turn snapshots behind undo (docs/agents.md).
 *
 * Every git call here goes through git-exec.ts with GIT_DIR = the workspace's own object store
 * (paths.workspaceObjects: host-only, never mounted; its alternates borrow the primary's objects),
 * GIT_WORK_TREE = the worktree and a throwaway index. The worktree's own `.git` file, index and
 * admin dir are writable from the sandbox, so host git never reads them: an agent could otherwise
 * plant a config that runs a command as the host user, or an index whose stat data hides a change.
 * Snapshots live in the store, not in the primary every sandbox of the project mounts, so another
 * workspace can read neither their refs nor their objects.
 *
 * Refs, in the store (the slug's "~" is "+" in ref names, as for the teardown refs):
 *   refs/grove/<slug>/turns/<n>   the worktree after turn n; its parent is the worktree before it
 *   refs/grove/<slug>/worktree    the last state recorded (after a snapshot or an undo)
 *   refs/grove/<slug>/undone/<n>  a snapshot that was undone (kept, so nothing is ever lost)
 */

export interface WorktreeContext {
  /** The bare primary repository: the common git dir (branches). */
  repo: string;
  /** The workspace's private object store (paths.workspaceObjects): snapshots, refs. */
  objects: string;
  worktree: string;
  slug: string;
  /** The workspace's branch, e.g. grove/feature (without refs/heads/). */
  branch: string;
  /** Owner of files the host writes into the worktree (the sandbox uid), when the host may chown. */
  owner?: { uid: number; gid: number };
}

export interface Change {
  /** A = not in the base, M = modified, D = deleted, T = type changed. */
  status: 'A' | 'M' | 'D' | 'T';
  path: string;
}

export interface RevertedPath {
  path: string;
  action: 'restored' | 'removed';
}

export interface Snapshot {
  n: number;
  ref: string;
  commit: string;
  /** Paths that differ from the state before the turn. */
  files: string[];
  /** Embedded repositories kept as they were, never entered (so not in the snapshot). */
  embedded: string[];
}

export interface UndoResult {
  n: number;
  /** Where the undone snapshot is kept now. */
  ref: string;
  /** The commit whose tree the worktree now has. */
  restored: string;
  files: string[];
  /** Snapshots still on the stack. */
  remaining: number;
}

const IDENTITY = { GIT_AUTHOR_NAME: 'Grove', GIT_AUTHOR_EMAIL: 'grove@localhost', GIT_COMMITTER_NAME: 'Grove', GIT_COMMITTER_EMAIL: 'grove@localhost' };
const ZERO = '0'.repeat(40);

export function refBase(slug: string): string {
  return slugRefBase(slug);
}
export const turnRef = (slug: string, n: number) => `${refBase(slug)}/turns/${n}`;
const stateRef = (slug: string) => `${refBase(slug)}/worktree`;
const undoneRef = (slug: string, n: number) => `${refBase(slug)}/undone/${n}`;

type StoreContext = Pick<WorktreeContext, 'repo' | 'objects' | 'slug'>;

/**
 * A throwaway index over the worktree, in a host-only temp dir. Snapshots use git.ts's snapshotTree;
 * reverts and undo need the index itself afterwards, to check files out of it.
 */
class TempIndex {
  private constructor(
    private readonly ctx: WorktreeContext,
    private readonly dir: string,
  ) {}

  static async open(ctx: WorktreeContext): Promise<TempIndex> {
    return new TempIndex(ctx, await mkdtemp(join(tmpdir(), 'grove-turn-')));
  }

  private get indexFile(): string {
    return join(this.dir, 'index');
  }

  run(args: string[], what: string, input?: string): Promise<string> {
    return gitText({
      gitDir: this.ctx.objects,
      workTree: this.ctx.worktree,
      indexFile: this.indexFile,
      args,
      what,
      input,
      timeoutMs: 600_000,
      // Paths come from git's own listings: each is itself, never a glob.
      env: { GIT_LITERAL_PATHSPECS: '1' },
    });
  }

  /**
   * The worktree as a tree (changes and untracked files that are not ignored), and what differs from base.
   * The same staging as every snapshot (git.ts, stageWorktree): embedded repositories are never entered, and
   * overlay files (the user's, not the turn's) are never reverted, undone or snapshotted.
   */
  async scan(base: string): Promise<{ tree: string; changes: Change[] }> {
    await stageWorktree({ repo: this.ctx.repo, gitDir: this.ctx.objects, worktree: this.ctx.worktree, indexFile: this.indexFile, parent: base });
    const tree = (await this.run(['write-tree'], 'writing the worktree tree')).trim();
    const out = await this.run(['diff-index', '--cached', '--no-renames', '--name-status', '-z', base], 'listing changes');
    return { tree, changes: parseNameStatus(out) };
  }

  /** Writes these paths from `source` (a commit or tree) into the worktree. */
  async checkout(source: string, paths: string[]): Promise<void> {
    if (paths.length === 0) return;
    await this.run(['checkout', source, '--pathspec-from-file=-', '--pathspec-file-nul'], 'restoring files', paths.map((p) => `${p}\0`).join(''));
  }

  async dispose(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

async function withIndex<T>(ctx: WorktreeContext, fn: (index: TempIndex) => Promise<T>): Promise<T> {
  const index = await TempIndex.open(ctx);
  try {
    return await fn(index);
  } finally {
    await index.dispose();
  }
}

export function parseNameStatus(out: string): Change[] {
  const parts = out.split('\0');
  const changes: Change[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const status = parts[i]?.charAt(0);
    const path = parts[i + 1];
    if (!path || (status !== 'A' && status !== 'M' && status !== 'D' && status !== 'T')) continue;
    changes.push({ status, path });
  }
  return changes;
}

/** Runs in the workspace's store (refs, objects), never in the worktree. */
function repoGit(ctx: Pick<WorktreeContext, 'objects'>, args: string[], what: string, input?: string): Promise<string> {
  return gitText({ gitDir: ctx.objects, args, what, input, env: IDENTITY });
}

async function resolveRef(ctx: Pick<WorktreeContext, 'objects'>, ref: string): Promise<string | null> {
  const out = await repoGit(ctx, ['for-each-ref', '--format=%(objectname)', ref], `resolving ${ref}`);
  return out.trim().split('\n')[0] || null;
}

async function treeOf(ctx: WorktreeContext, commit: string): Promise<string> {
  return (await repoGit(ctx, ['rev-parse', `${commit}^{tree}`], `reading the tree of ${commit}`)).trim();
}

/** The branch lives in the primary (its objects are the store's too, through alternates). */
async function branchCommit(ctx: WorktreeContext): Promise<string> {
  const sha = await resolveRef({ objects: ctx.repo }, `refs/heads/${ctx.branch}`);
  if (!sha) throw new GroveError('git_failed', `branch ${ctx.branch} of ${ctx.slug} does not exist`);
  return sha;
}

/**
 * Reverts every change outside the allowed globs (relative to the branch): tracked files are
 * restored from the branch, new files removed. Repeats once more when something was reverted, so a
 * changed .gitignore cannot hide new files from the check.
 */
export async function revertOutsideAllowed(ctx: WorktreeContext, allowed: readonly string[] | undefined): Promise<RevertedPath[]> {
  const policy = new PathPolicy(allowed);
  if (!policy.restricted) return [];
  await openStore(ctx.repo, ctx.objects, ctx.slug);
  const base = await branchCommit(ctx);
  const reverted: RevertedPath[] = [];
  for (let pass = 0; pass < 3; pass++) {
    const outside = await withIndex(ctx, async (index) => {
      const { changes } = await index.scan(base);
      const bad = changes.filter((c) => !policy.allows(c.path));
      const restore = bad.filter((c) => c.status !== 'A').map((c) => c.path);
      await index.checkout(base, restore);
      await fixOwnership(ctx, restore);
      for (const c of bad.filter((x) => x.status === 'A')) await removeInWorktree(ctx.worktree, c.path);
      return bad;
    });
    if (outside.length === 0) break;
    for (const c of outside) reverted.push({ path: c.path, action: c.status === 'A' ? 'removed' : 'restored' });
  }
  return reverted;
}

/**
 * Records the worktree after turn n on refs/grove/<slug>/turns/<n>, as a commit whose parent is
 * the state before the turn. Null when the turn changed nothing. The branch never moves.
 */
export async function recordSnapshot(ctx: WorktreeContext, o: { n: number; turn: string }): Promise<Snapshot | null> {
  await openStore(ctx.repo, ctx.objects, ctx.slug);
  const prev = (await resolveRef(ctx, stateRef(ctx.slug))) ?? (await branchCommit(ctx));
  // The same throwaway-index tree the teardown recovery refs use, written into the store.
  const { tree, embedded } = await snapshotTree({ repo: ctx.repo, gitDir: ctx.objects, worktree: ctx.worktree, parent: prev });
  if (tree === (await treeOf(ctx, prev))) return null;
  const changes = parseNameStatus(await repoGit(ctx, ['diff-tree', '-r', '--no-renames', '--name-status', '-z', prev, tree], 'listing the turn\'s changes'));
  const commit = (await repoGit(ctx, ['commit-tree', tree, '-p', prev, '-m', `grove: ${ctx.slug} after ${o.turn}`], 'recording the snapshot')).trim();
  const ref = turnRef(ctx.slug, o.n);
  // Create-only: a snapshot is never overwritten (a repeated hook for the same turn records nothing new).
  await repoGit(ctx, ['update-ref', '-m', `grove: after ${o.turn}`, ref, commit, ZERO], `writing ${ref}`).catch(async (err: unknown) => {
    if ((await resolveRef(ctx, ref)) === null) throw err;
  });
  await repoGit(ctx, ['update-ref', '-m', `grove: after ${o.turn}`, stateRef(ctx.slug), commit], 'moving the worktree state ref');
  return { n: o.n, ref, commit, files: changes.map((c) => c.path), embedded };
}

/** The snapshots still on the undo stack, newest first. */
export async function listSnapshots(ctx: WorktreeContext): Promise<Array<{ n: number; commit: string }>> {
  await openStore(ctx.repo, ctx.objects, ctx.slug);
  const prefix = `${refBase(ctx.slug)}/turns/`;
  const out = await repoGit(ctx, ['for-each-ref', '--format=%(refname) %(objectname)', prefix], 'listing snapshots');
  const entries: Array<{ n: number; commit: string }> = [];
  for (const line of out.split('\n')) {
    const [ref = '', commit = ''] = line.trim().split(' ');
    const n = Number(ref.slice(prefix.length));
    if (Number.isSafeInteger(n) && n > 0 && commit) entries.push({ n, commit });
  }
  return entries.sort((a, b) => b.n - a.n);
}

/**
 * Puts the worktree back to how it was before the newest snapshot's turn: files that turn changed
 * or deleted are restored, files it added are removed. The snapshot moves to undone/<n>; if the
 * worktree changed again since it was taken, that state is kept there too, as a child commit.
 * Null when there is nothing to undo.
 */
export async function undoLast(ctx: WorktreeContext): Promise<UndoResult | null> {
  const [last, ...rest] = await listSnapshots(ctx);
  if (!last) return null;
  const before = (await repoGit(ctx, ['rev-parse', `${last.commit}^1`], 'reading the state before the turn')).trim();
  const files = await withIndex(ctx, async (index) => {
    const { tree: now, changes } = await index.scan(before);
    let keep = last.commit;
    if (now !== (await treeOf(ctx, last.commit))) {
      keep = (await repoGit(ctx, ['commit-tree', now, '-p', last.commit, '-m', `grove: ${ctx.slug} worktree at undo of turn ${last.n}`], 'saving the worktree before undo')).trim();
    }
    await repoGit(ctx, ['update-ref', '-m', 'grove: undo', undoneRef(ctx.slug, last.n), keep], 'keeping the undone snapshot');
    const restore = changes.filter((c) => c.status !== 'A').map((c) => c.path);
    await index.checkout(before, restore);
    await fixOwnership(ctx, restore);
    for (const c of changes.filter((x) => x.status === 'A')) await removeInWorktree(ctx.worktree, c.path);
    return changes.map((c) => c.path);
  });
  await repoGit(ctx, ['update-ref', '-m', 'grove: undo', stateRef(ctx.slug), before], 'moving the worktree state ref');
  await repoGit(ctx, ['update-ref', '-d', turnRef(ctx.slug, last.n), last.commit], 'removing the undone snapshot from the stack');
  return { n: last.n, ref: undoneRef(ctx.slug, last.n), restored: before, files, remaining: rest.length };
}

// ---- reading the turns back (GET /turns, GET /turns/:n/diff): refs and objects only, no container ----

/** A snapshot as recorded: on the undo stack (turns/<n>) or undone (undone/<n>). */
interface RecordedTurn {
  n: number;
  /** The snapshot commit: the worktree after the turn. */
  commit: string;
  /** The worktree before the turn. */
  parent: string;
  at: string;
  undone: boolean;
}

/** What the after-turn check put back, as recorded in the turn.reverted events. */
export interface RevertRecord {
  n: number;
  at: string;
  allowedPaths: string[];
  paths: Array<{ path: string; action: 'restored' | 'removed' }>;
}

/** The reverts of one workspace (by row id: a slug can be reused) out of turn.reverted events. */
export function revertsFromEvents(events: ReadonlyArray<{ data: Record<string, unknown>; at: string }>, workspaceId: number): RevertRecord[] {
  const out: RevertRecord[] = [];
  for (const e of events) {
    const d = e.data;
    const m = typeof d.turn === 'string' ? /^turn-([1-9][0-9]{0,8})$/.exec(d.turn) : null;
    if (d.workspaceId !== workspaceId || !m?.[1] || !Array.isArray(d.paths)) continue;
    const paths: RevertRecord['paths'] = [];
    for (const p of d.paths as unknown[]) {
      const r = p as { path?: unknown; action?: unknown } | null;
      if (typeof r?.path === 'string' && (r.action === 'restored' || r.action === 'removed')) paths.push({ path: r.path, action: r.action });
    }
    const allowedPaths = Array.isArray(d.allowedPaths) ? d.allowedPaths.filter((g): g is string => typeof g === 'string') : [];
    out.push({ n: Number(m[1]), at: e.at, allowedPaths, paths });
  }
  return out;
}

/** At most this many turns are listed (newest first); older ones stay readable by number. */
export const MAX_LISTED_TURNS = 200;
/** A turn's diff is cut (at a line end) beyond this many bytes. */
export const DIFF_LIMIT_BYTES = 256 * 1024;

const UNDO_KEEP_SUBJECT = ' worktree at undo of turn ';

async function recordedTurns(ctx: StoreContext): Promise<RecordedTurn[]> {
  await openStore(ctx.repo, ctx.objects, ctx.slug);
  const base = refBase(ctx.slug);
  const out = await repoGit(
    ctx,
    ['for-each-ref', '--format=%(refname)%00%(objectname)%00%(parent)%00%(committerdate:iso-strict)%00%(subject)%00', `${base}/turns/`, `${base}/undone/`],
    'listing the recorded turns',
  );
  const fields = out.split('\0');
  const byN = new Map<number, RecordedTurn>();
  const keptAtUndo: RecordedTurn[] = [];
  for (let i = 0; i + 4 < fields.length; i += 5) {
    const [ref = '', commit = '', parent = '', at = '', subject = ''] = fields.slice(i, i + 5).map((f) => f.trim());
    const m = /\/(turns|undone)\/([1-9][0-9]{0,8})$/.exec(ref);
    if (!m?.[2] || !commit || !parent) continue;
    const n = Number(m[2]);
    const undone = m[1] === 'undone';
    // The stack wins over undone/<n> (an undo in progress moves one to the other).
    if (undone && byN.get(n)?.undone === false) continue;
    const entry: RecordedTurn = { n, commit, parent, at, undone };
    byN.set(n, entry);
    // The worktree had changed again when this turn was undone: undone/<n> is that state, its parent the snapshot.
    if (undone && subject.includes(UNDO_KEEP_SUBJECT)) keptAtUndo.push(entry);
  }
  for (const entry of keptAtUndo) {
    if (byN.get(entry.n) !== entry) continue;
    const line = await repoGit(ctx, ['log', '-1', '--format=%H %P %cI', entry.parent], `reading the snapshot of turn ${entry.n}`);
    const [commit = '', parent = '', at = ''] = line.trim().split(' ');
    if (commit && parent) byN.set(entry.n, { ...entry, commit, parent, at });
  }
  return [...byN.values()].sort((a, b) => b.n - a.n);
}

/** Parses `diff-tree --raw --numstat -z`: raw records (":<modes> <ids> <status>\0<path>\0") then numstat ("<a>\t<d>\t<path>\0"). */
export function parseRawNumstat(out: string): TurnFile[] {
  const parts = out.split('\0');
  const files = new Map<string, TurnFile>();
  const STATUS = { A: 'added', M: 'modified', D: 'deleted', T: 'type_changed' } as const;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? '';
    if (part.startsWith(':')) {
      const code = part.slice(part.lastIndexOf(' ') + 1).charAt(0);
      const path = parts[i + 1];
      i++;
      if (!path || !(code in STATUS)) continue;
      files.set(path, { path, status: STATUS[code as keyof typeof STATUS], added: null, removed: null });
      continue;
    }
    const m = /^(-|\d+)\t(-|\d+)\t([\s\S]+)$/.exec(part);
    const file = m?.[3] === undefined ? undefined : files.get(m[3]);
    if (!m || !file) continue;
    file.added = m[1] === '-' ? null : Number(m[1]);
    file.removed = m[2] === '-' ? null : Number(m[2]);
  }
  return [...files.values()];
}

/**
 * The turns that changed files (snapshots, on the stack or undone) or had changes put back
 * (`reverts`, from the turn.reverted events), newest first. Reads only refs and objects of the
 * workspace's store: it works while the workspace is stopped. Call under the repository lock (the
 * first use of a store moves an older Grove's refs into it).
 */
export async function listTurns(ctx: StoreContext, reverts: readonly RevertRecord[] = []): Promise<TurnSummary[]> {
  const recorded = await recordedTurns(ctx);
  const next = recorded.find((t) => !t.undone)?.n;
  const byN = new Map<number, TurnSummary>();
  for (const t of recorded.slice(0, MAX_LISTED_TURNS)) {
    const out = await repoGit(ctx, ['diff-tree', '-r', '--no-renames', '--raw', '--numstat', '-z', t.parent, t.commit], `listing the changes of turn ${t.n}`);
    byN.set(t.n, { n: t.n, turn: `turn-${t.n}`, at: t.at, recorded: true, files: parseRawNumstat(out), reverted: [], allowedPaths: [], undone: t.undone, undoNext: t.n === next });
  }
  for (const r of reverts) {
    const turn = byN.get(r.n) ?? { n: r.n, turn: `turn-${r.n}`, at: r.at, recorded: false, files: [], reverted: [], allowedPaths: [], undone: false, undoNext: false };
    turn.reverted = [...turn.reverted, ...r.paths];
    turn.allowedPaths = r.allowedPaths;
    byN.set(r.n, turn);
  }
  return [...byN.values()].sort((a, b) => b.n - a.n).slice(0, MAX_LISTED_TURNS);
}

/** The unified diff of turn n (before it -> after it), cut at a line end beyond limitBytes. Throws not_found. */
export async function turnDiff(ctx: StoreContext, n: number, limitBytes = DIFF_LIMIT_BYTES): Promise<TurnDiffResponse> {
  const t = (await recordedTurns(ctx)).find((x) => x.n === n);
  if (!t) throw new GroveError('not_found', `workspace "${ctx.slug}" has no recorded changes for turn ${n}: that turn changed no files, or it does not exist`, { details: { slug: ctx.slug, n } });
  const { text, truncated } = await cappedGit(
    ctx.objects,
    // No external diff or textconv: only git's own diff of the two trees.
    ['diff-tree', '-p', '-r', '--no-renames', '--no-color', '--no-ext-diff', '--no-textconv', t.parent, t.commit],
    limitBytes,
    `reading the changes of turn ${n}`,
  );
  return { n, turn: `turn-${n}`, diff: text, truncated, limitBytes };
}

/** Like repoGit, but keeps at most limitBytes of stdout (cut at the last line end) and stops git beyond that. */
async function cappedGit(gitDir: string, args: string[], limitBytes: number, what: string): Promise<{ text: string; truncated: boolean }> {
  const r = await execGit({ gitDir, args, maxBytes: limitBytes, timeoutMs: 60_000 });
  if (r.timedOut || (r.code !== 0 && !r.overflow)) throw new GroveError('git_failed', `${what}: ${r.stderr.trim() || (r.timedOut ? 'git did not finish in time' : `git exited with ${r.code}`)}`);
  if (!r.overflow) return { text: r.stdout.toString('utf8'), truncated: false };
  const end = r.stdout.lastIndexOf(0x0a);
  return { text: r.stdout.subarray(0, end + 1).toString('utf8'), truncated: true };
}

/** Drops a slug's snapshot refs: a new workspace under an old slug starts its own turn numbers. */
export async function clearSnapshots(ctx: StoreContext): Promise<void> {
  // A slug whose store was never made holds no snapshots of its own, and when the primary holds no refs an older Grove
  // kept for it there either, there is nothing to clear: the store is left for its first reader (openStore) to make,
  // one git process here instead of four on the fork's way.
  if (!existsSync(join(ctx.objects, 'objects', 'info', 'alternates'))) {
    const legacy = await raw(ctx.repo, ['for-each-ref', '--count=1', '--format=%(refname)', `${refBase(ctx.slug)}/`], 'listing old snapshot refs');
    if (!legacy.trim()) return;
  }
  await openStore(ctx.repo, ctx.objects, ctx.slug);
  const out = await repoGit(ctx, ['for-each-ref', '--format=%(refname)', `${refBase(ctx.slug)}/turns/`, `${refBase(ctx.slug)}/undone/`, stateRef(ctx.slug)], 'listing snapshots');
  const refs = out.split('\n').filter(Boolean);
  if (refs.length === 0) return;
  await repoGit(ctx, ['update-ref', '--stdin'], 'removing old snapshots', refs.map((r) => `delete ${r}\n`).join(''));
}

/**
 * Removes a file the agent added, without following a symlink the agent may have put in its path:
 * the parent must resolve to itself inside the worktree. Empty directories left behind go too.
 */
async function removeInWorktree(worktree: string, rel: string): Promise<void> {
  const root = await realpath(worktree);
  const target = resolve(root, rel);
  const parent = dirname(target);
  const realParent = await realpath(parent).catch(() => null);
  if (realParent !== parent || !(parent === root || parent.startsWith(`${root}${sep}`))) return;
  const st = await lstat(target).catch(() => null);
  if (!st) return;
  if (st.isDirectory()) await rm(target, { recursive: true, force: true });
  else await unlink(target);
  let dir = parent;
  while (dir !== root && dir.startsWith(`${root}${sep}`)) {
    if ((await readdir(dir).catch(() => ['?'])).length > 0) break;
    await rmdir(dir).catch(() => undefined);
    dir = dirname(dir);
  }
}

/** Files git wrote as the host user are handed to the sandbox uid, with every directory up to the root. */
async function fixOwnership(ctx: WorktreeContext, paths: string[]): Promise<void> {
  const owner = ctx.owner;
  if (!owner || paths.length === 0) return;
  const root = resolve(ctx.worktree);
  const seen = new Set<string>();
  for (const rel of paths) {
    let p = resolve(root, rel);
    while (p !== root && !relative(root, p).startsWith('..') && !seen.has(p)) {
      seen.add(p);
      await lchown(p, owner.uid, owner.gid).catch(() => undefined);
      p = dirname(p);
    }
  }
}
