// Allowed-paths reverts, per-turn snapshots and undo on real git worktrees of a bare clone.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cloneBare, ensureWorktree } from './git.ts';
import { PathPolicy, globToRegExp } from './path-globs.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';
import { clearSnapshots, listSnapshots, listTurns, parseRawNumstat, recordSnapshot, revertOutsideAllowed, revertsFromEvents, turnDiff, turnRef, undoLast } from './turn-snapshots.ts';
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
  ctx = { repo, objects: join(tmp, 'objects', `demo~${name}.git`), worktree, slug: `demo~${name}`, branch: `grove/${name}` };
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
    expect(git(ctx.objects, 'rev-parse', `${s3?.commit ?? ''}^1`)).toBe(s1?.commit);
    // The snapshots are the workspace's own: the primary every sandbox of the project mounts has neither ref nor object.
    expect(git(repo, 'for-each-ref', 'refs/grove/')).toBe('');
    expect(() => git(repo, 'cat-file', '-e', s3?.commit ?? '')).toThrow();
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
    expect(git(ctx.objects, 'rev-parse', `refs/grove/demo+${ctx.slug.split('~')[1]}/undone/3`)).toBe(s3?.commit);
  });

  it('keeps what changed after the snapshot when undoing, and the next turn builds on the restored state', async () => {
    write('a.txt', 'one\n');
    const s1 = await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    write('late.txt', 'written after the snapshot\n');
    const undo = await undoLast(ctx);
    expect(existsSync(join(ctx.worktree, 'late.txt'))).toBe(false);
    const kept = git(ctx.objects, 'rev-parse', undo?.ref ?? '');
    expect(kept).not.toBe(s1?.commit);
    expect(git(ctx.objects, 'show', `${kept}:late.txt`)).toBe('written after the snapshot');
    write('c.txt', 'c\n');
    const s2 = await recordSnapshot(ctx, { n: 2, turn: 'turn-2' });
    expect(s2?.files).toEqual(['c.txt']);
  });

  it('clears old snapshot refs for a new workspace under the same slug', async () => {
    write('a.txt', 'one\n');
    await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    await undoLast(ctx);
    await clearSnapshots(ctx);
    expect(git(ctx.objects, 'for-each-ref', `refs/grove/demo+${ctx.slug.split('~')[1]}/`)).toBe('');
  });

  it('makes no store for a slug that never had one, yet clears what an older Grove kept for it in the primary', async () => {
    await clearSnapshots(ctx);
    expect(existsSync(ctx.objects)).toBe(false);
    // A predecessor's snapshot as an older Grove kept it (in the primary): cleared, not inherited.
    const base = `refs/grove/demo+${ctx.slug.split('~')[1]}`;
    git(repo, 'update-ref', `${base}/turns/1`, git(repo, 'rev-parse', 'main'));
    await clearSnapshots(ctx);
    expect(git(repo, 'for-each-ref', `${base}/`)).toBe('');
    expect(git(ctx.objects, 'for-each-ref', `${base}/`)).toBe('');
    expect(await listSnapshots(ctx)).toEqual([]);
  });
});

describe('reading turns back', () => {
  beforeEach(freshWorktree);
  it('lists the changing turns newest first with status and line counts, and marks the one undo restores', async () => {
    write('a.txt', 'one\ntwo\n');
    await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    write('a.txt', 'one\nTWO\nthree\n');
    write('app.txt', 'v1\nv2\n');
    rmSync(join(ctx.worktree, 'README.md'));
    writeFileSync(join(ctx.worktree, 'bin.dat'), Buffer.from([0, 1, 2, 0]));
    await recordSnapshot(ctx, { n: 3, turn: 'turn-3' });

    const turns = await listTurns(ctx);
    expect(turns.map((t) => [t.n, t.undoNext, t.undone])).toEqual([
      [3, true, false],
      [1, false, false],
    ]);
    const byPath = Object.fromEntries((turns[0]?.files ?? []).map((f) => [f.path, f]));
    expect(byPath).toEqual({
      'a.txt': { path: 'a.txt', status: 'modified', added: 2, removed: 1 },
      'app.txt': { path: 'app.txt', status: 'modified', added: 1, removed: 0 },
      'README.md': { path: 'README.md', status: 'deleted', added: 0, removed: 1 },
      'bin.dat': { path: 'bin.dat', status: 'added', added: null, removed: null },
    });
    expect(turns[1]?.files).toEqual([{ path: 'a.txt', status: 'added', added: 2, removed: 0 }]);
    expect(Number.isNaN(Date.parse(turns[0]?.at ?? ''))).toBe(false);

    // Undone turns stay listed (their diff stays readable); the next one down becomes the one undo restores.
    await undoLast(ctx);
    const after = await listTurns(ctx);
    expect(after.map((t) => [t.n, t.undoNext, t.undone])).toEqual([
      [3, false, true],
      [1, true, false],
    ]);
    expect(after[0]?.files).toHaveLength(4);
    await undoLast(ctx);
    expect((await listTurns(ctx)).every((t) => t.undone && !t.undoNext)).toBe(true);
  });

  it('answers the unified diff of a turn, the snapshot itself even when later changes were kept at undo', async () => {
    write('a.txt', 'one\n');
    await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    write('a.txt', 'one\nadded line\n');
    await recordSnapshot(ctx, { n: 2, turn: 'turn-2' });
    const d = await turnDiff(ctx, 2);
    expect(d).toMatchObject({ n: 2, turn: 'turn-2', truncated: false });
    expect(d.diff).toContain('diff --git a/a.txt b/a.txt');
    expect(d.diff).toContain('\n+added line\n');
    expect(d.diff).not.toContain('+one');

    write('late.txt', 'after the snapshot\n');
    await undoLast(ctx);
    const undone = await turnDiff(ctx, 2);
    expect(undone.diff).toBe(d.diff);
    expect((await listTurns(ctx)).find((t) => t.n === 2)?.files.map((f) => f.path)).toEqual(['a.txt']);

    await expect(turnDiff(ctx, 7)).rejects.toMatchObject({ code: 'not_found', message: expect.stringContaining('turn 7') as string });
  });

  it('cuts a long diff at a line end and says so', async () => {
    write('big.txt', Array.from({ length: 2000 }, (_, i) => `line ${i}`).join('\n'));
    await recordSnapshot(ctx, { n: 1, turn: 'turn-1' });
    const d = await turnDiff(ctx, 1, 1000);
    expect(d.truncated).toBe(true);
    expect(d.limitBytes).toBe(1000);
    expect(Buffer.byteLength(d.diff)).toBeLessThanOrEqual(1000);
    expect(d.diff.endsWith('\n')).toBe(true);
    expect((await turnDiff(ctx, 1)).truncated).toBe(false);
  });

  it('adds the reverted paths of this workspace from the events, also for a turn that kept no change', async () => {
    write('a.txt', 'one\n');
    await recordSnapshot(ctx, { n: 2, turn: 'turn-2' });
    const at = new Date().toISOString();
    const reverts = revertsFromEvents(
      [
        { at, data: { workspaceId: 7, turn: 'turn-2', allowedPaths: ['*.txt'], paths: [{ path: 'x/y.md', action: 'removed' }] } },
        { at, data: { workspaceId: 7, turn: 'turn-4', allowedPaths: ['*.txt'], paths: [{ path: 'README.md', action: 'restored' }, { path: 1, action: 'x' }] } },
        // Another workspace that had the same slug before.
        { at, data: { workspaceId: 6, turn: 'turn-1', allowedPaths: [], paths: [{ path: 'old', action: 'removed' }] } },
      ],
      7,
    );
    const turns = await listTurns(ctx, reverts);
    expect(turns.map((t) => ({ n: t.n, recorded: t.recorded, reverted: t.reverted, files: t.files.length }))).toEqual([
      { n: 4, recorded: false, reverted: [{ path: 'README.md', action: 'restored' }], files: 0 },
      { n: 2, recorded: true, reverted: [{ path: 'x/y.md', action: 'removed' }], files: 1 },
    ]);
    expect(turns[0]?.allowedPaths).toEqual(['*.txt']);
    expect(turns[0]?.undoNext).toBe(false);
    await expect(turnDiff(ctx, 4)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('parses raw and numstat records with odd paths', () => {
    const out = [':100644 100644 a b M', 'tab\there.txt', ':000000 100644 0 c A', 'new line\nname', '1\t2\ttab\there.txt', '-\t-\tnew line\nname', ''].join('\0');
    expect(parseRawNumstat(out)).toEqual([
      { path: 'tab\there.txt', status: 'modified', added: 1, removed: 2 },
      { path: 'new line\nname', status: 'added', added: null, removed: null },
    ]);
  });
});
