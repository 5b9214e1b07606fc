import { randomBytes } from 'node:crypto';
import { constants as fsConstants, existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, readdir, realpath, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { GroveError, overlayPathProblem, parseRecoveryRef, recoveryRef, recoveryRefPrefix } from '@grove/contracts';
import { execGit, gitText } from './git-exec.ts';
import type { GitExecOptions } from './git-exec.ts';
import { isEmptyDir, readRegularFile, removeDir, replaceFile } from './fsutil.ts';

/**
 * The git operations core needs, all through git-exec.ts (explicit GIT_DIR, hardened config, deadline).
 * Worktrees belong to the sandbox uid while the host runs as root; git-exec names the exact repository as
 * safe.directory for each call.
 */

/** git <args> in gitDir; failures become GroveError('git_failed') naming what was attempted. */
function raw(gitDir: string, args: string[], what = `git ${args[0] ?? ''}`, more: Partial<GitExecOptions> = {}): Promise<string> {
  return gitText({ gitDir, args, what, ...more });
}

/** Like raw, but a failure is a null (for lookups whose "no" is an exit code). */
async function rawOrNull(gitDir: string, args: string[], more: Partial<GitExecOptions> = {}): Promise<string | null> {
  const r = await execGit({ gitDir, args, ...more });
  return r.code === 0 && !r.timedOut && !r.overflow ? r.stdout.toString('utf8') : null;
}

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

/** Remove a worktree (even a dirty or locked one) and its directory, then prune. No error when absent. */
export async function removeWorktree(repo: string, path: string): Promise<void> {
  const entry = await findWorktree(repo, path);
  if (entry) {
    try {
      // Twice --force: also removes a worktree git left locked when a crash interrupted `worktree add`.
      await raw(repo, ['worktree', 'remove', '--force', '--force', entry.path]);
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

// ---- snapshots: the worktree as a tree, without entering anything the agent planted ----

const IDENTITY = { name: 'Grove', email: 'grove@localhost' };
/** A walk of the worktree gives up beyond this many entries (the snapshot fails; nothing is half-saved). */
const MAX_WALK_ENTRIES = 2_000_000;

/**
 * Directories of the worktree that are git repositories of their own (they hold a `.git` entry of any kind:
 * directory, gitfile, link, FIFO), as paths relative to the root with "/". Found by reading directories only:
 * no link is followed (a Dirent of a symlink is never a directory), nothing inside a `.git` is opened, and
 * the walk does not descend into an embedded repository. The worktree's own top-level `.git` is skipped.
 */
export async function findEmbeddedRepos(worktree: string): Promise<string[]> {
  const found: string[] = [];
  let seen = 0;
  const walk = async (rel: string): Promise<void> => {
    // readdir with file types: one getdents pass, the types from the directory itself (a link is never a directory).
    const entries = await readdir(rel ? join(worktree, rel) : worktree, { withFileTypes: true }).catch(() => null);
    if (!entries) return;
    const subdirs: string[] = [];
    let nested = false;
    for (const e of entries) {
      if (++seen > MAX_WALK_ENTRIES) throw new GroveError('git_failed', `the worktree holds more than ${MAX_WALK_ENTRIES} entries; not snapshotting it`);
      if (e.name === '.git') {
        if (rel) nested = true;
        continue;
      }
      if (e.isDirectory()) subdirs.push(rel ? `${rel}/${e.name}` : e.name);
    }
    if (nested) {
      found.push(rel);
      return;
    }
    for (const sub of subdirs) await walk(sub);
  };
  await walk('');
  return found.sort();
}

/** Paths of parent's gitlinks (submodule entries, mode 160000). */
async function gitlinksOf(gitDir: string, parent: string | null): Promise<string[]> {
  if (!parent) return [];
  const out = await raw(gitDir, ['ls-tree', '-r', '-z', '--full-tree', parent], 'listing the submodules of the base');
  const links: string[] = [];
  for (const rec of out.split('\0')) {
    const m = /^160000 commit [0-9a-f]+\t(.+)$/s.exec(rec);
    if (m?.[1]) links.push(m[1]);
  }
  return links;
}

export interface StageOptions {
  /** The primary: its overlay list and info/exclude apply to every snapshot. */
  repo: string;
  /** Where git reads the parent from and writes the new blobs: the primary, or a workspace's store. */
  gitDir: string;
  worktree: string;
  /** A throwaway index in a host-only directory. */
  indexFile: string;
  parent: string | null;
}

/**
 * Fill indexFile with the worktree: parent's tree, then every change and every untracked file that is not
 * ignored, minus the overlay paths. Embedded repositories are never entered: every directory holding a
 * `.git` and every gitlink of parent is excluded from the `git add` (pathspec excludes), so git neither adds
 * an untracked nested repository as a gitlink (which reads its HEAD and config) nor checks an existing
 * gitlink (which runs `git status` inside it, under that repository's config: core.fsmonitor and friends).
 * Existing gitlinks stay as parent has them. Returns the embedded repositories left out, for the report.
 */
export async function stageWorktree(o: StageOptions): Promise<string[]> {
  const more: Partial<GitExecOptions> = {
    workTree: o.worktree,
    indexFile: o.indexFile,
    timeoutMs: 600_000,
    // A store has no info/exclude of its own: the primary's (host-written, with the overlay block) applies.
    config: o.gitDir === o.repo ? [] : [['core.excludesFile', join(o.repo, 'info', 'exclude')]],
  };
  const run = (args: string[], what: string, input?: string): Promise<string> => raw(o.gitDir, args, what, { ...more, input });
  await run(o.parent ? ['read-tree', o.parent] : ['read-tree', '--empty'], 'reading the base tree');
  const skip = [...new Set([...(await findEmbeddedRepos(o.worktree)), ...(await gitlinksOf(o.gitDir, o.parent))])].sort();
  if (skip.length === 0) await run(['add', '--all'], 'reading the worktree');
  else {
    // Exclude-only pathspecs mean "everything else"; literal, so a name with glob characters is itself.
    const specs = skip.map((p) => `:(top,exclude,literal)${p}\0`).join('');
    await run(['add', '--all', '--pathspec-from-file=-', '--pathspec-file-nul'], 'reading the worktree', specs);
  }
  // A repository the agent made between the walk and the add is a new gitlink in the index now (git read only its
  // HEAD and refs to name it): taken out again, so no snapshot ever records it and no later one looks inside.
  const known = new Set(await gitlinksOf(o.gitDir, o.parent));
  const raced: string[] = [];
  for (const rec of (await run(['ls-files', '--stage', '-z'], 'listing the staged gitlinks')).split('\0')) {
    const m = /^160000 [0-9a-f]+ \d\t(.+)$/s.exec(rec);
    if (m?.[1] && !known.has(m[1])) raced.push(m[1]);
  }
  if (raced.length > 0) await run(['update-index', '--force-remove', '-z', '--stdin'], 'leaving out new embedded repositories', raced.map((p) => `${p}\0`).join(''));
  await dropOverlayEntries((args) => run(args, 'leaving out the overlay files'), o.repo, o.parent);
  return [...new Set([...skip, ...raced])].sort();
}

export interface TreeSnapshot {
  tree: string;
  /** Embedded repositories (and gitlinks) that were recorded as the parent has them, never entered. */
  embedded: string[];
}

/**
 * The worktree's content as a tree in gitDir's object store (see stageWorktree). It uses a throwaway index in
 * a host-only temp dir and an explicit GIT_DIR, so the worktree's own index, its `.git` file and its admin dir
 * are neither read nor written: those are writable from the sandbox.
 */
export async function snapshotTree(o: { repo: string; gitDir?: string; worktree: string; parent: string | null; indexOut?: string }): Promise<TreeSnapshot> {
  const dir = await mkdtemp(join(tmpdir(), 'grove-snapshot-'));
  const gitDir = o.gitDir ?? o.repo;
  try {
    const indexFile = join(dir, 'index');
    const embedded = await stageWorktree({ repo: o.repo, gitDir, worktree: o.worktree, indexFile, parent: o.parent });
    const tree = (await raw(gitDir, ['write-tree'], 'writing the worktree tree', { indexFile })).trim();
    // The index itself, with the stat data of every file it just hashed: a checkpoint installs it as the
    // worktree's own, so `git status` in the sandbox is clean afterwards without re-reading anything there.
    if (o.indexOut) await copyFile(indexFile, o.indexOut, fsConstants.COPYFILE_EXCL);
    return { tree, embedded };
  } catch (e) {
    if (e instanceof GroveError) throw new GroveError('git_failed', `saving the uncommitted work in ${o.worktree}: ${e.message}`, { cause: e });
    throw e;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

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
  if (!existsSync(join(objects, 'objects', 'info', 'alternates'))) {
    const format = (await raw(repo, ['rev-parse', '--show-object-format'], 'reading the object format')).trim() || 'sha1';
    await mkdir(dirname(objects), { recursive: true, mode: 0o700 });
    await raw(objects, ['init', '--bare', '--quiet', '--template=', `--object-format=${format}`, objects], 'creating the workspace object store', { cwd: dirname(objects) });
    await mkdir(join(objects, 'objects', 'info'), { recursive: true });
    await writeFile(join(objects, 'objects', 'info', 'alternates'), `${join(await realpath(repo), 'objects')}\n`, { mode: 0o644 });
  }
  await migrateLegacyRefs(repo, objects, slug);
  openedStores.add(objects);
}

async function migrateLegacyRefs(repo: string, objects: string, slug: string): Promise<void> {
  const prefix = `${slugRefBase(slug)}/`;
  const out = await raw(repo, ['for-each-ref', '--format=%(refname) %(objectname)', prefix], 'listing old snapshot refs');
  const refs = out.split('\n').map((l) => l.trim().split(' ')).filter((p): p is [string, string] => p.length === 2 && !!p[0] && !!p[1]);
  if (refs.length === 0) return;
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
  /** The commit parent resolved to (in the primary); null when there is none. */
  tip: string | null;
  /** The worktree's content as a tree (see snapshotTree), in the store the snapshot was written to. */
  tree: string;
  /** The tree is exactly tip's (or empty without a tip): nothing to save or commit. */
  unchanged: boolean;
  /** Embedded repositories kept as the parent has them, never entered (see stageWorktree). */
  embedded: string[];
}

/**
 * Step one of turning a worktree into a commit, shared by the teardown recovery refs and checkpoints: resolve
 * the parent in the primary, snapshot the worktree through a throwaway index into `objects` (a workspace's
 * store; the primary itself for a checkpoint, whose commit is shared work), and say whether anything changed.
 */
export async function snapshotWorktree(repo: string, o: { worktree: string; parent: string | null; objects?: string; indexOut?: string }): Promise<WorktreeSnapshot> {
  const gitDir = o.objects ?? repo;
  const tip = o.parent ? await resolveCommit(repo, o.parent) : null;
  const { tree, embedded } = await snapshotTree({ repo, gitDir, worktree: o.worktree, parent: tip, indexOut: o.indexOut });
  const unchanged = tip ? (await commitInfo(gitDir, tip)).tree === tree : (await raw(gitDir, ['ls-tree', tree], 'reading the saved tree')).trim() === '';
  return { tip, tree, unchanged, embedded };
}

export interface CommitIdentity {
  name: string;
  email: string;
}

/** Step two: a commit of tree on parent, in gitDir, with this identity as author and committer; moves no ref. */
export async function writeCommit(gitDir: string, o: { tree: string; parent: string | null; message: string; identity?: CommitIdentity; what: string }): Promise<string> {
  const who = o.identity ?? IDENTITY;
  const env = { GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email };
  return (await raw(gitDir, ['commit-tree', o.tree, ...(o.parent ? ['-p', o.parent] : []), '-m', o.message], o.what, { env })).trim();
}

/** Paths that differ between two trees (or a tree and the empty tree). */
export async function changedPaths(gitDir: string, from: string | null, to: string): Promise<string[]> {
  const base = from ?? (await raw(gitDir, ['hash-object', '-t', 'tree', '/dev/null'], 'naming the empty tree')).trim();
  const out = await raw(gitDir, ['diff-tree', '-r', '--no-renames', '--name-only', '-z', base, to], 'listing changed paths');
  return out.split('\0').filter(Boolean);
}

/** Tree and parents of a commit. */
async function commitInfo(gitDir: string, commit: string): Promise<{ tree: string; parents: string[] }> {
  const out = (await raw(gitDir, ['log', '-1', '--format=%T %P', commit, '--'], `reading commit ${commit}`)).trim();
  const [tree = '', ...parents] = out.split(' ').filter(Boolean);
  return { tree, parents };
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
  await openStore(repo, o.objects, o.slug);
  const { tip, tree, unchanged, embedded } = await snapshotWorktree(repo, { worktree: o.worktree, parent: o.parent, objects: o.objects });
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

export interface Checkpoint {
  /** The branch's new tip; null when the worktree held nothing beyond it (the branch did not move). */
  commit: string | null;
  files: string[];
  /** Embedded repositories that were not committed (kept as the branch has them). */
  embedded: string[];
}

/**
 * Commit the worktree's content (tracked changes, staged or not, and untracked files that are not ignored) onto
 * its branch in the primary, from the host, and make the result the worktree's index (`indexPath`, given by the
 * caller: host code never reads the worktree's `.git` to find it) so the branch, the index and the files agree.
 * The index is staged in `scratch` (host-only), then written beside indexPath afresh, handed to `owner` through its
 * descriptor and renamed into place: nothing is written, chowned or followed by path where the agent can write. The branch
 * moves only if it still points where it did (update-ref with the old value). Call under the repository lock.
 */
export async function checkpointWorktree(
  repo: string,
  o: { worktree: string; branch: string; message: string; identity: CommitIdentity; indexPath: string; scratch: string; owner?: { uid: number; gid: number } | null },
): Promise<Checkpoint> {
  await mkdir(o.scratch, { recursive: true, mode: 0o700 });
  const staged = join(o.scratch, `index-${randomBytes(8).toString('hex')}`);
  try {
    const ref = `refs/heads/${o.branch}`;
    const snap = await snapshotWorktree(repo, { worktree: o.worktree, parent: ref, indexOut: staged });
    if (!snap.tip) throw new GroveError('git_failed', `branch ${o.branch} does not exist`);
    if (snap.unchanged) return { commit: null, files: [], embedded: snap.embedded };
    const commit = await writeCommit(repo, { tree: snap.tree, parent: snap.tip, message: o.message, identity: o.identity, what: `committing a checkpoint on ${o.branch}` });
    await raw(repo, ['update-ref', '-m', 'grove: checkpoint', ref, commit, snap.tip], `moving ${o.branch} to the checkpoint`);
    // The target dir is the sandbox's (on the workspace's disk image, another filesystem than scratch): the index
    // is written there fresh under a name the agent cannot guess (O_EXCL|O_NOFOLLOW), handed to `owner` through
    // its descriptor and renamed over indexPath, which replaces a link an agent planted instead of following it.
    await replaceFile({ target: o.indexPath, tmpDir: dirname(o.indexPath), content: await readFile(staged), owner: o.owner ?? null });
    return { commit, files: await changedPaths(repo, snap.tip, snap.tree), embedded: snap.embedded };
  } finally {
    await rm(staged, { force: true });
  }
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
