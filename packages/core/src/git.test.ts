import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  branchExists,
  cloneBare,
  commitsBeyond,
  defaultBranch,
  deleteBranchIfEmpty,
  ensureWorktree,
  freshBranch,
  isBareRepo,
  listWorktrees,
  removeWorktree,
  resolveCommit,
  worktreeAdminDir,
} from './git.ts';
import { findEmbeddedRepos } from './git-snapshot.ts';
import {
  openStore,
  listRecoveryRefs,
  pendingWork,
  saveWork,
} from './git-store.ts';
import { branches, git, makeSourceRepo } from './test-support/repo.ts';

let tmp: string;
let repo: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-git-'));
  makeSourceRepo(join(tmp, 'src'));
  repo = join(tmp, 'repos', 'demo');
  await cloneBare(join(tmp, 'src'), repo);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A workspace's private object store (paths.workspaceObjects). */
const storeOf = (slug: string) => join(tmp, 'objects', `${slug}.git`);

describe('git', () => {
  it('clones bare and reads the default branch from HEAD', async () => {
    expect(await isBareRepo(repo)).toBe(true);
    expect(existsSync(join(repo, 'HEAD'))).toBe(true);
    expect(existsSync(join(repo, '.git'))).toBe(false);
    expect(await defaultBranch(repo)).toBe('main');
    expect(branches(repo).sort()).toEqual(['feature', 'main']);
  });

  it('does not mistake a plain directory (even inside another repo) for a bare clone', async () => {
    const plain = join(tmp, 'src', 'sub');
    mkdirSync(plain, { recursive: true });
    expect(await isBareRepo(plain)).toBe(false);
    expect(await isBareRepo(join(tmp, 'nope'))).toBe(false);
  });

  it('reports a failed clone as git_failed and leaves nothing behind', async () => {
    const dest = join(tmp, 'repos', 'broken');
    await expect(cloneBare(join(tmp, 'does-not-exist'), dest)).rejects.toMatchObject({ code: 'git_failed' });
    expect(existsSync(dest)).toBe(false);
  });

  it('resolves refs to commits and rejects unknown ones', async () => {
    expect(await resolveCommit(repo, 'main')).toMatch(/^[0-9a-f]{40}$/);
    expect(await resolveCommit(repo, 'feature')).not.toBe(await resolveCommit(repo, 'main'));
    expect(await resolveCommit(repo, 'no-such-branch')).toBeNull();
  });

  it('adds a worktree on a new branch, reads its admin dir from .git, and reuses it idempotently', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'a');
    const base = (await resolveCommit(repo, 'main')) ?? '';
    const first = await ensureWorktree(repo, { path, branch: 'grove/a', base });
    expect(first).toMatchObject({ reused: false, createdBranch: true });
    expect(readFileSync(join(path, 'app.txt'), 'utf8')).toBe('v1\n');
    expect(first.adminDir).toBe(join(repo, 'worktrees', 'a'));
    expect(readFileSync(join(path, '.git'), 'utf8')).toContain(first.adminDir);
    expect(git(path, 'rev-parse', '--abbrev-ref', 'HEAD')).toBe('grove/a');

    writeFileSync(join(path, 'work.txt'), 'uncommitted\n');
    const again = await ensureWorktree(repo, { path, branch: 'grove/a', base });
    expect(again).toMatchObject({ reused: true, createdBranch: false, adminDir: first.adminDir });
    expect(existsSync(join(path, 'work.txt'))).toBe(true);
  });

  it('gets the admin dir right when git had to number it', async () => {
    // Same basename in another folder: git names the admin dir b1 (or similar), which must not be guessed.
    const base = (await resolveCommit(repo, 'main')) ?? '';
    const p1 = join(tmp, 'worktrees', 'x', 'b');
    const p2 = join(tmp, 'worktrees', 'y', 'b');
    const r1 = await ensureWorktree(repo, { path: p1, branch: 'grove/b1', base });
    const r2 = await ensureWorktree(repo, { path: p2, branch: 'grove/b2', base });
    expect(r1.adminDir).not.toBe(r2.adminDir);
    expect(await worktreeAdminDir(repo, p2)).toBe(r2.adminDir);
    expect(readFileSync(join(r2.adminDir, 'gitdir'), 'utf8').trim()).toBe(join(p2, '.git'));
    await removeWorktree(repo, p1);
    await removeWorktree(repo, p2);
  });

  it('replaces a stray directory with a real worktree', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'stray');
    mkdirSync(path, { recursive: true });
    writeFileSync(join(path, 'junk'), 'x');
    const base = (await resolveCommit(repo, 'feature')) ?? '';
    const r = await ensureWorktree(repo, { path, branch: 'grove/stray', base });
    expect(r.reused).toBe(false);
    expect(existsSync(join(path, 'junk'))).toBe(false);
    expect(existsSync(join(path, 'feature.txt'))).toBe(true);
  });

  it('adds at a path whose directory was deleted while git still lists it, on a fresh branch and on an existing one', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'deleted');
    const base = (await resolveCommit(repo, 'main')) ?? '';
    await ensureWorktree(repo, { path, branch: 'grove/old', base });
    rmSync(path, { recursive: true, force: true });
    expect((await listWorktrees(repo)).map((w) => w.path)).toContain(path);
    const fresh = await ensureWorktree(repo, { path, branch: 'grove/fresh', base });
    expect(fresh).toMatchObject({ reused: false, createdBranch: true });
    expect(await branchExists(repo, 'grove/fresh')).toBe(true);
    expect((await listWorktrees(repo)).find((w) => w.path === path)?.branch).toBe('refs/heads/grove/fresh');

    rmSync(path, { recursive: true, force: true });
    const again = await ensureWorktree(repo, { path, branch: 'grove/old', base });
    expect(again).toMatchObject({ reused: false, createdBranch: false });
    expect(existsSync(join(path, '.git'))).toBe(true);
  });

  it('removes a dirty worktree and prunes it, keeping the branch', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'gone');
    const base = (await resolveCommit(repo, 'main')) ?? '';
    await ensureWorktree(repo, { path, branch: 'grove/gone', base });
    writeFileSync(join(path, 'dirty.txt'), 'x');
    writeFileSync(join(path, 'README.md'), 'changed');
    await removeWorktree(repo, path);
    expect(existsSync(path)).toBe(false);
    expect((await listWorktrees(repo)).map((w) => w.path)).not.toContain(path);
    expect(await branchExists(repo, 'grove/gone')).toBe(true);
    // Removing again is a no-op.
    await removeWorktree(repo, path);
  });

  it('removes a locked worktree and its admin dir without a prune, and the path can be forked again', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'locked');
    const base = (await resolveCommit(repo, 'main')) ?? '';
    const { adminDir } = await ensureWorktree(repo, { path, branch: 'grove/locked', base });
    git(repo, 'worktree', 'lock', path);
    await removeWorktree(repo, path);
    expect(existsSync(path)).toBe(false);
    // Gone from disk, not merely prunable: git lists nothing at the path before any prune runs.
    expect(existsSync(adminDir)).toBe(false);
    expect((await listWorktrees(repo)).map((w) => w.path)).not.toContain(path);
    const again = await ensureWorktree(repo, { path, branch: 'grove/locked', base });
    expect(again).toMatchObject({ reused: false, createdBranch: false });
  });

  it('picks grove/<name>, or adds a 4-hex nonce when the branch exists', async () => {
    expect(await freshBranch(repo, 'new-one')).toBe('grove/new-one');
    expect(await freshBranch(repo, 'a')).toMatch(/^grove\/a-[0-9a-f]{4}$/);
  });

  it('deletes a branch only when it has no commits beyond its base', async () => {
    const base = (await resolveCommit(repo, 'main')) ?? '';
    const emptyPath = join(tmp, 'worktrees', 'demo', 'empty');
    await ensureWorktree(repo, { path: emptyPath, branch: 'grove/empty', base });
    const workPath = join(tmp, 'worktrees', 'demo', 'work');
    await ensureWorktree(repo, { path: workPath, branch: 'grove/work', base });
    writeFileSync(join(workPath, 'new.txt'), 'work');
    // Commit from the host (the bare repo is writable here): the branch now carries work.
    git(workPath, 'add', '.');
    git(workPath, 'commit', '-q', '-m', 'work');
    expect(await commitsBeyond(repo, 'grove/work', base)).toBe(1);
    await removeWorktree(repo, emptyPath);
    await removeWorktree(repo, workPath);
    expect(await deleteBranchIfEmpty(repo, 'grove/empty', base)).toBe(true);
    expect(await deleteBranchIfEmpty(repo, 'grove/work', base)).toBe(false);
    expect(await branchExists(repo, 'grove/empty')).toBe(false);
    expect(await branchExists(repo, 'grove/work')).toBe(true);
  });

  it('does not delete an "empty" branch whose commits no other ref holds', async () => {
    // A base commit only this branch points at (made on the side, like a fetched head whose ref went away).
    const tree = git(repo, 'rev-parse', 'main^{tree}');
    const lonely = git(repo, 'commit-tree', tree, '-p', 'main', '-m', 'held by one branch only');
    git(repo, 'update-ref', 'refs/heads/grove/lonely', lonely);
    expect(await commitsBeyond(repo, 'grove/lonely', lonely)).toBe(0);
    expect(await deleteBranchIfEmpty(repo, 'grove/lonely', lonely)).toBe(false);
    expect(git(repo, 'rev-parse', 'refs/heads/grove/lonely')).toBe(lonely);
    // Once another ref holds it, the branch is only a name and goes.
    git(repo, 'update-ref', 'refs/tags/keep-lonely', lonely);
    expect(await deleteBranchIfEmpty(repo, 'grove/lonely', lonely)).toBe(true);
    expect(await branchExists(repo, 'grove/lonely')).toBe(false);
  });

  it('fails worktree add on a bad base with git_failed', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'bad');
    await expect(ensureWorktree(repo, { path, branch: 'grove/bad', base: 'nope' })).rejects.toMatchObject({ code: 'git_failed' });
    expect(await branchExists(repo, 'grove/bad')).toBe(false);
  });
});

describe('saving work before removal', () => {
  /** A fresh worktree on its own branch off main. */
  async function worktree(name: string): Promise<string> {
    const path = join(tmp, 'worktrees', 'demo', name);
    await ensureWorktree(repo, { path, branch: `grove/${name}`, base: (await resolveCommit(repo, 'main')) ?? '' });
    return path;
  }

  /** Check the saved commit out somewhere else and read a file back. */
  function checkout(commit: string, dir: string, from: string): string {
    mkdirSync(dir, { recursive: true });
    git(from, `--work-tree=${dir}`, 'checkout', commit, '--', '.');
    return dir;
  }

  it('commits modified, staged, untracked (not ignored) and deleted files to refs/grove/<slug>/teardown/1, byte for byte, moving nothing', async () => {
    const path = await worktree('save-a');
    const tip = git(repo, 'rev-parse', 'refs/heads/grove/save-a');
    const binary = Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]);
    writeFileSync(join(path, 'README.md'), '# changed, not staged\n');
    writeFileSync(join(path, 'staged.txt'), 'staged only\n');
    git(path, 'add', 'staged.txt');
    mkdirSync(join(path, 'deep', 'er'), { recursive: true });
    writeFileSync(join(path, 'deep', 'er', 'blob.bin'), binary);
    writeFileSync(join(path, 'run.sh'), '#!/bin/sh\necho hi\n');
    chmodSync(join(path, 'run.sh'), 0o755);
    symlinkSync('README.md', join(path, 'link'));
    writeFileSync(join(path, '.gitignore'), '*.log\n');
    writeFileSync(join(path, 'noise.log'), 'ignored');
    rmSync(join(path, 'app.txt'));
    const headBefore = readFileSync(join(await worktreeAdminDir(repo, path), 'index')).toString('base64');

    const saved = await saveWork(repo, { slug: 'demo~save-a', objects: storeOf('demo~save-a'), worktree: path, parent: 'refs/heads/grove/save-a', message: 'saved' });
    expect(saved).toMatchObject({ ref: 'refs/grove/demo+save-a/teardown/1', reused: false });
    expect(git(storeOf('demo~save-a'), 'rev-parse', 'refs/grove/demo+save-a/teardown/1')).toBe(saved?.commit);
    expect(git(storeOf('demo~save-a'), 'rev-parse', `${saved?.commit ?? ''}^1`)).toBe(tip);
    // Saved work is in the workspace's private store only: the primary every sandbox reads has neither ref nor commit.
    expect(git(repo, 'for-each-ref', 'refs/grove/')).toBe('');
    expect(() => git(repo, 'cat-file', '-e', saved?.commit ?? '')).toThrow();
    // The branch, the worktree's own index and its files are untouched.
    expect(git(repo, 'rev-parse', 'refs/heads/grove/save-a')).toBe(tip);
    expect(readFileSync(join(await worktreeAdminDir(repo, path), 'index')).toString('base64')).toBe(headBefore);
    expect(readFileSync(join(path, 'README.md'), 'utf8')).toBe('# changed, not staged\n');

    const out = checkout(saved?.commit ?? '', join(tmp, 'restored-a'), storeOf('demo~save-a'));
    expect(readFileSync(join(out, 'README.md'), 'utf8')).toBe('# changed, not staged\n');
    expect(readFileSync(join(out, 'staged.txt'), 'utf8')).toBe('staged only\n');
    expect(readFileSync(join(out, 'deep', 'er', 'blob.bin')).equals(binary)).toBe(true);
    expect(statSync(join(out, 'run.sh')).mode & 0o111).not.toBe(0);
    expect(git(storeOf('demo~save-a'), 'ls-tree', saved?.commit ?? '', 'link').startsWith('120000')).toBe(true);
    expect(existsSync(join(out, 'noise.log'))).toBe(false);
    expect(existsSync(join(out, 'app.txt'))).toBe(false);
  });

  it('saves nothing for a clean worktree or a missing one; a re-run with the same work reuses the ref; new work gets the next number', async () => {
    const path = await worktree('save-b');
    expect(await saveWork(repo, { slug: 'demo~save-b', objects: storeOf('demo~save-b'), worktree: path, parent: 'refs/heads/grove/save-b', message: 'm' })).toBeNull();
    expect(await saveWork(repo, { slug: 'demo~save-b', objects: storeOf('demo~save-b'), worktree: join(tmp, 'nowhere'), parent: 'refs/heads/grove/save-b', message: 'm' })).toBeNull();
    writeFileSync(join(path, 'one.txt'), '1');
    const first = await saveWork(repo, { slug: 'demo~save-b', objects: storeOf('demo~save-b'), worktree: path, parent: 'refs/heads/grove/save-b', message: 'm' });
    const again = await saveWork(repo, { slug: 'demo~save-b', objects: storeOf('demo~save-b'), worktree: path, parent: 'refs/heads/grove/save-b', message: 'm' });
    expect(again).toEqual({ ref: first?.ref, commit: first?.commit, reused: true, embedded: [] });
    writeFileSync(join(path, 'two.txt'), '2');
    const second = await saveWork(repo, { slug: 'demo~save-b', objects: storeOf('demo~save-b'), worktree: path, parent: 'refs/heads/grove/save-b', message: 'm' });
    expect(second?.ref).toBe('refs/grove/demo+save-b/teardown/2');
    expect((await listRecoveryRefs(repo, 'demo~save-b', storeOf('demo~save-b'))).map((r) => r.n)).toEqual([1, 2]);
    // Another slug's refs are its own; the default workspace's slug has no "+".
    expect(await listRecoveryRefs(repo, 'demo~save', storeOf('demo~save'))).toEqual([]);
    writeFileSync(join(path, 'three.txt'), '3');
    expect((await saveWork(repo, { slug: 'demo', objects: storeOf('demo'), worktree: path, parent: null, message: 'm' }))?.ref).toBe('refs/grove/demo/teardown/1');
  });

  it('pendingWork lists what saveWork would save, and the ref it would use, without writing one', async () => {
    const path = await worktree('save-d');
    const o = { slug: 'demo~save-d', objects: storeOf('demo~save-d'), worktree: path, parent: 'refs/heads/grove/save-d', limit: 2 };
    expect(await pendingWork(repo, o)).toEqual({ files: [], total: 0, ref: null, embedded: [] });
    writeFileSync(join(path, 'README.md'), 'changed\n');
    writeFileSync(join(path, 'staged.txt'), 's');
    git(path, 'add', 'staged.txt');
    writeFileSync(join(path, 'new.txt'), 'n');
    writeFileSync(join(path, '.gitignore'), '*.log\n');
    writeFileSync(join(path, 'noise.log'), 'ignored');
    rmSync(join(path, 'app.txt'));
    const all = await pendingWork(repo, { ...o, limit: 50 });
    expect(all.files).toEqual([
      { status: 'added', path: '.gitignore' },
      { status: 'modified', path: 'README.md' },
      { status: 'deleted', path: 'app.txt' },
      { status: 'added', path: 'new.txt' },
      { status: 'added', path: 'staged.txt' },
    ]);
    expect(all).toMatchObject({ total: 5, ref: 'refs/grove/demo+save-d/teardown/1' });
    // The limit cuts the list, not the count; nothing was written.
    expect(await pendingWork(repo, o)).toMatchObject({ total: 5, files: [{ path: '.gitignore' }, { path: 'README.md' }] });
    expect(await listRecoveryRefs(repo, 'demo~save-d', storeOf('demo~save-d'))).toEqual([]);
    // Once saved, the same work names the ref that already holds it; more work names the next one.
    const saved = await saveWork(repo, { ...o, message: 'm' });
    expect((await pendingWork(repo, o)).ref).toBe(saved?.ref);
    writeFileSync(join(path, 'more.txt'), 'm');
    expect(await pendingWork(repo, o)).toMatchObject({ total: 6, ref: 'refs/grove/demo+save-d/teardown/2' });
    expect(await pendingWork(repo, { ...o, worktree: join(tmp, 'nowhere') })).toEqual({ files: [], total: 0, ref: null, embedded: [] });
  });

  it('ignores a .git file the sandbox rewrote: the snapshot uses the bare repository, not what the worktree points at', async () => {
    const path = await worktree('save-c');
    const planted = join(tmp, 'planted');
    mkdirSync(planted);
    git(planted, 'init', '-q');
    writeFileSync(join(planted, '.git', 'config'), '[core]\n\tfsmonitor = touch /tmp/grove-pwned-by-fsmonitor\n', { flag: 'a' });
    writeFileSync(join(path, '.git'), `gitdir: ${join(planted, '.git')}\n`);
    writeFileSync(join(path, 'work.txt'), 'w');
    const saved = await saveWork(repo, { slug: 'demo~save-c', objects: storeOf('demo~save-c'), worktree: path, parent: 'refs/heads/grove/save-c', message: 'm' });
    expect(saved?.ref).toBe('refs/grove/demo+save-c/teardown/1');
    expect(git(storeOf('demo~save-c'), 'show', `${saved?.commit ?? ''}:work.txt`)).toBe('w');
    expect(existsSync('/tmp/grove-pwned-by-fsmonitor')).toBe(false);
  });
});

describe('embedded repositories and the per-workspace store', () => {
  it('finds nested repositories by reading directories only: no link followed, no .git opened, none entered', async () => {
    const root = mkdtempSync(join(tmp, 'embed-'));
    writeFileSync(join(root, '.git'), 'gitdir: /nowhere\n');
    mkdirSync(join(root, 'a', 'inner', '.git'), { recursive: true });
    mkdirSync(join(root, 'a', 'inner', 'deeper', '.git'), { recursive: true });
    mkdirSync(join(root, 'b'));
    writeFileSync(join(root, 'b', '.git'), 'gitdir: /etc\n');
    mkdirSync(join(root, 'c'));
    execFileSync('mkfifo', [join(root, 'c', '.git')]);
    // A link to a directory holding a repository is a link, not a directory: never followed.
    const outside = mkdtempSync(join(tmp, 'outside-'));
    mkdirSync(join(outside, 'repo', '.git'), { recursive: true });
    symlinkSync(outside, join(root, 'link'));
    mkdirSync(join(root, 'plain', 'dir'), { recursive: true });
    expect(await findEmbeddedRepos(root)).toEqual(['a/inner', 'b', 'c']);
  });

  it('moves an older Grove\'s refs/grove/<slug>/ refs out of the primary into the store once, objects included, and prunes their loose copies', async () => {
    const path = join(tmp, 'worktrees', 'demo', 'legacy');
    await ensureWorktree(repo, { path, branch: 'grove/legacy', base: (await resolveCommit(repo, 'main')) ?? '' });
    // What an older Grove did: the snapshot's objects and ref in the primary.
    writeFileSync(join(path, 'untracked.txt'), 'legacy secret\n');
    const blob = git(repo, 'hash-object', '-w', join(path, 'untracked.txt'));
    const idx = join(tmp, 'legacy-index');
    execFileSync('git', ['-c', 'safe.directory=*', 'read-tree', 'refs/heads/grove/legacy'], { env: { ...process.env, GIT_DIR: repo, GIT_INDEX_FILE: idx } });
    execFileSync('git', ['-c', 'safe.directory=*', 'update-index', '--add', '--cacheinfo', `100644,${blob},untracked.txt`], { env: { ...process.env, GIT_DIR: repo, GIT_INDEX_FILE: idx } });
    const tree = execFileSync('git', ['-c', 'safe.directory=*', 'write-tree'], { env: { ...process.env, GIT_DIR: repo, GIT_INDEX_FILE: idx }, encoding: 'utf8' }).trim();
    const commit = git(repo, 'commit-tree', tree, '-p', 'refs/heads/grove/legacy', '-m', 'old snapshot');
    git(repo, 'update-ref', 'refs/grove/demo+legacy/turns/1', commit);
    git(repo, 'update-ref', 'refs/grove/demo+legacy/teardown/1', commit);
    const other = git(repo, 'commit-tree', tree, '-m', 'another workspace\'s');
    git(repo, 'update-ref', 'refs/grove/demo+other/turns/1', other);

    const store = storeOf('demo~legacy');
    await openStore(repo, store, 'demo~legacy');
    expect(git(store, 'for-each-ref', '--format=%(refname) %(objectname)')).toBe(`refs/grove/demo+legacy/teardown/1 ${commit}\nrefs/grove/demo+legacy/turns/1 ${commit}`);
    expect(git(store, 'show', `${commit}:untracked.txt`)).toBe('legacy secret');
    expect(git(repo, 'for-each-ref', '--format=%(refname)', 'refs/grove/demo+legacy/')).toBe('');
    // Only that workspace's: another's refs stay until its own store opens.
    expect(git(repo, 'rev-parse', 'refs/grove/demo+other/turns/1')).toBe(other);
    // The primary no longer has the snapshot commit; the store's copy is its own (a pack), not borrowed.
    expect(() => git(repo, 'cat-file', '-e', commit)).toThrow();
    expect(git(store, 'count-objects', '-v')).toMatch(/in-pack: [1-9]/);
    expect(readFileSync(join(store, 'objects', 'info', 'alternates'), 'utf8').trim()).toBe(join(repo, 'objects'));
    // Idempotent.
    await openStore(repo, store, 'demo~legacy');
    expect(git(store, 'rev-parse', 'refs/grove/demo+legacy/turns/1')).toBe(commit);
  });
});
