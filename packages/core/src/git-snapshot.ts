import { randomBytes } from 'node:crypto';
import { constants as fsConstants, existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { GroveError, overlayPathProblem } from '@grove/contracts';
import { raw, rawOrNull } from './git-exec.ts';
import type { GitExecOptions } from './git-exec.ts';
import { replaceFile } from './fsutil.ts';

/**
 * The worktree as git content without entering anything the agent planted: snapshots through a throwaway index,
 * the overlay paths every snapshot drops, commits written from the host, and checkpoints onto a branch.
 */

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
  // The three are independent (the throwaway index, the parent's tree, the worktree's directories), so they run
  // side by side: each git process is tens of milliseconds of a teardown. The parent's gitlinks are read once: for
  // the excludes here and for the raced check after the add.
  const [, parentLinks, nested] = await Promise.all([
    run(o.parent ? ['read-tree', o.parent] : ['read-tree', '--empty'], 'reading the base tree'),
    gitlinksOf(o.gitDir, o.parent),
    findEmbeddedRepos(o.worktree),
  ]);
  const skip = [...new Set([...nested, ...parentLinks])].sort();
  if (skip.length === 0) await run(['add', '--all'], 'reading the worktree');
  else {
    // Exclude-only pathspecs mean "everything else"; literal, so a name with glob characters is itself.
    const specs = skip.map((p) => `:(top,exclude,literal)${p}\0`).join('');
    await run(['add', '--all', '--pathspec-from-file=-', '--pathspec-file-nul'], 'reading the worktree', specs);
  }
  // A repository the agent made between the walk and the add is a new gitlink in the index now (git read only its
  // HEAD and refs to name it): taken out again, so no snapshot ever records it and no later one looks inside.
  const known = new Set(parentLinks);
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
 * `base`: parent already resolved by the caller (commitAndTree), which saves a git process on its path.
 */
export async function snapshotWorktree(
  repo: string,
  o: { worktree: string; parent: string | null; base?: { commit: string; tree: string } | null; objects?: string; indexOut?: string },
): Promise<WorktreeSnapshot> {
  const gitDir = o.objects ?? repo;
  const base = o.base !== undefined ? o.base : o.parent ? await commitAndTree(repo, o.parent) : null;
  const tip = base?.commit ?? null;
  const { tree, embedded } = await snapshotTree({ repo, gitDir, worktree: o.worktree, parent: tip, indexOut: o.indexOut });
  const unchanged = base ? base.tree === tree : (await raw(gitDir, ['ls-tree', tree], 'reading the saved tree')).trim() === '';
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

/**
 * The commit a ref names and its tree, in one git process (a teardown and a checkpoint both need the two); null when
 * the ref names no commit. ref must be pre-validated (no leading "-"); --end-of-options keeps it a revision anyway.
 */
export async function commitAndTree(repo: string, ref: string): Promise<{ commit: string; tree: string } | null> {
  const out = ((await rawOrNull(repo, ['log', '-1', '--format=%H %T', '--end-of-options', `${ref}^{commit}`, '--'])) ?? '').trim();
  const m = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64})$/.exec(out);
  return m?.[1] && m[2] ? { commit: m[1], tree: m[2] } : null;
}

/** Tree and parents of a commit. */
export async function commitInfo(gitDir: string, commit: string): Promise<{ tree: string; parents: string[] }> {
  const out = (await raw(gitDir, ['log', '-1', '--format=%T %P', commit, '--'], `reading commit ${commit}`)).trim();
  const [tree = '', ...parents] = out.split(' ').filter(Boolean);
  return { tree, parents };
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
