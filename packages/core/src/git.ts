import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, realpath, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { GroveError } from '@grove/contracts';
import { execGit, raw, rawOrNull } from './git-exec.ts';
import { isEmptyDir, readRegularFile, removeDir, replaceFile } from './fsutil.ts';

/**
 * The git operations core needs on a project's primary clone: the clone, branches, worktrees, and the diff and
 * counts against the default branch. Snapshots and checkpoints are in git-snapshot.ts, the per-workspace stores
 * and saved work in git-store.ts; all of them run git through git-exec.ts (explicit GIT_DIR, hardened config,
 * deadline). Worktrees belong to the sandbox uid while the host runs as root; git-exec names the exact
 * repository as safe.directory for each call.
 */

export function branchForName(name: string): string {
  return `grove/${name}`;
}

/** Clone source as a bare repository at dest (whose parent must exist). A half-done clone is removed. */
export async function cloneBare(source: string, dest: string): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  try {
    // GIT_DIR = dest: clone --bare creates it there; cwd is its (host-only) parent.
    await raw(dest, ['clone', '--bare', '--quiet', '--', source, dest], `cloning ${source}`, { cwd: dirname(dest), timeoutMs: 600_000, config: [['protocol.file.allow', 'always']] });
  } catch (e) {
    await rm(dest, { recursive: true, force: true });
    throw e;
  }
}

/** True when dir is itself a bare repository (not merely inside some other repository). */
export async function isBareRepo(dir: string): Promise<boolean> {
  if (!existsSync(dir)) return false;
  const out = await rawOrNull(dir, ['rev-parse', '--is-bare-repository', '--absolute-git-dir']);
  if (out === null) return false;
  const [bare, gitDir] = out.trim().split('\n');
  return bare === 'true' && gitDir !== undefined && (await realpath(gitDir).catch(() => '')) === (await realpath(dir));
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
  const out = await rawOrNull(repo, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}`]);
  return (out ?? '').trim().length > 0;
}

/** The commit a ref names, or null when it names none. ref must be pre-validated (no leading "-"). */
export async function resolveCommit(repo: string, ref: string): Promise<string | null> {
  const sha = ((await rawOrNull(repo, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`])) ?? '').trim();
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
    const text = (await readRegularFile(join(root, id, 'gitdir'), 4096))?.toString('utf8');
    if (text?.trim() === want) return join(root, id);
  }
  throw new GroveError('git_failed', `${worktreePath} is not a worktree of ${repo}`);
}

/** The entries of <repo>/worktrees (the admin dirs), to tell which one a `worktree add` created. */
async function adminDirs(repo: string): Promise<Set<string>> {
  return new Set(await readdir(join(repo, 'worktrees')).catch(() => [] as string[]));
}

/** worktree add, returning the admin dir it created (the one entry of <repo>/worktrees that is new; under the lock). */
async function addWorktree(repo: string, args: string[], what: string): Promise<string> {
  const before = await adminDirs(repo);
  await raw(repo, args, what);
  const added = [...(await adminDirs(repo))].filter((n) => !before.has(n));
  if (added.length !== 1 || !added[0]) throw new GroveError('git_failed', `${what}: could not tell which admin dir git created`);
  return join(repo, 'worktrees', added[0]);
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
    let adminDir: string;
    try {
      adminDir = await addWorktree(repo, createdBranch ? ['worktree', 'add', '-b', branch, path, base] : ['worktree', 'add', path, branch], `git worktree add for ${branch}`);
    } catch (e) {
      // Git may still list a worktree at the missing path (its directory was deleted), and refuses the add,
      // after creating the branch. Prune that entry and add again on the branch; anything else is the error.
      if (!(await branchExists(repo, branch))) throw e;
      await prune(repo);
      adminDir = await addWorktree(repo, ['worktree', 'add', path, branch], `git worktree add for ${branch}`);
    }
    return { reused: false, createdBranch, adminDir };
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
  return { reused: false, createdBranch, adminDir: await addWorktree(repo, args, `git worktree add for ${branch}`) };
}

/**
 * A worktree at `path` (an empty dir) checked out detached at commit, made ahead of the fork that will own it (a warm
 * sandbox's, pool.ts). Returns its admin dir. Under the repository lock.
 */
export async function addDetachedWorktree(repo: string, path: string, commit: string): Promise<string> {
  return addWorktree(repo, ['worktree', 'add', '--quiet', '--detach', path, commit], 'git worktree add --detach');
}

/**
 * Move a detached worktree that nothing has written to since its checkout (a warm sandbox's, pool.ts) from commit
 * `from` to `to`: a two-tree read-tree updates only the files that differ (no hooks run), then its admin dir's HEAD
 * names `to`. The caller chowns what it wrote. Under the repository lock.
 */
export async function moveDetachedWorktree(o: { adminDir: string; path: string; from: string; to: string }): Promise<void> {
  await raw(o.adminDir, ['read-tree', '-m', '-u', o.from, o.to], 'moving a prepared worktree to the fork base', { workTree: o.path });
  await replaceFile({ target: join(o.adminDir, 'HEAD'), tmpDir: o.adminDir, content: Buffer.from(`${o.to}\n`), owner: null });
}

/**
 * Create refs/heads/<branch> at commit, only if no such branch exists (update-ref's empty old value). False when it
 * exists or cannot be made: the caller takes the usual path. Under the repository lock.
 */
export async function createBranchAt(repo: string, branch: string, commit: string): Promise<boolean> {
  return (await rawOrNull(repo, ['update-ref', '-m', `branch: Created from ${commit}`, `refs/heads/${branch}`, commit, ''])) !== null;
}

/**
 * Remove a worktree (even a dirty or locked one): its directory, then its admin dir. No error when absent.
 * Teardown is on the user's clock, so the common case spawns no git: the admin dir is found by reading the host-written
 * `gitdir` files (worktreeAdminDir) and deleted with the directory, which is all `worktree remove --force --force` does
 * (a `locked` file lives in the admin dir too). Only a worktree whose admin dir cannot be found that way is left to
 * `git worktree remove` + `prune`.
 */
export async function removeWorktree(repo: string, path: string): Promise<void> {
  const adminDir = await worktreeAdminDir(repo, path).catch(() => null);
  if (adminDir) {
    // removeDir: a worktree bound from the workspace's disk image is a mount point, emptied here and unmounted later.
    await removeDir(path);
    await rm(adminDir, { recursive: true, force: true });
    return;
  }
  const entry = await findWorktree(repo, path);
  if (entry) {
    try {
      // Twice --force: also removes a worktree git left locked when a crash interrupted `worktree add`.
      await raw(repo, ['worktree', 'remove', '--force', '--force', entry.path]);
    } catch {
      // The directory may already be gone; rm + prune below finish the job.
    }
  }
  await removeDir(path);
  await prune(repo);
}

export async function prune(repo: string): Promise<void> {
  await raw(repo, ['worktree', 'prune']);
}

/** Commits on branch that are not reachable from base; null when either cannot be resolved. */
export async function commitsBeyond(repo: string, branch: string, base: string): Promise<number | null> {
  const out = await rawOrNull(repo, ['rev-list', '--count', `${base}..refs/heads/${branch}`]);
  const n = out === null ? Number.NaN : Number.parseInt(out.trim(), 10);
  return Number.isFinite(n) ? n : null;
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

// ---- diff and status against the default branch ----

/** The merge-base of two commits (the fork point), or null when they share no history. */
export async function mergeBase(repo: string, a: string, b: string): Promise<string | null> {
  const out = ((await rawOrNull(repo, ['merge-base', a, b])) ?? '').trim();
  return /^[0-9a-f]{40,64}$/.test(out) ? out : null;
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
export async function diffPatch(gitDir: string, from: string, to: string, maxBytes: number): Promise<{ patch: string; truncated: boolean }> {
  // No external diff or textconv: only git's own diff of the two trees.
  const r = await execGit({ gitDir, args: ['diff', '--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', from, to, '--'], maxBytes: maxBytes + 1 });
  if (r.timedOut) throw new GroveError('git_failed', 'reading the diff: git did not finish in time');
  if (r.code !== 0 && !r.overflow) throw new GroveError('git_failed', `reading the diff: ${r.stderr.trim() || `git exited with ${r.code}`}`);
  const all = r.stdout;
  // Cut at the last whole line within the cap, so the patch never ends mid-character.
  let end = Math.min(all.length, maxBytes);
  if (r.overflow) {
    const nl = all.lastIndexOf(0x0a, end - 1);
    end = nl >= 0 ? nl + 1 : 0;
  }
  return { patch: all.subarray(0, end).toString('utf8'), truncated: r.overflow };
}
