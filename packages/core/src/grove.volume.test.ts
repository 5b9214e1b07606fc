// The disk quota in the lifecycle: real loop-mounted images, real git and SQLite, the in-memory sandbox driver
// (the attack from inside a real container is in volume.docker.test.ts). Needs root and the loop driver.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { diskLevel, recoveryRefPrefix, workspaceSchema } from '@grove/contracts';
import { openSqlite, workspaces } from '@grove/db';
import { eq } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { useGroveFixture } from './test-support/grove-fixture.ts';
import { mountsUnder, unmountAll } from './test-support/mounts.ts';
import { git, gitInWorktree } from './test-support/repo.ts';
import { volumesSupported } from './volume.ts';

const supported = volumesSupported();
const skip = !supported.ok ? supported.reason : !existsSync('/dev/loop-control') ? 'no /dev/loop-control: the loop driver is not available' : null;
if (skip) console.warn(`grove.volume.test.ts skipped: ${skip}`);

const QUOTA = { bytes: 32 * 1024 * 1024, inodes: 512 };

const fx = useGroveFixture({
  tmpPrefix: 'grove-corevol-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 3, gitLockTimeoutMs: 5_000, diskQuota: QUOTA, diskWatchMs: 60_000 },
});
const { withProject, open, until } = fx;

// Registered after the fixture's hooks, so it runs first: nothing stays mounted when the fixture removes the temp dir.
afterEach(() => {
  if (fx.tmp) unmountAll(fx.tmp);
});

describe.skipIf(skip !== null)('disk quota in the lifecycle (real loop devices)', () => {
  it('a fork lives in its own image: worktree and state are mounts of it, the figure is on the workspace, teardown removes it all', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'q' }, { wait: true });
    const wt = join(fx.home, 'worktrees', 'demo', 'q');
    const state = join(fx.home, 'state', 'demo~q');
    const root = join(fx.home, 'volumes', 'demo~q', 'fs');
    const sandboxGit = join(fx.home, 'sandbox-git', 'demo~q');
    expect(mountsUnder(fx.home).sort()).toEqual([root, sandboxGit, state, wt].sort());
    expect(readFileSync(join(sandboxGit, 'HEAD'), 'utf8')).toBe('ref: refs/heads/grove/q\n');
    expect(readFileSync(join(wt, 'README.md'), 'utf8')).toContain('demo');
    expect(gitInWorktree(wt, 'status', '--porcelain')).toBe('');

    const ws = await g.get('demo~q');
    expect(workspaceSchema.parse(ws).disk).toMatchObject({ totalBytes: expect.any(Number) as number, totalInodes: expect.any(Number) as number });
    expect(ws.disk?.totalBytes).toBeLessThanOrEqual(QUOTA.bytes);
    expect(ws.disk?.totalInodes).toBeGreaterThanOrEqual(QUOTA.inodes);
    const listed = (await g.list()).workspaces.find((w) => w.slug === 'demo~q');
    expect(listed?.disk?.totalBytes).toBe(ws.disk?.totalBytes);

    writeFileSync(join(state, 'session'), 'agent state');
    // A FIFO the agent left in its state dir: the archive copy (out of the image) skips it, never opens it.
    execFileSync('mkfifo', [join(state, 'pipe')]);
    await g.teardown('demo~q');
    expect(mountsUnder(fx.home)).toEqual([]);
    expect(existsSync(join(fx.home, 'volumes', 'demo~q'))).toBe(false);
    expect(existsSync(wt)).toBe(false);
    expect(existsSync(state)).toBe(false);
    expect(existsSync(sandboxGit)).toBe(false);
    const archives = readdirSync(join(fx.home, 'archive'));
    expect(archives).toHaveLength(1);
    expect(readdirSync(join(fx.home, 'archive', archives[0] ?? '', 'state'))).toEqual(['session']);
    expect(readFileSync(join(fx.home, 'archive', archives[0] ?? '', 'state', 'session'), 'utf8')).toBe('agent state');
    const admin = join(fx.home, 'repos', 'demo', 'worktrees');
    expect(existsSync(admin) ? readdirSync(admin) : []).toEqual([]); // git's admin entry went with the worktree
    expect((await g.get('demo~q')).disk).toBeNull();
  });

  it('a failed fork takes its image with it', async () => {
    const g = await withProject();
    fx.driver.behave.listen = false; // health never answers: the fork fails and rolls back
    await expect(g.fork({ project: 'demo', name: 'nope' }, { wait: true })).rejects.toThrow(/health/);
    expect(mountsUnder(fx.home)).toEqual([]);
    expect(existsSync(join(fx.home, 'volumes', 'demo~nope'))).toBe(false);
    expect(existsSync(join(fx.home, 'worktrees', 'demo', 'nope'))).toBe(false);
  });

  it('survives a restart (already mounted: untouched) and a reboot (mounted again by reconcile, the work intact)', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'r' }, { wait: true });
    const wt = join(fx.home, 'worktrees', 'demo', 'r');
    writeFileSync(join(wt, 'work.txt'), 'unsaved work\n');
    await g.stop('demo~r');
    await g.close();
    fx.groves.splice(0);

    const before = mountsUnder(fx.home);
    const g2 = await open();
    await g2.reconcile();
    expect(mountsUnder(fx.home)).toEqual(before);
    await g2.close();
    fx.groves.splice(0);

    unmountAll(fx.home); // the reboot
    expect(existsSync(join(wt, 'work.txt'))).toBe(false);
    const g3 = await open();
    await g3.reconcile();
    expect(mountsUnder(fx.home).sort()).toEqual(before.sort());
    expect(readFileSync(join(wt, 'work.txt'), 'utf8')).toBe('unsaved work\n');
    // git still knows the worktree: reconcile mounted it before it pruned.
    expect(gitInWorktree(wt, 'status', '--porcelain')).toBe('?? work.txt');
    const started = await g3.start('demo~r');
    expect(started.state).toBe('running');
    expect(readFileSync(join(wt, 'work.txt'), 'utf8')).toBe('unsaved work\n');
  });

  it('a full disk is on the workspace and recorded once as workspace.disk_full; room again, and the next crossing is recorded', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'full' }, { wait: true });
    const wt = join(fx.home, 'worktrees', 'demo', 'full');
    expect(() => writeFileSync(join(wt, 'fill'), Buffer.alloc(QUOTA.bytes, 1))).toThrow(/ENOSPC/);
    const ws = await g.get('demo~full');
    expect(ws.disk && diskLevel(ws.disk)).toEqual({ level: 'full', by: 'bytes' });
    const full = await until(async () => {
      const e = await g.events({ slug: 'demo~full', type: 'workspace.disk_full' });
      return e.length > 0 && e;
    });
    expect(full[0]?.data).toMatchObject({ by: 'bytes', totalBytes: ws.disk?.totalBytes });
    await g.list();
    await g.get('demo~full');
    expect(await g.events({ slug: 'demo~full', type: 'workspace.disk_full' })).toHaveLength(1);

    execFileSync('rm', ['-f', join(wt, 'fill')]);
    const room = (await g.get('demo~full')).disk;
    expect(room && diskLevel(room).level).toBe('ok');
    for (let i = 0; ; i++) {
      try {
        writeFileSync(join(wt, `n${i}`), '');
      } catch (e) {
        expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC');
        break;
      }
    }
    const again = await g.get('demo~full');
    expect(again.disk && diskLevel(again.disk)).toEqual({ level: 'full', by: 'inodes' });
    await until(async () => (await g.events({ slug: 'demo~full', type: 'workspace.disk_full' })).length === 2);
    expect((await g.events({ slug: 'demo~full', type: 'workspace.disk_full' })).map((e) => e.data.by).sort()).toEqual(['bytes', 'inodes']);
  });

  it('after a crash and a reboot, an orphan image is mounted again, its worktree saved to a recovery ref, then deleted', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'orph' }, { wait: true });
    const wt = join(fx.home, 'worktrees', 'demo', 'orph');
    writeFileSync(join(wt, 'precious.txt'), 'not committed\n');
    await g.stop('demo~orph');
    await g.close();
    fx.groves.splice(0);
    // What a crash in the middle of a teardown can leave: the row gone, its image and worktree still there.
    const { db, close } = openSqlite({ file: join(fx.home, 'grove.db') });
    try {
      db.update(workspaces).set({ state: 'gone' }).where(eq(workspaces.slug, 'demo~orph')).run();
    } finally {
      await close();
    }
    unmountAll(fx.home); // and the reboot

    const g2 = await open();
    await g2.reconcile();
    expect(mountsUnder(fx.home)).toEqual([]);
    expect(existsSync(join(fx.home, 'volumes', 'demo~orph'))).toBe(false);
    expect(existsSync(wt)).toBe(false);
    // Saved work lives in the workspace's own object store (host-only), not in the primary.
    const repo = join(fx.home, 'objects', 'demo~orph.git');
    const ref = git(repo, 'for-each-ref', '--format=%(refname)', recoveryRefPrefix('demo~orph'));
    expect(ref).not.toBe('');
    expect(git(repo, 'show', `${ref}:precious.txt`)).toBe('not committed');
    expect((await g2.events({ slug: 'demo~orph', type: 'workspace.reconciled' })).map((e) => e.data.action)).toContain('removed-orphan-volume');
  });
});
