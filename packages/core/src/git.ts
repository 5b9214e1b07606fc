import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, existsSync } from 'node:fs';
import { chown, copyFile, mkdir, mkdtemp, open, readFile, readdir, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { GroveError, overlayPathProblem, parseRecoveryRef, recoveryRef, recoveryRefPrefix } from '@grove/contracts';
import { simpleGit } from 'simple-git';
import type { SimpleGit } from 'simple-git';
import { isEmptyDir, removeDir } from './fsutil.ts';

/**
 * The git operations core needs, over simple-git. Worktrees are chowned to the sandbox uid while the host
 * runs as root, so every call passes safe.directory=* (git would otherwise refuse to touch them).
 */
function git(baseDir: string, blockMs = 60_000): SimpleGit {
  return simpleGit({
    baseDir,
    config: ['safe.directory=*'],
    allowConfig: ['safe.directory'],
    strict: true,
    timeout: { block: blockMs },
  });
}

function gitFailed(what: string, e: unknown): GroveError {
  const msg = e instanceof Error ? e.message.trim() : String(e);
  return new GroveError('git_failed', `${what}: ${msg}`, { cause: e });
}

/** git <args> in repo; failures become GroveError('git_failed') naming what was attempted. */
async function raw(repo: string, args: string[], what = `git ${args[0] ?? ''}`): Promise<string> {
  try {
    return await git(repo).raw(args);
  } catch (e) {
    throw gitFailed(what, e);
  }
}

export function branchForName(name: string): string {
  return `grove/${name}`;
}

/** Clone source as a bare repository at dest (whose parent must exist). A half-done clone is removed. */
export async function cloneBare(source: string, dest: string): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  try {
    // Cloning can be silent for a long time on big repositories; allow ten minutes without output.
    await git(dirname(dest), 600_000).clone(source, dest, ['--bare']);
  } catch (e) {
    await rm(dest, { recursive: true, force: true });
    throw gitFailed(`cloning ${source}`, e);
  }
}

/** True when dir is itself a bare repository (not merely inside some other repository). */
export async function isBareRepo(dir: string): Promise<boolean> {
  if (!existsSync(dir)) return false;
  try {
    const out = await git(dir).raw(['rev-parse', '--is-bare-repository', '--absolute-git-dir']);
    const [bare, gitDir] = out.trim().split('\n');
    return bare === 'true' && gitDir !== undefined && (await realpath(gitDir)) === (await realpath(dir));
  } catch {
    return false;
  }
}

/** The branch the bare repository's HEAD points at; git_failed when it has no commits. */
export async function defaultBranch(repo: string): Promise<string> {
  const branch = (await raw(repo, ['symbolic-ref', '--short', 'HEAD'], 'reading the default branch')).trim();
  if (!branch || !(await branchExists(repo, branch))) {
    throw new GroveError('git_failed', `the repository has no commits on its default branch${branch ? ` "${branch}"` : ''}`);
  }
  return branch;
}

export async function branchExists(repo: string, branch: string): Promise<boolean> {
  const out = await raw(repo, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], `looking up branch ${branch}`);
  return out.trim().length > 0;
}

/** The commit a ref names, or null when it names none. ref must be pre-validated (no leading "-"). */
export async function resolveCommit(repo: string, ref: string): Promise<string | null> {
  const out = await raw(repo, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], `resolving ${ref}`);
  const sha = out.trim();
  return /^[0-9a-f]{40,64}$/.test(sha) ? sha : null;
}

/** grove/<name>, or grove/<name>-<4 hex> when that branch already exists (the name was used before). */
export async function freshBranch(repo: string, name: string): Promise<string> {
  const plain = branchForName(name);
  if (!(await branchExists(repo, plain))) return plain;
  for (let i = 0; i < 16; i++) {
    const candidate = `${plain}-${randomBytes(2).toString('hex')}`;
    if (!(await branchExists(repo, candidate))) return candidate;
  }
  throw new GroveError('git_failed', `could not find a free branch name for ${plain}`);
}

export interface WorktreeEntry {
  path: string;
  branch: string | null;
  head: string | null;
  locked: boolean;
  prunable: boolean;
}

export async function listWorktrees(repo: string): Promise<WorktreeEntry[]> {
  const out = await raw(repo, ['worktree', 'list', '--porcelain']);
  const entries: WorktreeEntry[] = [];
  let cur: WorktreeEntry | null = null;
  for (const line of out.split('\n')) {
    if (line.startsWith('worktree ')) {
      cur = { path: line.slice('worktree '.length), branch: null, head: null, locked: false, prunable: false };
      entries.push(cur);
    } else if (cur && line.startsWith('branch ')) cur.branch = line.slice('branch '.length);
    else if (cur && line.startsWith('HEAD ')) cur.head = line.slice('HEAD '.length);
    else if (cur && (line === 'locked' || line.startsWith('locked '))) cur.locked = true;
    else if (cur && (line === 'prunable' || line.startsWith('prunable '))) cur.prunable = true;
  }
  return entries;
}

async function canonical(p: string): Promise<string> {
  try {
    return await realpath(p);
  } catch {
    return resolve(p);
  }
}

async function findWorktree(repo: string, path: string): Promise<WorktreeEntry | undefined> {
  const want = await canonical(path);
  for (const e of await listWorktrees(repo)) {
    if (e.path === path || (await canonical(e.path)) === want) return e;
  }
  return undefined;
}

/**
 * The worktree's own admin dir (<common>/worktrees/<id>): the one whose host-written `gitdir` names
 * <worktree>/.git. Never read from the worktree's .git file: that is the agent's, and names the sandbox's own
 * git dir. git's id is the basename unless it was taken (then a number is appended), so that one is tried first.
 */
export async function worktreeAdminDir(repo: string, worktreePath: string): Promise<string> {
  const root = resolve(await canonical(repo), 'worktrees');
  const want = resolve(worktreePath, '.git');
  const ids = await readdir(root).catch(() => [] as string[]);
  const first = basename(worktreePath);
  for (const id of [first, ...ids.filter((i) => i !== first)]) {
    if (!ids.includes(id)) continue;
    const text = await readSmallRegular(join(root, id, 'gitdir'));
    if (text !== null && text.trim() === want) return join(root, id);
  }
  throw new GroveError('git_failed', `${worktreePath} is not a worktree of ${repo}`);
}

/** A small regular file's text, opened without following a link or blocking on a FIFO; null otherwise. */
async function readSmallRegular(path: string): Promise<string | null> {
  const fh = await open(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK).catch(() => null);
  if (!fh) return null;
  try {
    const st = await fh.stat();
    return st.isFile() && st.size <= 4096 ? await fh.readFile('utf8') : null;
  } finally {
    await fh.close();
  }
}

export interface EnsureWorktreeResult {
  /** An existing valid worktree on the branch was kept. */
  reused: boolean;
  /** This call created the branch (from base). */
  createdBranch: boolean;
  adminDir: string;
}

/**
 * Make <path> a worktree of repo on branch. Idempotent: a valid worktree on the branch is reused; a stray
 * directory or a worktree on another branch is removed and re-added. The branch is created from base when
 * it does not exist. Call under the repository lock.
 */
export async function ensureWorktree(
  repo: string,
  opts: { path: string; branch: string; base: string; beforeRemove?: () => Promise<unknown> },
): Promise<EnsureWorktreeResult> {
  const { path, branch, base } = opts;
  // An empty directory git does not know is vacant too: the worktree's disk image is mounted there before the add.
  if (!existsSync(path) || ((await isEmptyDir(path)) && !(await findWorktree(repo, path)))) {
    // The common case, a new fork: nothing at the path, so no `worktree list` to look for one.
    await mkdir(dirname(path), { recursive: true });
    const createdBranch = !(await branchExists(repo, branch));
    try {
      await git(repo).raw(createdBranch ? ['worktree', 'add', '-b', branch, path, base] : ['worktree', 'add', path, branch]);
    } catch (e) {
      // Git may still list a worktree at the missing path (its directory was deleted), and refuses the add,
      // after creating the branch. Prune that entry and add again on the branch; anything else is the error.
      if (!(await branchExists(repo, branch))) throw gitFailed(`git worktree add for ${branch}`, e);
      await prune(repo);
      await raw(repo, ['worktree', 'add', path, branch], `git worktree add for ${branch}`);
    }
    return { reused: false, createdBranch, adminDir: await worktreeAdminDir(repo, path) };
  }
  const entry = await findWorktree(repo, path);
  if (entry && entry.branch === `refs/heads/${branch}` && !entry.prunable && existsSync(resolve(path, '.git'))) {
    return { reused: true, createdBranch: false, adminDir: await worktreeAdminDir(repo, path) };
  }
  if (entry || existsSync(path)) {
    // What is there may hold work (a detached or switched HEAD with uncommitted changes): the caller saves it first.
    await opts.beforeRemove?.();
    await removeWorktree(repo, path);
  }
  await mkdir(dirname(path), { recursive: true });
  const createdBranch = !(await branchExists(repo, branch));
  const args = createdBranch ? ['worktree', 'add', '-b', branch, path, base] : ['worktree', 'add', path, branch];
  await raw(repo, args, `git worktree add for ${branch}`);
  return { reused: false, createdBranch, adminDir: await worktreeAdminDir(repo, path) };
}

/** Remove a worktree (even a dirty or locked one) and its directory, then prune. No error when absent. */
export async function removeWorktree(repo: string, path: string): Promise<void> {
  const entry = await findWorktree(repo, path);
  if (entry) {
    try {
      // Twice --force: also removes a worktree git left locked when a crash interrupted `worktree add`.
      await git(repo).raw(['worktree', 'remove', '--force', '--force', entry.path]);
    } catch {
      // The directory may already be gone; rm + prune below finish the job.
    }
  }
  // removeDir: a worktree bound from the workspace's disk image is a mount point, emptied here and unmounted later.
  await removeDir(path);
  await prune(repo);
}

export async function prune(repo: string): Promise<void> {
  await raw(repo, ['worktree', 'prune']);
}

/** Commits on branch that are not reachable from base; null when either cannot be resolved. */
export async function commitsBeyond(repo: string, branch: string, base: string): Promise<number | null> {
  try {
    const out = await git(repo).raw(['rev-list', '--count', `${base}..refs/heads/${branch}`]);
    const n = Number.parseInt(out.trim(), 10);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

/**
 * Delete branch only when it holds no work: no commits beyond base, and every commit on it still reachable from
 * another ref (so a base that only this branch held is not lost with it). The delete names the tip it checked,
 * so a branch that moved in between is left alone. Returns whether it was deleted.
 */
export async function deleteBranchIfEmpty(repo: string, branch: string, base: string): Promise<boolean> {
  const ref = `refs/heads/${branch}`;
  const tip = await resolveCommit(repo, ref);
  if (!tip) return false;
  if ((await commitsBeyond(repo, branch, base)) !== 0) return false;
  const orphaned = (await raw(repo, ['rev-list', '--count', tip, '--not', `--exclude=${ref}`, '--all'], `checking what only ${branch} holds`)).trim();
  if (orphaned !== '0') return false;
  await raw(repo, ['update-ref', '-d', ref, tip], `deleting branch ${branch}`);
  return true;
}

// ---- saving work before a worktree is removed ----

const IDENTITY = { name: 'Grove', email: 'grove@localhost' };
// Passed through to git children that get an explicit environment; this is not configuration, so no env.ts.
// eslint-disable-next-line no-restricted-properties
const { PATH: CHILD_PATH = '/usr/bin:/bin', HOME: CHILD_HOME } = process.env;

/**
 * git in repo with exactly these GIT_* variables and a minimal environment (simple-git refuses variables it is
 * not told about, such as EDITOR, when an environment is passed).
 */
function gitWith(repo: string, vars: Record<string, string>): SimpleGit {
  const env: Record<string, string> = { PATH: CHILD_PATH };
  if (CHILD_HOME) env.HOME = CHILD_HOME;
  return simpleGit({
    baseDir: repo,
    config: ['safe.directory=*'],
    allowConfig: ['safe.directory'],
    allowEnvironment: Object.keys(vars),
    strict: true,
    timeout: { block: 600_000 },
  }).env({ ...env, ...vars });
}

/**
 * The worktree's content as a tree in repo's object store: parent's tree with every change applied, staged or
 * not, plus every untracked file that is not ignored. It uses a throwaway index and the bare repository as
 * GIT_DIR, so the worktree's own index, its `.git` file and its admin dir are neither read nor written: those are
 * writable from the sandbox, and host git must never follow a gitdir or a config an agent planted there
 * (core.fsmonitor, for one, runs a command).
 */
export async function snapshotTree(repo: string, worktree: string, parent: string | null, opts: { indexOut?: string } = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'grove-snapshot-'));
  try {
    const g = gitWith(repo, { GIT_DIR: repo, GIT_WORK_TREE: worktree, GIT_INDEX_FILE: join(dir, 'index') });
    await g.raw(parent ? ['read-tree', parent] : ['read-tree', '--empty']);
    await g.raw(['add', '--all']);
    await dropOverlayEntries((args) => g.raw(args), repo, parent);
    const tree = (await g.raw(['write-tree'])).trim();
    // The index itself, with the stat data of every file it just hashed: a checkpoint installs it as the
    // worktree's own, so `git status` in the sandbox is clean afterwards without re-reading anything there.
    if (opts.indexOut) await copyFile(join(dir, 'index'), opts.indexOut, fsConstants.COPYFILE_EXCL);
    return tree;
  } catch (e) {
    throw gitFailed(`saving the uncommitted work in ${worktree}`, e);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// ---- overlay files never enter a commit ----

/**
 * The project's overlay paths (docs/git-flow.md), NUL-separated, in the bare repository: host-written, and the
 * sandbox mounts the common dir read-only, so an agent cannot shorten the list. Every snapshot reads it.
 */
export const OVERLAY_LIST = 'info/grove-overlay';
const EXCLUDE_BEGIN = '# >>> grove overlay (written by Grove; do not edit)';
const EXCLUDE_END = '# <<< grove overlay';

/** The overlay paths recorded in repo; entries that are not plain overlay paths are ignored. */
export async function overlayPaths(repo: string): Promise<string[]> {
  const text = await readFile(join(repo, OVERLAY_LIST), 'utf8').catch(() => '');
  return text.split('\0').filter((p) => p !== '' && overlayPathProblem(p, { glob: false }) === null);
}

/**
 * Add overlay paths to those recorded in repo: the list every snapshot drops, and a block in info/exclude so
 * `git status` in the sandbox does not offer them either. Paths are only ever added: a worktree may still hold a
 * copy of a file the overlay no longer has, and it must not be committed then. Call under the repository lock.
 */
export async function recordOverlayPaths(repo: string, paths: readonly string[]): Promise<void> {
  const recorded = await overlayPaths(repo);
  const clean = [...new Set([...recorded, ...paths])].filter((p) => overlayPathProblem(p, { glob: false }) === null).sort();
  // Nothing new (every fork and start records the list): leave both files alone.
  if (clean.length === recorded.length && existsSync(join(repo, OVERLAY_LIST))) return;
  await mkdir(join(repo, 'info'), { recursive: true });
  await writeAtomic(join(repo, OVERLAY_LIST), clean.map((p) => `${p}\0`).join(''));
  const excludeFile = join(repo, 'info', 'exclude');
  const old = await readFile(excludeFile, 'utf8').catch(() => '');
  const begin = old.indexOf(EXCLUDE_BEGIN);
  const end = old.indexOf(EXCLUDE_END);
  const kept = begin >= 0 && end > begin ? old.slice(0, begin) + old.slice(end + EXCLUDE_END.length).replace(/^\n/, '') : old;
  // Overlay paths hold no gitignore metacharacters (overlayPathProblem), so "/<path>" matches exactly that file.
  const block = clean.length ? `${EXCLUDE_BEGIN}\n${clean.map((p) => `/${p}`).join('\n')}\n${EXCLUDE_END}\n` : '';
  await writeAtomic(excludeFile, `${kept}${kept && !kept.endsWith('\n') ? '\n' : ''}${block}`);
}

async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.grove-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, file);
}

/**
 * After `git add --all` into a throwaway index: put every overlay path back the way parent has it (absent when
 * parent has none), so a snapshot never carries an overlay file, whether untracked or a modified tracked one.
 * run: git with that index (GIT_DIR = the bare repository).
 */
export async function dropOverlayEntries(run: (args: string[]) => Promise<string>, repo: string, parent: string | null): Promise<void> {
  const paths = await overlayPaths(repo);
  if (paths.length === 0) return;
  await run(['update-index', '--force-remove', '--', ...paths]);
  if (!parent) return;
  const listed = await run(['ls-tree', '-z', parent, '--', ...paths]);
  for (const rec of listed.split('\0')) {
    const m = /^(\d+) blob ([0-9a-f]+)\t(.+)$/s.exec(rec);
    if (m) await run(['update-index', '--add', '--cacheinfo', `${m[1]},${m[2]},${m[3]}`]);
  }
}

export interface WorktreeSnapshot {
  /** The commit parent resolved to; null when there is none. */
  tip: string | null;
  /** The worktree's content as a tree (see snapshotTree). */
  tree: string;
  /** The tree is exactly tip's (or empty without a tip): nothing to save or commit. */
  unchanged: boolean;
}

/**
 * Step one of turning a worktree into a commit, shared by the teardown recovery refs and checkpoints: resolve
 * the parent, snapshot the worktree through a throwaway index, and say whether anything changed.
 */
export async function snapshotWorktree(repo: string, o: { worktree: string; parent: string | null; indexOut?: string }): Promise<WorktreeSnapshot> {
  const tip = o.parent ? await resolveCommit(repo, o.parent) : null;
  const tree = await snapshotTree(repo, o.worktree, tip, { indexOut: o.indexOut });
  const unchanged = tip ? (await commitInfo(repo, tip)).tree === tree : (await raw(repo, ['ls-tree', tree], 'reading the saved tree')).trim() === '';
  return { tip, tree, unchanged };
}

export interface CommitIdentity {
  name: string;
  email: string;
}

/** Step two: a commit of tree on parent with this identity as author and committer; moves no ref. */
export async function writeCommit(repo: string, o: { tree: string; parent: string | null; message: string; identity?: CommitIdentity; what: string }): Promise<string> {
  const who = o.identity ?? IDENTITY;
  const vars = { GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email };
  try {
    return (await gitWith(repo, vars).raw(['commit-tree', o.tree, ...(o.parent ? ['-p', o.parent] : []), '-m', o.message])).trim();
  } catch (e) {
    throw gitFailed(o.what, e);
  }
}

/** Paths that differ between two trees (or a tree and the empty tree). */
export async function changedPaths(repo: string, from: string | null, to: string): Promise<string[]> {
  const base = from ?? (await raw(repo, ['hash-object', '-t', 'tree', '/dev/null'], 'naming the empty tree')).trim();
  const out = await raw(repo, ['diff-tree', '-r', '--no-renames', '--name-only', '-z', base, to], 'listing changed paths');
  return out.split('\0').filter(Boolean);
}

/** Tree and parents of a commit. */
async function commitInfo(repo: string, commit: string): Promise<{ tree: string; parents: string[] }> {
  const out = (await raw(repo, ['log', '-1', '--format=%T %P', commit, '--'], `reading commit ${commit}`)).trim();
  const [tree = '', ...parents] = out.split(' ').filter(Boolean);
  return { tree, parents };
}

export interface RecoveryRefEntry {
  ref: string;
  n: number;
  commit: string;
}

/** The recovery refs of a slug, oldest first. */
export async function listRecoveryRefs(repo: string, slug: string): Promise<RecoveryRefEntry[]> {
  const out = await raw(repo, ['for-each-ref', '--format=%(refname) %(objectname)', recoveryRefPrefix(slug)], 'listing recovery refs');
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
}

/**
 * Commit whatever a worktree holds beyond `parent` (a branch ref or commit; null when there is none) to the
 * slug's next recovery ref, refs/grove/<slug>/teardown/<n>, without moving any branch or touching the worktree.
 * Returns null when there is nothing to save: no worktree, or its content is exactly parent's. Idempotent: when
 * the newest recovery ref already holds this content on this parent, that ref is returned (reused) instead of a
 * new one. Call under the repository lock.
 */
export async function saveWork(repo: string, o: { slug: string; worktree: string; parent: string | null; message: string }): Promise<SavedWork | null> {
  if (!existsSync(o.worktree)) return null;
  const { tip, tree, unchanged } = await snapshotWorktree(repo, { worktree: o.worktree, parent: o.parent });
  if (unchanged) return null;
  const last = (await listRecoveryRefs(repo, o.slug)).at(-1);
  if (last) {
    const info = await commitInfo(repo, last.commit);
    if (info.tree === tree && (info.parents[0] ?? null) === tip) return { ref: last.ref, commit: last.commit, reused: true };
  }
  const commit = await writeCommit(repo, { tree, parent: tip, message: o.message, what: `committing the saved work of ${o.slug}` });
  const ref = recoveryRef(o.slug, (last?.n ?? 0) + 1);
  // An all-zero old value means "create only": a recovery ref is never overwritten.
  await raw(repo, ['update-ref', '-m', 'grove: save work', ref, commit, '0'.repeat(commit.length)], `writing ${ref}`);
  return { ref, commit, reused: false };
}

export interface PendingWork {
  /** Paths that differ from parent, sorted as git lists them; at most `limit` of them. */
  files: Array<{ status: 'added' | 'modified' | 'deleted' | 'type-changed'; path: string }>;
  total: number;
  /** Where saveWork would put it now: the newest recovery ref when it already holds this work, else the next one. */
  ref: string | null;
}

const CHANGE_STATUS = { A: 'added', M: 'modified', D: 'deleted', T: 'type-changed' } as const;

/**
 * What saveWork would save right now, without writing a ref: the same snapshot (so the answer matches the
 * teardown that follows), compared with parent. Like saveWork it never runs git inside the worktree, so
 * nothing the sandbox planted there is followed. The snapshot writes the changed files' blobs into the
 * object store (unreferenced until a teardown saves them; gc removes them otherwise). Call under the
 * repository lock.
 */
export async function pendingWork(repo: string, o: { slug: string; worktree: string; parent: string | null; limit: number }): Promise<PendingWork> {
  if (!existsSync(o.worktree)) return { files: [], total: 0, ref: null };
  const tip = o.parent ? await resolveCommit(repo, o.parent) : null;
  const tree = await snapshotTree(repo, o.worktree, tip);
  const out = tip
    ? await raw(repo, ['diff-tree', '-r', '-z', '--no-renames', '--name-status', tip, tree], 'listing the uncommitted changes')
    : await raw(repo, ['ls-tree', '-r', '-z', '--name-only', tree], 'listing the uncommitted files');
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
  if (total === 0) return { files, total, ref: null };
  const last = (await listRecoveryRefs(repo, o.slug)).at(-1);
  if (last) {
    const info = await commitInfo(repo, last.commit);
    if (info.tree === tree && (info.parents[0] ?? null) === tip) return { files, total, ref: last.ref };
  }
  return { files, total, ref: recoveryRef(o.slug, (last?.n ?? 0) + 1) };
}

export interface Checkpoint {
  /** The branch's new tip; null when the worktree held nothing beyond it (the branch did not move). */
  commit: string | null;
  files: string[];
}

/**
 * Commit the worktree's content (tracked changes, staged or not, and untracked files that are not ignored) onto
 * its branch, from the host, and make the result the worktree's index so the branch, the index and the files
 * agree. The branch moves only if it still points where it did (update-ref with the old value). Call under
 * the repository lock.
 */
export async function checkpointWorktree(
  repo: string,
  o: {
    worktree: string;
    branch: string;
    message: string;
    identity: CommitIdentity;
    owner?: { uid: number; gid: number } | null;
    /**
     * The index the sandbox's git uses (<sandbox-git>/index): the checkpoint's index replaces it. Absent (a
     * workspace not started since its sandbox got a git dir of its own): the host's admin index, which seeds it.
     */
    indexPath?: string;
  },
): Promise<Checkpoint> {
  // Staged in the host's admin dir, which no sandbox mounts; never found through the worktree's .git (the agent's).
  const admin = await worktreeAdminDir(repo, o.worktree);
  const staged = join(admin, `index.grove-${randomBytes(4).toString('hex')}`);
  try {
    const ref = `refs/heads/${o.branch}`;
    const snap = await snapshotWorktree(repo, { worktree: o.worktree, parent: ref, indexOut: staged });
    if (!snap.tip) throw new GroveError('git_failed', `branch ${o.branch} does not exist`);
    if (snap.unchanged) return { commit: null, files: [] };
    const commit = await writeCommit(repo, { tree: snap.tree, parent: snap.tip, message: o.message, identity: o.identity, what: `committing a checkpoint on ${o.branch}` });
    await raw(repo, ['update-ref', '-m', 'grove: checkpoint', ref, commit, snap.tip], `moving ${o.branch} to the checkpoint`);
    // rename replaces whatever is at index (a symlink an agent planted included) instead of writing through it.
    if (o.owner) await chown(staged, o.owner.uid, o.owner.gid);
    await rename(staged, o.indexPath ?? join(admin, 'index'));
    return { commit, files: await changedPaths(repo, snap.tip, snap.tree) };
  } finally {
    await rm(staged, { force: true });
  }
}

// ---- diff and status against the default branch ----

/** The merge-base of two commits (the fork point), or null when they share no history. */
export async function mergeBase(repo: string, a: string, b: string): Promise<string | null> {
  try {
    const out = (await git(repo).raw(['merge-base', a, b])).trim();
    return /^[0-9a-f]{40,64}$/.test(out) ? out : null;
  } catch {
    return null;
  }
}

/** Commits on head not on base (ahead) and on base not on head (behind). */
export async function aheadBehind(repo: string, base: string, head: string): Promise<{ ahead: number; behind: number }> {
  const out = (await raw(repo, ['rev-list', '--left-right', '--count', `${base}...${head}`, '--'], 'counting commits ahead and behind')).trim();
  const [behind = 0, ahead = 0] = out.split(/\s+/).map((n) => Number.parseInt(n, 10));
  return { ahead, behind };
}

/** Commits reachable from tip but from none of bases (all must resolve). */
export async function commitsNotIn(repo: string, tip: string, bases: string[]): Promise<number> {
  const out = await raw(repo, ['rev-list', '--count', tip, '--not', ...bases, '--'], 'counting commits not merged');
  return Number.parseInt(out.trim(), 10);
}

export interface TreeDiffFile {
  path: string;
  status: 'A' | 'M' | 'D' | 'T';
  additions: number | null;
  deletions: number | null;
}

/** Per-file changes from a commit to a tree-ish, with line counts (null for binary files). */
export async function diffFiles(repo: string, from: string, to: string): Promise<TreeDiffFile[]> {
  const status = await raw(repo, ['diff-tree', '-r', '--no-renames', '--name-status', '-z', from, to], 'listing changed files');
  const numstat = await raw(repo, ['diff-tree', '-r', '--no-renames', '--numstat', '-z', from, to], 'counting changed lines');
  const counts = new Map<string, { additions: number | null; deletions: number | null }>();
  for (const rec of numstat.split('\0')) {
    const m = /^(\d+|-)\t(\d+|-)\t(.*)$/s.exec(rec);
    if (!m?.[3]) continue;
    counts.set(m[3], { additions: m[1] === '-' ? null : Number(m[1]), deletions: m[2] === '-' ? null : Number(m[2]) });
  }
  const parts = status.split('\0');
  const files: TreeDiffFile[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const st = parts[i]?.[0];
    const path = parts[i + 1];
    if (!path || (st !== 'A' && st !== 'M' && st !== 'D' && st !== 'T')) continue;
    files.push({ path, status: st, ...(counts.get(path) ?? { additions: null, deletions: null }) });
  }
  return files;
}

/** The unified diff from a commit to a tree-ish, cut at maxBytes: git is stopped once that much has arrived. */
export function diffPatch(repo: string, from: string, to: string, maxBytes: number): Promise<{ patch: string; truncated: boolean }> {
  return new Promise((resolvePromise, reject) => {
    const env: Record<string, string> = { PATH: CHILD_PATH, GIT_DIR: repo, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
    const child = spawn('git', ['-c', 'safe.directory=*', '-c', 'core.hooksPath=/dev/null', 'diff', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', from, to, '--'], {
      cwd: repo,
      env: env as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      if (truncated) return;
      chunks.push(b);
      size += b.length;
      if (size > maxBytes) {
        truncated = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    child.on('error', (e) => reject(gitFailed('reading the diff', e)));
    child.on('close', (code) => {
      if (code !== 0 && !truncated) {
        reject(new GroveError('git_failed', `reading the diff: ${stderr.trim() || `git exited with ${code}`}`));
        return;
      }
      const all = Buffer.concat(chunks);
      // Cut at the last whole line within the cap, so the patch never ends mid-character.
      let end = Math.min(all.length, maxBytes);
      if (truncated) {
        const nl = all.lastIndexOf(0x0a, end - 1);
        if (nl >= 0) end = nl + 1;
      }
      resolvePromise({ patch: all.subarray(0, end).toString('utf8'), truncated });
    });
  });
}
