import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import { cp, lstat, mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Only root can hand files to the sandbox uid; anyone else (a dev box running as uid 1000) already matches or cannot. */
export function canChown(): boolean {
  return process.getuid?.() === 0;
}

/**
 * chown -R without following symlinks (a worktree may contain links pointing anywhere). GNU chown with -R -h -P
 * walks with fts: every directory is opened relative to its parent's descriptor with O_NOFOLLOW and checked
 * against the device and inode it listed, and every entry is changed with fchownat(AT_SYMLINK_NOFOLLOW)
 * relative to that descriptor, so a directory swapped for a link mid-walk is not followed either (a Node walk of
 * lchown by path would follow a swapped parent). Takes several trees so a fork pays for one process.
 */
export async function chownTree(paths: string | readonly string[], uid: number, gid: number): Promise<void> {
  if (!canChown()) return;
  const list = typeof paths === 'string' ? [paths] : paths;
  if (list.length === 0) return;
  await run('chown', ['-R', '-h', '-P', `${uid}:${gid}`, '--', ...list]);
}

/**
 * chownTree for the trees whose top does not already belong to owner: the dirs Grove keeps for the backend and the
 * host are made by root and only ever written by root, so one lstat tells whether an earlier layout (which handed
 * them to the agent's user) left them to reclaim, and a fork pays for no chown process.
 */
export async function reclaimTrees(paths: readonly string[], owner: { uid: number; gid: number }): Promise<void> {
  const stale: string[] = [];
  for (const p of paths) {
    const st = await lstat(p).catch(() => null);
    if (st && (st.uid !== owner.uid || st.gid !== owner.gid)) stale.push(p);
  }
  await chownTree(stale, owner.uid, owner.gid);
}

/** A regular file's bytes when it is at most maxBytes, opened without following a link or blocking on a FIFO; else null. */
export async function readRegularFile(path: string, maxBytes: number): Promise<Buffer | null> {
  const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (!fh) return null;
  try {
    const st = await fh.stat();
    return st.isFile() && st.size <= maxBytes ? await fh.readFile() : null;
  } finally {
    await fh.close();
  }
}

/** mkdir -p each, then hand them all to `owner` with one chown. */
export async function ensureDirs(paths: readonly string[], owner?: { uid: number; gid: number }): Promise<void> {
  for (const p of paths) await mkdir(p, { recursive: true });
  if (owner) await chownTree(paths, owner.uid, owner.gid);
}

export async function ensureDir(path: string, owner?: { uid: number; gid: number }): Promise<void> {
  await ensureDirs([path], owner);
}

export async function isNonEmptyDir(path: string): Promise<boolean> {
  try {
    return (await readdir(path)).length > 0;
  } catch {
    return false;
  }
}

/** An existing directory with nothing in it (false when absent or not a directory). */
export async function isEmptyDir(path: string): Promise<boolean> {
  try {
    return (await readdir(path)).length === 0;
  } catch {
    return false;
  }
}

/**
 * Move src to dest (creating dest's parent). Falls back to copy + remove across filesystems, and when src is a
 * mount point (a workspace's state dir bound from its disk image: rename answers EBUSY), which is then emptied
 * and stays. The copy takes regular files, directories and links (as links); a FIFO, socket or device the agent
 * left is skipped, never opened. No-op when src is absent.
 */
export async function moveInto(src: string, dest: string): Promise<boolean> {
  if (!existsSync(src)) return false;
  await mkdir(dirname(dest), { recursive: true });
  try {
    await rename(src, dest);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EXDEV' && code !== 'EBUSY') throw e;
    await cp(src, dest, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true, filter: copyable });
    await removeDir(src);
  }
  return true;
}

async function copyable(src: string): Promise<boolean> {
  const s = await lstat(src);
  return s.isFile() || s.isDirectory() || s.isSymbolicLink();
}

/**
 * rm -r. A mount point (a workspace's disk image bound onto its worktree or state path) is emptied and left in
 * place: rmdir of a mount point is EBUSY, and unmounting it is the volume step's job.
 */
export async function removeDir(path: string): Promise<void> {
  try {
    await rm(path, { recursive: true, force: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EBUSY') throw e;
    // rm -r tries rmdir first and stops at EBUSY: empty it entry by entry (rm never follows a link).
    for (const name of await readdir(path)) await rm(join(path, name), { recursive: true, force: true });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Atomically put content at target: a fresh file (O_EXCL|O_NOFOLLOW) in tmpDir, owned through its descriptor,
 * renamed over target. A directory at target is removed first (rm never follows links).
 */
export async function replaceFile(o: { target: string; tmpDir: string; content: Buffer; owner: { uid: number; gid: number } | null }): Promise<void> {
  const tmp = join(o.tmpDir, `.grove-${randomBytes(8).toString('hex')}`);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    await fh.writeFile(o.content);
    if (o.owner) await fh.chown(o.owner.uid, o.owner.gid);
  } finally {
    await fh.close();
  }
  try {
    const st = await lstat(o.target).catch(() => null);
    if (st?.isDirectory()) await rm(o.target, { recursive: true, force: true });
    await rename(tmp, o.target);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}
