import { existsSync } from 'node:fs';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { GroveError, parseRecoveryRef, recoveryRef, recoveryRefPrefix } from '@grove/contracts';
import { execGit, raw } from './git-exec.ts';
import { resolveCommit } from './git.ts';
import { commitAndTree, commitInfo, snapshotTree, snapshotWorktree, writeCommit } from './git-snapshot.ts';

/**
 * Each workspace's private object store (turn snapshots, saved work; never mounted in a sandbox), the recovery
 * refs of saved work, what a teardown would save, and copying a saved commit into the primary for a restore.
 */

// ---- per-workspace object stores (turn snapshots, saved work) ----

/** refs/grove/<slug, "~" as "+">: a workspace's own refs (turns, undone, worktree state, teardown). */
export function slugRefBase(slug: string): string {
  return `refs/grove/${slug.replace('~', '+')}`;
}

/** Where a restore puts saved work in the primary: refs/grove-restore/<project>/<name>/<n> (a valid fork base). */
export function restoreRef(slug: string, n: number): string {
  return `refs/grove-restore/${slug.replace('~', '/')}/${n}`;
}

const openedStores = new Set<string>();

/**
 * Make `objects` the workspace's private store: a bare repository (host-only, never mounted) whose
 * objects/info/alternates names the primary's objects, so a snapshot stores only what is new and reads the
 * rest from the primary. Every sandbox of the project mounts the primary; none sees this. Refs an older
 * Grove kept in the primary under refs/grove/<slug>/ move here once, with their objects (packed into the
 * store), and their loose copies are pruned from the primary. Call under the repository lock.
 */
export async function openStore(repo: string, objects: string, slug: string): Promise<void> {
  if (openedStores.has(objects) && existsSync(join(objects, 'objects'))) return;
  // Making the store and listing the primary's old refs are independent, so they run side by side: each git
  // process is milliseconds of the teardown that usually opens a workspace's store first.
  const [, legacy] = await Promise.all([createStore(repo, objects), legacyRefs(repo, slug)]);
  if (legacy.length > 0) await migrateLegacyRefs(repo, objects, legacy);
  openedStores.add(objects);
}

/** A repository's object format never changes, so it is read once per repository and server process. */
const objectFormats = new Map<string, Promise<string>>();

function objectFormat(repo: string): Promise<string> {
  let format = objectFormats.get(repo);
  if (!format) {
    format = raw(repo, ['rev-parse', '--show-object-format'], 'reading the object format').then((out) => out.trim() || 'sha1');
    // A failed read is not remembered: the next open tries again.
    format.catch(() => objectFormats.delete(repo));
    objectFormats.set(repo, format);
  }
  return format;
}

async function createStore(repo: string, objects: string): Promise<void> {
  if (existsSync(join(objects, 'objects', 'info', 'alternates'))) return;
  const format = await objectFormat(repo);
  await mkdir(dirname(objects), { recursive: true, mode: 0o700 });
  await raw(objects, ['init', '--bare', '--quiet', '--template=', `--object-format=${format}`, objects], 'creating the workspace object store', { cwd: dirname(objects) });
  await mkdir(join(objects, 'objects', 'info'), { recursive: true });
  await writeFile(join(objects, 'objects', 'info', 'alternates'), `${join(await realpath(repo), 'objects')}\n`, { mode: 0o644 });
}

/** Refs an older Grove kept for slug in the primary (refname, commit). */
async function legacyRefs(repo: string, slug: string): Promise<Array<[string, string]>> {
  const out = await raw(repo, ['for-each-ref', '--format=%(refname) %(objectname)', `${slugRefBase(slug)}/`], 'listing old snapshot refs');
  return out.split('\n').map((l) => l.trim().split(' ')).filter((p): p is [string, string] => p.length === 2 && !!p[0] && !!p[1]);
}

async function migrateLegacyRefs(repo: string, objects: string, refs: Array<[string, string]>): Promise<void> {
  // Every object only these refs reach (not the project's branches, tags or other workspaces' refs), into a
  // pack of the store: the primary may drop them from now on.
  const list = await raw(repo, ['rev-list', '--objects', ...new Set(refs.map(([, c]) => c)), '--not', '--exclude=refs/grove/*', '--all'], 'listing the objects of old snapshots', {
    maxBytes: 1024 * 1024 * 1024,
    timeoutMs: 600_000,
  });
  if (list.trim()) {
    await raw(objects, ['pack-objects', '-q', join(objects, 'objects', 'pack', 'pack')], 'copying old snapshots into the workspace store', { input: list, timeoutMs: 600_000 });
  }
  await raw(objects, ['update-ref', '--stdin'], 'moving old snapshot refs', { input: refs.map(([r, c]) => `update ${r} ${c}\n`).join('') });
  await raw(repo, ['update-ref', '--stdin'], 'removing old snapshot refs from the shared repository', { input: refs.map(([r, c]) => `delete ${r} ${c}\n`).join('') });
  // Loose objects nothing in the primary reaches any more (these snapshots, and blobs of earlier previews)
  // go now: the sandboxes of the project read the primary's object store.
  await raw(repo, ['prune', '--expire=now'], 'pruning old snapshot objects from the shared repository', { timeoutMs: 600_000 });
}

/**
 * Make commit (held by the store) the target of ref in the primary, copying what the primary lacks: a
 * restore of saved work starts a branch there, which is shared work from then on. The pack is built in the
 * store and indexed (--strict) in the primary, which computes every hash itself.
 */
export async function exportCommit(repo: string, objects: string, o: { commit: string; ref: string }): Promise<void> {
  const tips = (await raw(repo, ['for-each-ref', '--format=%(objectname)'], 'listing the shared refs')).split('\n').filter(Boolean);
  const list = await raw(objects, ['rev-list', '--objects', '--stdin'], 'listing the saved objects', {
    // Negative revisions as ^<id> lines (git 2.39's --stdin takes no --not).
    input: `${o.commit}\n${[...new Set(tips)].map((t) => `^${t}\n`).join('')}`,
    maxBytes: 1024 * 1024 * 1024,
    timeoutMs: 600_000,
  });
  if (list.trim()) {
    const pack = await execGit({ gitDir: objects, args: ['pack-objects', '--stdout', '-q'], input: list, maxBytes: 4 * 1024 * 1024 * 1024, timeoutMs: 600_000 });
    if (pack.code !== 0 || pack.overflow || pack.timedOut) throw new GroveError('git_failed', `packing the saved work: ${pack.stderr.trim() || 'git pack-objects failed'}`);
    await raw(repo, ['index-pack', '--stdin', '--strict'], 'copying the saved work into the shared repository', { input: pack.stdout, timeoutMs: 600_000 });
  }
  await raw(repo, ['update-ref', '-m', 'grove: restore', o.ref, o.commit], `writing ${o.ref}`);
}

export interface RecoveryRefEntry {
  ref: string;
  n: number;
  commit: string;
}

/** The recovery refs of a slug, oldest first, from its store. Call under the repository lock. */
export async function listRecoveryRefs(repo: string, slug: string, objects: string): Promise<RecoveryRefEntry[]> {
  await openStore(repo, objects, slug);
  const out = await raw(objects, ['for-each-ref', '--format=%(refname) %(objectname)', recoveryRefPrefix(slug)], 'listing recovery refs');
  const entries: RecoveryRefEntry[] = [];
  for (const line of out.split('\n')) {
    const [ref = '', commit = ''] = line.trim().split(' ');
    const parsed = parseRecoveryRef(ref);
    if (parsed?.slug === slug && commit) entries.push({ ref, n: parsed.n, commit });
  }
  return entries.sort((a, b) => a.n - b.n);
}

export interface SavedWork {
  ref: string;
  commit: string;
  /** The newest recovery ref already held exactly this work (a re-run after a crash): nothing new was written. */
  reused: boolean;
  /** Embedded repositories that were not saved (kept as the parent has them). */
  embedded: string[];
}

/**
 * Commit whatever a worktree holds beyond `parent` (a branch ref or commit; null when there is none) to the
 * slug's next recovery ref, refs/grove/<slug>/teardown/<n>, in the workspace's store (`objects`), without
 * moving any branch or touching the worktree. Returns null when there is nothing to save: no worktree, or its
 * content is exactly parent's. Idempotent: when the newest recovery ref already holds this content on this
 * parent, that ref is returned (reused) instead of a new one. Call under the repository lock.
 */
export async function saveWork(repo: string, o: { slug: string; objects: string; worktree: string; parent: string | null; message: string }): Promise<SavedWork | null> {
  if (!existsSync(o.worktree)) return null;
  // The parent is read from the primary, so it resolves while the store is opened (both before the worktree is read).
  const [, base] = await Promise.all([openStore(repo, o.objects, o.slug), o.parent ? commitAndTree(repo, o.parent) : null]);
  const { tip, tree, unchanged, embedded } = await snapshotWorktree(repo, { worktree: o.worktree, parent: o.parent, base, objects: o.objects });
  if (unchanged) return null;
  const last = (await listRecoveryRefs(repo, o.slug, o.objects)).at(-1);
  if (last) {
    const info = await commitInfo(o.objects, last.commit);
    if (info.tree === tree && (info.parents[0] ?? null) === tip) return { ref: last.ref, commit: last.commit, reused: true, embedded };
  }
  const commit = await writeCommit(o.objects, { tree, parent: tip, message: o.message, what: `committing the saved work of ${o.slug}` });
  const ref = recoveryRef(o.slug, (last?.n ?? 0) + 1);
  // An all-zero old value means "create only": a recovery ref is never overwritten.
  await raw(o.objects, ['update-ref', '-m', 'grove: save work', ref, commit, '0'.repeat(commit.length)], `writing ${ref}`);
  return { ref, commit, reused: false, embedded };
}

export interface PendingWork {
  /** Paths that differ from parent, sorted as git lists them; at most `limit` of them. */
  files: Array<{ status: 'added' | 'modified' | 'deleted' | 'type-changed'; path: string }>;
  total: number;
  /** Where saveWork would put it now: the newest recovery ref when it already holds this work, else the next one. */
  ref: string | null;
  /** Embedded repositories a save would not include. */
  embedded: string[];
}

const CHANGE_STATUS = { A: 'added', M: 'modified', D: 'deleted', T: 'type-changed' } as const;

/**
 * What saveWork would save right now, without writing a ref: the same snapshot (so the answer matches the
 * teardown that follows), compared with parent. Like saveWork it never runs git inside the worktree, so
 * nothing the sandbox planted there is followed. The snapshot writes the changed files' blobs into the
 * workspace's store (never the shared primary). Call under the repository lock.
 */
export async function pendingWork(repo: string, o: { slug: string; objects: string; worktree: string; parent: string | null; limit: number }): Promise<PendingWork> {
  if (!existsSync(o.worktree)) return { files: [], total: 0, ref: null, embedded: [] };
  await openStore(repo, o.objects, o.slug);
  const tip = o.parent ? await resolveCommit(repo, o.parent) : null;
  const { tree, embedded } = await snapshotTree({ repo, gitDir: o.objects, worktree: o.worktree, parent: tip });
  const out = tip
    ? await raw(o.objects, ['diff-tree', '-r', '-z', '--no-renames', '--name-status', tip, tree], 'listing the uncommitted changes')
    : await raw(o.objects, ['ls-tree', '-r', '-z', '--name-only', tree], 'listing the uncommitted files');
  const parts = out.split('\0').filter((p) => p !== '');
  const files: PendingWork['files'] = [];
  let total = 0;
  for (let i = 0; i < parts.length; ) {
    // diff-tree -z: status, then path; ls-tree --name-only: path alone (everything is new without a parent).
    const letter = tip ? (parts[i++] ?? '') : 'A';
    const path = parts[i++] ?? '';
    const status = CHANGE_STATUS[letter.charAt(0) as keyof typeof CHANGE_STATUS] ?? 'modified';
    total++;
    if (files.length < o.limit) files.push({ status, path });
  }
  if (total === 0) return { files, total, ref: null, embedded };
  const last = (await listRecoveryRefs(repo, o.slug, o.objects)).at(-1);
  if (last) {
    const info = await commitInfo(o.objects, last.commit);
    if (info.tree === tree && (info.parents[0] ?? null) === tip) return { files, total, ref: last.ref, embedded };
  }
  return { files, total, ref: recoveryRef(o.slug, (last?.n ?? 0) + 1), embedded };
}
