import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mountsUnder, unmountAll } from './test-support/mounts.ts';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPaths } from './paths.ts';
import type { GrovePaths } from './paths.ts';
import { moveInto, removeDir } from './fsutil.ts';
import { Volumes, volumesSupported } from './volume.ts';
import type { VolumeTargets } from './volume.ts';

const supported = volumesSupported();
const loop = existsSync('/dev/loop-control');
const skip = !supported.ok ? supported.reason : !loop ? 'no /dev/loop-control: the loop driver is not available' : null;
if (skip) console.warn(`volume.test.ts skipped: ${skip}`);

const QUOTA = { bytes: 32 * 1024 * 1024, inodes: 256 };
const SLUG = 'demo~quota';

describe.skipIf(skip !== null)('volume (real loop devices)', () => {
  let home: string;
  let paths: GrovePaths;
  let vols: Volumes;
  let targets: VolumeTargets;
  const homes: string[] = [];

  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'grove-volume-'));
    homes.push(home);
    paths = createPaths(home);
    vols = new Volumes({ paths, quota: QUOTA, owner: { uid: 1000, gid: 1000 } });
    targets = { worktree: paths.worktree('demo', 'quota'), state: paths.state(SLUG), git: paths.sandboxGit(SLUG) };
  });
  afterEach(() => {
    unmountAll(home, { lazy: true });
    rmSync(home, { recursive: true, force: true });
  });
  afterAll(() => {
    for (const h of homes) if (existsSync(h)) unmountAll(h, { lazy: true });
  });

  it('creates a sparse image, mounts it nosuid,nodev and binds its dirs onto the targets, owned by the sandbox user', async () => {
    expect(await vols.ensure(SLUG, targets, { create: true })).toBe(true);
    const image = vols.image(SLUG);
    const st = statSync(image);
    expect(st.size).toBe(QUOTA.bytes);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.blocks * 512).toBeLessThan(QUOTA.bytes / 2); // sparse: the host pays for what is written
    expect(statSync(paths.volume(SLUG)).mode & 0o777).toBe(0o700);
    const lines = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
    for (const t of [vols.mountRoot(SLUG), targets.worktree, targets.state, targets.git]) {
      const line = lines.find((l) => l.split(' ')[4] === t);
      expect(line, t).toBeDefined();
      expect(line?.split(' ')[5]).toMatch(/(^|,)nosuid(,|$)/);
      expect(line?.split(' ')[5]).toMatch(/(^|,)nodev(,|$)/);
    }
    // git worktree add needs an empty directory; the agent owns what it may write, not the fs root.
    expect(readdirSync(targets.worktree)).toEqual([]);
    expect(statSync(targets.worktree).uid).toBe(1000);
    expect(statSync(targets.state).uid).toBe(1000);
    expect(statSync(targets.git).uid).toBe(1000);
    expect(statSync(vols.mountRoot(SLUG)).uid).toBe(0);
    expect(await vols.mounted(SLUG)).toBe(true);
    const u = await vols.usage(SLUG);
    expect(u?.totalBytes).toBeGreaterThan(QUOTA.bytes * 0.8);
    expect(u?.totalBytes).toBeLessThanOrEqual(QUOTA.bytes);
    expect(u?.totalInodes).toBeGreaterThanOrEqual(QUOTA.inodes);
    expect(u?.totalInodes).toBeLessThan(QUOTA.inodes * 2);
  });

  it('ensure is idempotent: a second call mounts nothing more', async () => {
    await vols.ensure(SLUG, targets, { create: true });
    const before = mountsUnder(home);
    expect(before).toHaveLength(4);
    expect(await vols.ensure(SLUG, targets, { create: true })).toBe(true);
    expect(mountsUnder(home)).toEqual(before);
  });

  it('usage moves after writing bytes and files, and writing past the quota is ENOSPC', async () => {
    await vols.ensure(SLUG, targets, { create: true });
    const u0 = await vols.usage(SLUG);
    writeFileSync(join(targets.worktree, 'big'), Buffer.alloc(8 * 1024 * 1024, 1));
    for (let i = 0; i < 20; i++) writeFileSync(join(targets.state, `f${i}`), 'x');
    const u1 = await vols.usage(SLUG);
    expect((u1?.usedBytes ?? 0) - (u0?.usedBytes ?? 0)).toBeGreaterThanOrEqual(8 * 1024 * 1024);
    expect((u1?.usedInodes ?? 0) - (u0?.usedInodes ?? 0)).toBe(21);
    expect(() => writeFileSync(join(targets.worktree, 'huge'), Buffer.alloc(QUOTA.bytes, 1))).toThrow(/ENOSPC/);
    // Deleting gives the host its disk back (mounted with discard: the sparse image's blocks are punched out).
    // sync first: until the loop device's page cache is written back, the image has not grown yet.
    execFileSync('sync');
    const full = statSync(vols.image(SLUG)).blocks * 512;
    expect(full).toBeGreaterThan(QUOTA.bytes * 0.8);
    rmSync(join(targets.worktree, 'huge'));
    rmSync(join(targets.worktree, 'big'));
    execFileSync('sync');
    expect(statSync(vols.image(SLUG)).blocks * 512).toBeLessThan(full / 2);
  });

  it('release unmounts everything (the loop device goes too); ensure after it keeps the data; destroy deletes the image', async () => {
    await vols.ensure(SLUG, targets, { create: true });
    await writeFile(join(targets.worktree, 'kept'), 'work');
    const image = vols.image(SLUG);
    await vols.release(SLUG);
    expect(mountsUnder(home)).toEqual([]);
    expect(execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).trim()).toBe('');
    expect(existsSync(join(targets.worktree, 'kept'))).toBe(false); // only the empty mount point is left
    expect(await vols.usage(SLUG)).toBeNull();
    await vols.release(SLUG); // no-op
    // A restart or a reboot: not created again, mounted again, data intact.
    expect(await vols.ensure(SLUG, targets, { create: false })).toBe(true);
    expect(readFileSync(join(targets.worktree, 'kept'), 'utf8')).toBe('work');
    await vols.destroy(SLUG);
    expect(mountsUnder(home)).toEqual([]);
    expect(existsSync(image)).toBe(false);
    expect(existsSync(paths.volume(SLUG))).toBe(false);
    expect(existsSync(targets.worktree)).toBe(false); // the empty mount points go with it
    expect(existsSync(targets.state)).toBe(false);
    expect(existsSync(targets.git)).toBe(false);
    await vols.destroy(SLUG); // no-op
  });

  it('a crash while the image was being made leaves nothing that blocks the next ensure', async () => {
    await mkdir(paths.volume(SLUG), { recursive: true, mode: 0o700 });
    writeFileSync(`${vols.image(SLUG)}.partial`, 'half an image');
    expect(await vols.exists(SLUG)).toBe(false);
    expect(await vols.ensure(SLUG, targets, { create: true })).toBe(true);
    expect(existsSync(`${vols.image(SLUG)}.partial`)).toBe(false);
    expect((await vols.usage(SLUG))?.totalInodes).toBeGreaterThanOrEqual(QUOTA.inodes);
  });

  it('removeDir and moveInto on a bound dir: emptied and left mounted (rmdir and rename of a mount point are EBUSY), FIFOs skipped', async () => {
    await vols.ensure(SLUG, targets, { create: true });
    await mkdir(join(targets.worktree, 'src', 'deep'), { recursive: true });
    await writeFile(join(targets.worktree, 'src', 'deep', 'f'), 'x');
    await removeDir(targets.worktree);
    expect(readdirSync(targets.worktree)).toEqual([]);
    expect(mountsUnder(home)).toContain(targets.worktree);

    await writeFile(join(targets.state, 'session'), 'agent state');
    await symlink('/etc/shadow', join(targets.state, 'link'));
    execFileSync('mkfifo', [join(targets.state, 'pipe')]);
    const dest = join(home, 'archive', 'state');
    expect(await moveInto(targets.state, dest)).toBe(true);
    expect(readdirSync(dest).sort()).toEqual(['link', 'session']);
    expect(readFileSync(join(dest, 'session'), 'utf8')).toBe('agent state');
    expect(lstatSync(join(dest, 'link')).isSymbolicLink()).toBe(true); // copied as a link, never followed
    expect(readdirSync(targets.state)).toEqual([]);
    expect(mountsUnder(home)).toContain(targets.state);
  });

  it('ensure without create does nothing when there is no image (a workspace from before quotas)', async () => {
    expect(await vols.ensure(SLUG, targets, { create: false })).toBe(false);
    expect(existsSync(paths.volume(SLUG))).toBe(false);
    expect(mountsUnder(home)).toEqual([]);
  });

  it('refuses to hide files under the image, and to mount over a symlink', async () => {
    await mkdir(targets.worktree, { recursive: true });
    await writeFile(join(targets.worktree, 'old'), 'x');
    await expect(vols.ensure(SLUG, targets, { create: true })).rejects.toThrow(/not empty/);
    expect(mountsUnder(home).some((p) => p === targets.worktree)).toBe(false);
    await vols.release(SLUG);

    const other = mkdtempSync(join(tmpdir(), 'grove-volume-elsewhere-'));
    try {
      rmSync(targets.worktree, { recursive: true });
      await symlink(other, targets.worktree);
      await expect(vols.ensure(SLUG, targets, { create: true })).rejects.toThrow(/not a directory/);
      expect(mountsUnder(other)).toEqual([]);
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(` ${other} `);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
