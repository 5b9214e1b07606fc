import { execFile } from 'node:child_process';
import { constants, existsSync } from 'node:fs';
import { chown, lstat, mkdir, open, readFile, readdir, realpath, rename, rm, rmdir, statfs } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { GroveError } from '@grove/contracts';
import type { DiskUsage } from '@grove/contracts';
import type { GrovePaths } from './paths.ts';

const run = promisify(execFile);

/**
 * Per-workspace disk and inode quota: one sparse ext4 image per workspace, loop-mounted on the host, that
 * holds everything the agent can write (its worktree and its agent state dir). The agent's files live inside
 * the mounted filesystem; the image, the mount root and every mount point's parent are host-built from
 * validated names and never mounted into a sandbox. A full filesystem answers the agent ENOSPC ("No space
 * left on device") and leaves the host's disk and every other workspace alone.
 *
 * One image holding both dirs (bind-mounted onto their usual host paths) rather than one image per dir:
 * one loop device per workspace (a bounded kernel resource: this machine has 8), one figure on the card, and
 * the agent's whole footprint under one limit; another agent-writable dir is one more subdirectory.
 */
export interface VolumeQuota {
  /** Size of the filesystem in bytes (the image is sparse: this much at most is ever used on the host). */
  bytes: number;
  /** Inodes of the filesystem (mkfs.ext4 -N; rounded up by mkfs to fill its block groups). */
  inodes: number;
}

export const DEFAULT_VOLUME_QUOTA: VolumeQuota = { bytes: 4 * 1024 ** 3, inodes: 200_000 };
/** Below this the filesystem is too small to hold a journal-less ext4 with room for files. */
export const MIN_VOLUME_BYTES = 16 * 1024 ** 2;
export const MIN_VOLUME_INODES = 64;

/**
 * The subdirectories of the filesystem, each bind-mounted onto the host path the rest of Grove uses for it: the
 * worktree (/workspace), the agent's state dir ($HOME/.claude) and the sandbox's own git dir (/grove/git).
 */
export const VOLUME_DIRS = ['worktree', 'state', 'git'] as const;
export type VolumeDir = (typeof VOLUME_DIRS)[number];
export type VolumeTargets = Record<VolumeDir, string>;

const IMAGE = 'disk.img';
const MOUNT = 'fs';
/**
 * nosuid, nodev: nothing the agent writes is a setuid binary or a device on the host. Not noexec: agents run code
 * there. discard: a deleted file punches its blocks out of the sparse image, so the host gets its space back.
 */
const MOUNT_OPTIONS = 'loop,nosuid,nodev,noatime,discard';

interface MountEntry {
  /** major:minor of the mounted filesystem. */
  dev: string;
  /** The directory of the filesystem this mount shows ("/" for the filesystem itself, "/worktree" for a bind). */
  root: string;
  mountPoint: string;
}

/** \040 and friends: mountinfo escapes space, tab, newline and backslash in octal. */
function unescapeMountinfo(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

async function mountTable(): Promise<MountEntry[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    if (f.length < 5 || f[2] === undefined || f[3] === undefined || f[4] === undefined) continue;
    out.push({ dev: f[2], root: unescapeMountinfo(f[3]), mountPoint: unescapeMountinfo(f[4]) });
  }
  return out;
}

/**
 * The path as mountinfo spells it: the home may sit under a symlink (a host-configured one; the parts below it are
 * host-built), and mountinfo names the real path. Only the parent is resolved: the leaf itself is lstat-checked
 * by the callers, so a link there is refused, never followed.
 */
async function canonical(path: string): Promise<string> {
  const parent = dirname(path);
  return join(await realpath(parent).catch(() => parent), basename(path));
}

/** The topmost mount at path (a later line stacks over an earlier one at the same point). */
function mountAt(table: readonly MountEntry[], path: string): MountEntry | undefined {
  let found: MountEntry | undefined;
  for (const m of table) if (m.mountPoint === path) found = m;
  return found;
}

/** Loop mounts need root (CAP_SYS_ADMIN) and the loop driver; without them there is no quota to enforce. */
export function volumesSupported(): { ok: true } | { ok: false; reason: string } {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'not running as root: loop-mounted disk images need root' };
  return { ok: true };
}

/** A real directory, not a link (the path was host-built, but a link here must never be mounted over). */
async function isRealDir(path: string): Promise<boolean> {
  try {
    const s = await lstat(path);
    return s.isDirectory() && !s.isSymbolicLink();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

async function mkdirReal(path: string, mode: number): Promise<void> {
  await mkdir(path, { recursive: true, mode });
  if (!(await isRealDir(path))) throw new GroveError('spawn_failed', `${path} is not a directory; refusing to mount over it`);
}

function failed(what: string, e: unknown): GroveError {
  const err = e as { stderr?: string; message?: string };
  const detail = (err.stderr ?? '').trim() || err.message || String(e);
  return new GroveError('spawn_failed', `${what}: ${detail}`, { cause: e });
}

async function rmdirIfEmpty(path: string): Promise<void> {
  try {
    await rmdir(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e;
  }
}

export interface VolumesOptions {
  paths: GrovePaths;
  quota: VolumeQuota;
  /** Owner of the worktree and state dirs inside the filesystem (the sandbox user); null: leave them root's. */
  owner: { uid: number; gid: number } | null;
}

export class Volumes {
  constructor(private readonly o: VolumesOptions) {
    if (!Number.isSafeInteger(o.quota.bytes) || o.quota.bytes < MIN_VOLUME_BYTES) {
      throw new GroveError('invalid_input', `disk quota must be at least ${MIN_VOLUME_BYTES} bytes, got ${o.quota.bytes}`);
    }
    if (!Number.isSafeInteger(o.quota.inodes) || o.quota.inodes < MIN_VOLUME_INODES) {
      throw new GroveError('invalid_input', `inode quota must be at least ${MIN_VOLUME_INODES}, got ${o.quota.inodes}`);
    }
  }

  image(slug: string): string {
    return join(this.o.paths.volume(slug), IMAGE);
  }

  /** Where the filesystem itself is mounted: host-only (<home>/volumes/<slug> is root's, 0700). */
  mountRoot(slug: string): string {
    return join(this.o.paths.volume(slug), MOUNT);
  }

  /** The dir inside the mounted filesystem that is bind-mounted onto its target. */
  dirIn(slug: string, dir: VolumeDir): string {
    return join(this.mountRoot(slug), dir);
  }

  /** Whether the workspace's filesystem is mounted now (it then holds its worktree, state and git dir). */
  async mounted(slug: string): Promise<boolean> {
    return mountAt(await mountTable(), await canonical(this.mountRoot(slug)))?.root === '/';
  }

  async exists(slug: string): Promise<boolean> {
    try {
      return (await lstat(this.image(slug))).isFile();
    } catch {
      return false;
    }
  }

  /**
   * Make the workspace's filesystem available at its targets: create the image when absent and `create` is set,
   * mount it, bind each dir onto its target. Idempotent (what is mounted stays), and what re-mounts after a
   * reboot. Returns false, touching nothing, when there is no image and `create` is false (a workspace from before
   * quotas). Refuses to bind over a target that holds files: that would hide them.
   */
  async ensure(slug: string, targets: VolumeTargets, o: { create: boolean }): Promise<boolean> {
    const root = await canonical(this.mountRoot(slug));
    let table = await mountTable();
    if (!mountAt(table, root)) {
      if (!(await this.exists(slug))) {
        if (!o.create) return false;
        await this.createImage(slug);
      } else {
        await this.check(slug);
      }
      await mkdirReal(root, 0o755);
      try {
        await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, '--', this.image(slug), root]);
      } catch (e) {
        throw failed(`could not mount the disk image of ${slug}`, e);
      }
      table = await mountTable();
    }
    const fs = mountAt(table, root);
    if (fs?.root !== '/') throw new GroveError('spawn_failed', `${root} is not the root of ${slug}'s disk image`);
    // The dirs inside: created once, owned by the sandbox user. The fs root stays root's and is never mounted.
    for (const d of VOLUME_DIRS) {
      const inside = this.dirIn(slug, d);
      if (await isRealDir(inside)) continue;
      await mkdir(inside, { mode: 0o755 });
      if (this.o.owner) await chown(inside, this.o.owner.uid, this.o.owner.gid);
    }
    // The three targets are apart from each other (none inside another): bound side by side, one mount(8) each.
    const binds = await Promise.allSettled(
      VOLUME_DIRS.map(async (d) => {
        const target = await canonical(targets[d]);
        const at = mountAt(table, target);
        if (at) {
          if (at.dev === fs.dev && at.root === `/${d}`) return;
          throw new GroveError('spawn_failed', `${target} already has another filesystem mounted on it; refusing to mount ${slug}'s ${d} there`);
        }
        await mkdirReal(target, 0o755);
        if ((await readdir(target)).length > 0) {
          throw new GroveError('spawn_failed', `${target} is not empty; refusing to hide it under ${slug}'s disk image (move it away or tear the workspace down)`);
        }
        try {
          await run('mount', ['--bind', '--', this.dirIn(slug, d), target]);
        } catch (e) {
          throw failed(`could not mount ${slug}'s ${d} at ${target}`, e);
        }
      }),
    );
    const failure = binds.find((b): b is PromiseRejectedResult => b.status === 'rejected');
    if (failure) throw failure.reason;
    return true;
  }

  /**
   * A warm sandbox's filesystem (pool.ts), made and mounted at <dir>/fs before any workspace owns it: the same image,
   * quota and mount options as a workspace's. Returns its dirs, which the warm sandbox mounts directly (no binds yet).
   */
  async makeWarm(dir: string): Promise<VolumeTargets> {
    await this.createImageAt(dir, 'a warm sandbox');
    const root = join(dir, MOUNT);
    await mkdirReal(root, 0o755);
    try {
      await run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, '--', join(dir, IMAGE), root]);
    } catch (e) {
      throw failed('could not mount the disk image of a warm sandbox', e);
    }
    const out = { worktree: join(root, 'worktree'), state: join(root, 'state'), git: join(root, 'git') };
    for (const d of VOLUME_DIRS) {
      await mkdir(out[d], { mode: 0o755 });
      if (this.o.owner) await chown(out[d], this.o.owner.uid, this.o.owner.gid);
    }
    return out;
  }

  /**
   * A warm sandbox's filesystem becomes the workspace's: its dir is renamed to volumes/<slug> (the mount goes with
   * it, and the running sandbox keeps its own mounts of the dirs inside); ensure(slug, …) then binds it onto the
   * workspace's paths as for any workspace.
   */
  async adoptWarm(dir: string, slug: string): Promise<void> {
    const to = this.o.paths.volume(slug);
    if (existsSync(to)) throw new GroveError('spawn_failed', `${to} exists; the warm sandbox's disk image cannot take its place`);
    await mkdir(this.o.paths.volumesRoot, { recursive: true, mode: 0o700 });
    await rename(dir, to);
  }

  /** Unmount and delete a warm sandbox's filesystem that no workspace took (its sandbox is removed first). No error when absent. */
  async destroyWarm(dir: string): Promise<void> {
    const root = await canonical(join(dir, MOUNT));
    const table = await mountTable();
    const fs = mountAt(table, root);
    if (fs) {
      const binds = table.filter((m) => m.dev === fs.dev && m.mountPoint !== root).map((m) => m.mountPoint).reverse();
      await this.umount([...binds, root]);
    }
    await rm(join(dir, IMAGE), { force: true });
    await rm(join(dir, `${IMAGE}.partial`), { force: true });
  }

  /** The sparse image, its filesystem made with the quota's inode count; the image file is root's, 0600. */
  private async createImage(slug: string): Promise<void> {
    await this.createImageAt(this.o.paths.volume(slug), slug);
  }

  private async createImageAt(dir: string, what: string): Promise<void> {
    await mkdir(dirname(dir), { recursive: true, mode: 0o700 });
    await mkdirReal(dir, 0o700);
    const image = join(dir, IMAGE);
    // Made under a temporary name and renamed once its filesystem exists: a crash part way leaves no image that
    // looks real (an old temporary one is removed; the dir is host-only, so it is ours).
    const partial = `${image}.partial`;
    await rm(partial, { force: true });
    // O_EXCL | O_NOFOLLOW: a new file or nothing, never something already there.
    const fh = await open(partial, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await fh.truncate(this.o.quota.bytes);
    } finally {
      await fh.close();
    }
    try {
      // -m 0: no blocks reserved for root (the quota is the agent's); no journal: it would take host disk up front,
      // and the work that matters is saved to git by the host; lazy_itable_init: a sparse file reads as zeros.
      await run('mkfs.ext4', ['-q', '-F', '-b', '4096', '-N', String(this.o.quota.inodes), '-m', '0', '-O', '^has_journal', '-E', 'lazy_itable_init=1,root_owner=0:0', '-L', 'grove', '--', partial]);
    } catch (e) {
      await rm(partial, { force: true });
      throw failed(`could not make the filesystem of ${what}'s disk image`, e);
    }
    await rename(partial, image);
  }

  /**
   * e2fsck -p before an existing image is mounted again: without a journal, a crash or reboot can leave it
   * inconsistent. The image is written only by the kernel's ext4 (the agent never sees the file), and e2fsck reads
   * no configuration from it. Exit 1 is "fixed"; 4 and above: not fixable unattended, so it is not mounted.
   */
  private async check(slug: string): Promise<void> {
    try {
      await run('e2fsck', ['-p', '--', this.image(slug)]);
    } catch (e) {
      if ((e as { code?: unknown }).code === 1) return;
      throw failed(`the disk image of ${slug} needs repair (e2fsck -f ${this.image(slug)})`, e);
    }
  }

  /** Bytes and inodes used and available, from statfs of the mounted filesystem; null when it is not mounted. */
  async usage(slug: string, table?: readonly MountEntry[]): Promise<DiskUsage | null> {
    const root = await canonical(this.mountRoot(slug));
    if (mountAt(table ?? (await mountTable()), root)?.root !== '/') return null;
    const s = await statfs(root);
    return {
      // bavail, not bfree: ext4 keeps a pool (2% up to 16 MiB) no unprivileged write gets; "used" is what the agent cannot have.
      usedBytes: (s.blocks - s.bavail) * s.bsize,
      totalBytes: s.blocks * s.bsize,
      usedInodes: s.files - s.ffree,
      totalInodes: s.files,
    };
  }

  /** Usage of several workspaces with one read of the mount table. */
  async usageOf(slugs: readonly string[]): Promise<Map<string, DiskUsage>> {
    const table = await mountTable();
    const out = new Map<string, DiskUsage>();
    for (const slug of slugs) {
      const u = await this.usage(slug, table).catch(() => null);
      if (u) out.set(slug, u);
    }
    return out;
  }

  /**
   * Unmount the binds of the filesystem and the filesystem itself; the loop device goes with the last unmount
   * (mount -o loop sets autoclear). The image and its data stay. No error when nothing is mounted.
   */
  async release(slug: string): Promise<string[]> {
    const root = await canonical(this.mountRoot(slug));
    const table = await mountTable();
    const fs = mountAt(table, root);
    if (!fs) return [];
    // Every other mount of this filesystem in our namespace is one of its binds; newest first.
    const binds = table.filter((m) => m.dev === fs.dev && m.mountPoint !== root).map((m) => m.mountPoint).reverse();
    // One umount for all of them (it takes them in order: the binds, then the filesystem): a process per mount
    // point was a tenth of a teardown.
    await this.umount([...binds, root]);
    return binds;
  }

  /**
   * Release, then delete the image: only at teardown, after the work was saved and the state archived. The
   * mount points go too when empty (rmdir, never rm -r: a directory that still holds files is not ours to empty).
   */
  async destroy(slug: string): Promise<void> {
    const binds = await this.release(slug);
    await rm(this.image(slug), { force: true });
    await rm(`${this.image(slug)}.partial`, { force: true });
    for (const p of [...binds, this.mountRoot(slug), this.o.paths.volume(slug)]) await rmdirIfEmpty(p);
  }

  private async umount(paths: string[]): Promise<void> {
    try {
      await run('umount', ['--', ...paths]);
    } catch (e) {
      throw failed(`could not unmount ${paths.join(', ')}`, e);
    }
  }
}
