// The disk and inode quota attacked from inside real sandboxes (issue 14, point 6: "3.3 GB through four bind mounts
// in 2.5 s, 200k inodes in 8.4 s"): as uid 1000 the agent writes past its byte quota (through /workspace, $HOME/.claude
// and /grove/git, the three dirs it can write; run and thread are the backend's) and past its inode quota, and
// gets ENOSPC; the host's disk holds no more than the quota; another workspace can still write; the card's figure
// and workspace.disk_full say so. Real Docker engine, real loop devices, real git and SQLite. Needs root.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diskLevel } from '@grove/contracts';
import { createDockerDriver, LABELS } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { makeSourceRepo } from './test-support/repo.ts';
import { volumesSupported } from './volume.ts';

/** GROVE_IMAGE: a helper's own build of the image (docker/build-image.sh), else the shared one. */
const IMAGE = process.env.GROVE_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `vol-${randomBytes(4).toString('hex')}`;
const MIB = 1024 * 1024;
const QUOTA = { bytes: 64 * MIB, inodes: 2_000 };

const supported = volumesSupported();
const skip = !supported.ok ? supported.reason : !existsSync('/dev/loop-control') ? 'no /dev/loop-control: the loop driver is not available' : null;
if (skip) console.warn(`volume.docker.test.ts skipped: ${skip}`);

const tmp = mkdtempSync(join(tmpdir(), 'grove-voldk-'));
let grove: Grove | null = null;

function mountsUnder(root: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((p) => p.startsWith(`${root}/`));
}

afterAll(async () => {
  await grove?.close();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).trim();
  if (ids) execFileSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  // A failed test may leave its images mounted: unmount (newest first) before the temp dir goes, so no loop device stays.
  for (const p of mountsUnder(tmp).reverse()) execFileSync('umount', ['--', p]);
  rmSync(tmp, { recursive: true, force: true });
});

/** A shell command in the workspace's container as the sandbox user (uid 1000), the way an agent runs it. */
function agent(slug: string, script: string): { code: number; out: string } {
  const id = execFileSync('docker', ['ps', '-q', '--filter', `label=${LABELS.instance}=${INSTANCE}`, '--filter', `label=${LABELS.slug}=${slug}`], { encoding: 'utf8' }).trim();
  if (!id) throw new Error(`no running container for ${slug}`);
  const r = spawnSync('docker', ['exec', '-u', '1000:1000', '-w', '/workspace', id, 'sh', '-c', script], { encoding: 'utf8', timeout: 120_000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

async function until<T>(fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Bytes the host's filesystem really holds for the home (sparse images count for what is written). */
function hostBytes(home: string): number {
  return Number(execFileSync('du', ['-s', '-x', '--block-size=1', home], { encoding: 'utf8' }).split('\t')[0]);
}

describe.skipIf(skip !== null)('disk and inode quota, attacked from inside real sandboxes as uid 1000', () => {
  it('writes past the byte and the inode quota fail with ENOSPC, the host holds no more than the quota, and another workspace still writes', { timeout: 240_000 }, async () => {
    const home = mkdtempSync(join(tmp, 'home-'));
    const source = makeSourceRepo(join(tmp, 'src'));
    grove = await createTestGrove({ home, driver: createDockerDriver({ instance: INSTANCE }), image: IMAGE, maxRunning: 2, logger: pino({ level: process.env.GROVE_TEST_LOG ?? 'silent' }), healthTimeoutMs: 30_000, diskQuota: QUOTA, diskWatchMs: 60_000 });
    await grove.addProject({ name: 'demo', source, createDefault: false });
    await grove.fork({ project: 'demo', name: 'hog' });
    await grove.fork({ project: 'demo', name: 'other' });
    const before = hostBytes(home);

    // Bytes through the worktree: 256 MiB asked, the quota is 64 MiB.
    const bytes = agent('demo~hog', 'dd if=/dev/zero of=/workspace/fill bs=1M count=256 2>&1; echo "exit=$?"');
    expect(bytes.out).toMatch(/No space left on device/);
    expect(bytes.out).toMatch(/exit=1/);
    expect(agent('demo~hog', 'stat -c %s /workspace/fill').out.trim()).toMatch(/^\d+$/);
    expect(Number(agent('demo~hog', 'stat -c %s /workspace/fill').out.trim())).toBeLessThanOrEqual(QUOTA.bytes);
    // The agent's state dir ($HOME/.claude) is under the same quota: already full.
    const state = agent('demo~hog', 'dd if=/dev/zero of="$HOME/.claude/fill" bs=1M count=16 2>&1; echo "exit=$?"');
    expect(state.out).toMatch(/No space left on device/);
    expect(state.out).toMatch(/exit=1/);
    // And the sandbox's own git dir (/grove/git, the one /workspace/.git names): the same quota.
    const gitDir = agent('demo~hog', 'dd if=/dev/zero of=/grove/git/fill bs=1M count=16 2>&1; echo "exit=$?"');
    expect(gitDir.out).toMatch(/No space left on device/);
    expect(gitDir.out).toMatch(/exit=1/);
    // What the host's disk took for all of it: the quota at most (256 + 16 + 16 MiB were asked).
    expect(hostBytes(home) - before).toBeLessThanOrEqual(QUOTA.bytes);

    // The user's side: the figure on the workspace says full, and workspace.disk_full is recorded.
    const full = await grove.get('demo~hog');
    expect(full.disk && diskLevel(full.disk)).toEqual({ level: 'full', by: 'bytes' });
    const events = await until(async () => {
      const e = await grove?.events({ slug: 'demo~hog', type: 'workspace.disk_full' });
      return e?.length ? e : undefined;
    });
    expect(events).toHaveLength(1);
    expect(events[0]?.data).toMatchObject({ by: 'bytes', totalBytes: full.disk?.totalBytes });

    // Another workspace is untouched by it.
    const other = agent('demo~other', 'dd if=/dev/zero of=/workspace/ok bs=1M count=8 2>&1 && echo written');
    expect(other.out).toMatch(/written/);
    const otherDisk = (await grove.get('demo~other')).disk;
    expect(otherDisk && diskLevel(otherDisk).level).toBe('ok');

    // Inodes: room for bytes again, then 5,000 empty files asked, the quota is 2,000.
    expect(agent('demo~hog', 'rm -f /workspace/fill "$HOME/.claude/fill" /grove/git/fill').code).toBe(0);
    const inodes = agent('demo~hog', 'mkdir -p many && cd many && seq 1 5000 | xargs touch 2>&1 | head -n 1; ls | wc -l');
    expect(inodes.out).toMatch(/No space left on device/);
    const made = Number(inodes.out.trim().split('\n').at(-1));
    expect(made).toBeGreaterThan(QUOTA.inodes / 2);
    expect(made).toBeLessThanOrEqual(QUOTA.inodes);
    expect(agent('demo~hog', 'touch "$HOME/.claude/one-more" 2>&1').out).toMatch(/No space left on device/);
    const byInodes = await grove.get('demo~hog');
    expect(byInodes.disk && diskLevel(byInodes.disk)).toEqual({ level: 'full', by: 'inodes' });
    expect(agent('demo~other', 'mkdir -p few && cd few && seq 1 200 | xargs touch && ls | wc -l').out.trim()).toBe('200');

    await grove.teardown('demo~hog');
    await grove.teardown('demo~other');
    expect(mountsUnder(home)).toEqual([]);
    expect(existsSync(join(home, 'volumes', 'demo~hog'))).toBe(false);
  });
});
