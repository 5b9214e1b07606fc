// Allowed-paths reverts, per-turn snapshots and undo on real git worktrees of a bare clone.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cloneBare, ensureWorktree } from './git.ts';
import { PathPolicy, globToRegExp } from './path-globs.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';
import { clearSnapshots, listSnapshots, recordSnapshot, revertOutsideAllowed, turnRef, undoLast } from './turn-snapshots.ts';
import type { WorktreeContext } from './turn-snapshots.ts';

let tmp: string;
let repo: string;
let ctx: WorktreeContext;
let counter = 0;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-turns-'));
  makeSourceRepo(join(tmp, 'src'));
  repo = join(tmp, 'repos', 'demo');
  await cloneBare(join(tmp, 'src'), repo);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function freshWorktree(): Promise<void> {
  counter++;
  const name = `w${counter}`;
  const worktree = join(tmp, 'worktrees', name);
  await ensureWorktree(repo, { path: worktree, branch: `grove/${name}`, base: 'main' });
  ctx = { repo, worktree, slug: `demo~${name}`, branch: `grove/${name}` };
}

const read = (rel: string) => readFileSync(join(ctx.worktree, rel), 'utf8');
const write = (rel: string, content: string) => {
  mkdirSync(join(ctx.worktree, rel, '..'), { recursive: true });
  writeFileSync(join(ctx.worktree, rel), content);
};
const status = () => git(ctx.worktree, 'status', '--porcelain', '--untracked-files=all').split('\n').map((l) => l.trim()).filter(Boolean).sort();

describe('path globs', () => {
  it.each([
    ['src/**', 'src/a/b.ts', true],
    ['src/**', 'src', false], // a file named src is not inside src/
    ['src/**', 'srcx/a.ts', false],
    ['src', 'src/a/b.ts', true],
    ['src/', 'src/a.ts', true],
    ['*.md', 'README.md', true],
    ['*.md', 'docs/x.md', false],
    ['**/*.md', 'docs/x.md', true],
    ['**/*.md', 'x.md', true],
    ['docs/*.md', 'docs/a/x.md', false],
    ['a?c.txt', 'abc.txt', true],
    ['a?c.txt', 'a/c.txt', false],
    ['[ab].txt', 'b.txt', true],
    ['[!ab].txt', 'c.txt', true],
    ['[!ab].txt', 'a.txt', false],
    ['file(1).txt', 'file(1).txt', true],
    ['file.txt', 'fileXtxt', false],
  ])('%s on %s -> %s', (glob, path, expected) => {
    expect(new PathPolicy([glob]).allows(path)).toBe(expected);
  });

  it('allows everything without globs', () => {
    expect(new PathPolicy(undefined).allows('anything/at/all')).toBe(true);
    expect(globToRegExp('**').test('a/b')).toBe(true);
  });
});

describe('allowed paths', () => {
  beforeEach(freshWorktree);
  it('restores tracked files and removes new files outside the globs, keeping changes inside', async () => {
    write('app.txt', 'changed by the agent\n');
    write('README.md', 'also changed\n');
    write('src/new.ts', 'inside\n');
    write('secrets/leak.txt', 'outside\n');
    rmSync(join(ctx.worktree, 'README.md'));
    const reverted = await revertOutsideAllowed(ctx, ['src/**', 'app.txt']);
    expect(reverted).toEqual(expect.arrayContaining([{ path: 'README.md', action: 'restored' }, { path: 'secrets/leak.txt', action: 'removed' }]));
    expect(reverted).toHaveLength(2);
    expect(read('README.md')).toBe('# demo\n');
    expect(existsSync(join(ctx.worktree, 'secrets'))).toBe(false);
    expect(read('app.txt')).toBe('changed by the agent\n');
    expect(read('src/new.ts')).toBe('inside\n');
    expect(status()).toEqual(['?? src/new.ts', 'M app.txt']);
  });

  it('sees through a .gitignore the agent changed to hide a new file', async () => {
    write('.gitignore', 'hidden.txt\n');
    write('hidden.txt', 'sneaky\n');
    const reverted = await revertOutsideAllowed(ctx, ['src/**']);
    expect(reverted.map((r) => r.path).sort()).toEqual(['.gitignore', 'hidden.txt']);
    expect(existsSync(join(ctx.worktree, 'hidden.txt'))).toBe(false);
  });

  it('never follows a symlink the agent planted when removing', async () => {
    const outside = join(tmp, `outside-${counter}`);
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep.txt'), 'host file\n');
    symlinkSync(outside, join(ctx.worktree, 'link'));
    const reverted = await revertOutsideAllowed(ctx, ['src/**']);
    expect(reverted).toEqual([{ path: 'link', action: 'removed' }]);
    expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('host file\n');
    expect(existsSync(join(ctx.worktree, 'link'))).toBe(false);
  });

  it('does not read the worktree admin dir config (a planted fsmonitor never runs)', async () => {
    const admin = git(ctx.worktree, 'rev-parse', '--git-dir');
    const marker = join(tmp, `pwned-${counter}`);
    writeFileSync(join(admin, 'config.worktree'), `[core]\n\tfsmonitor = "touch ${marker}"\n`);
    git(repo, 'config', 'extensions.worktreeConfig', 'true');
    try {
      write('outside.txt', 'x');
      await revertOutsideAllowed(ctx, ['src/**']);
      await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
      expect(existsSync(marker)).toBe(false);
    } finally {
      git(repo, 'config', '--unset', 'extensions.worktreeConfig');
    }
  });

  it('does nothing without globs', async () => {
    write('anything.txt', 'x');
    expect(await revertOutsideAllowed(ctx, undefined)).toEqual([]);
    expect(existsSync(join(ctx.worktree, 'anything.txt'))).toBe(true);
  });
});

describe('snapshots and undo', () => {
  beforeEach(freshWorktree);
  it('records a snapshot per changing turn without moving the branch, and undoes them one by one', async () => {
    const tip = git(repo, 'rev-parse', `refs/heads/${ctx.branch}`);
    write('a.txt', 'one\n');
    const s1 = await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    expect(s1).toMatchObject({ n: 1, ref: turnRef(ctx.slug, 1), files: ['a.txt'] });
    expect(await recordSnapshot(ctx, { n: 2, turn: 'turn-2' })).toBeNull(); // nothing changed in turn 2
    write('a.txt', 'two\n');
    write('app.txt', 'v2\n');
    write('dir/b.txt', 'b\n');
    const s3 = await recordSnapshot(ctx, { n: 3, turn: 'turn-3' });
    expect(s3?.files.sort()).toEqual(['a.txt', 'app.txt', 'dir/b.txt']);
    expect(git(repo, 'rev-parse', `refs/heads/${ctx.branch}`)).toBe(tip);
    expect(git(repo, 'rev-parse', `${s3?.commit ?? ''}^1`)).toBe(s1?.commit);
    expect((await listSnapshots(ctx)).map((s) => s.n)).toEqual([3, 1]);

    const u1 = await undoLast(ctx);
    expect(u1).toMatchObject({ n: 3, restored: s1?.commit, remaining: 1 });
    expect(read('a.txt')).toBe('one\n');
    expect(read('app.txt')).toBe('v1\n');
    expect(existsSync(join(ctx.worktree, 'dir'))).toBe(false);

    const u2 = await undoLast(ctx);
    expect(u2).toMatchObject({ n: 1, restored: tip, remaining: 0 });
    expect(existsSync(join(ctx.worktree, 'a.txt'))).toBe(false);
    expect(status()).toEqual([]);
    expect(await undoLast(ctx)).toBeNull();
    // Nothing is lost: the undone snapshots are kept.
    expect(git(repo, 'rev-parse', `refs/grove/demo+${ctx.slug.split('~')[1]}/undone/3`)).toBe(s3?.commit);
  });

  it('keeps what changed after the snapshot when undoing, and the next turn builds on the restored state', async () => {
    write('a.txt', 'one\n');
    const s1 = await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    write('late.txt', 'written after the snapshot\n');
    const undo = await undoLast(ctx);
    expect(existsSync(join(ctx.worktree, 'late.txt'))).toBe(false);
    const kept = git(repo, 'rev-parse', undo?.ref ?? '');
    expect(kept).not.toBe(s1?.commit);
    expect(git(repo, 'show', `${kept}:late.txt`)).toBe('written after the snapshot');
    write('c.txt', 'c\n');
    const s2 = await recordSnapshot(ctx, { n: 2, turn: 'turn-2' });
    expect(s2?.files).toEqual(['c.txt']);
  });

  it('clears old snapshot refs for a new workspace under the same slug', async () => {
    write('a.txt', 'one\n');
    await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    await undoLast(ctx);
    await clearSnapshots(ctx);
    expect(git(repo, 'for-each-ref', `refs/grove/demo+${ctx.slug.split('~')[1]}/`)).toBe('');
  });
});
