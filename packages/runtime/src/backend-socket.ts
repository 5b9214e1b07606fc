import { lstatSync, type BigIntStats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { GroveError } from '@grove/contracts';
import { BACKEND_UID } from '@grove/sandbox';

/** Who may own a backend socket: the backend's user (root in the sandbox), or this process (a backend run beside it). */
const TRUSTED_OWNERS = new Set([BACKEND_UID, process.getuid?.() ?? BACKEND_UID]);

/** What a backend socket was when it was checked: a new identity means it was replaced since. */
export interface SocketIdentity {
  key: string;
}

/**
 * Check what the host is about to connect to: a Unix socket (never a symlink, which could lead to the Docker
 * engine's socket, and never a regular file or FIFO) owned by the backend's user. The run dir it lives in is
 * root's and 0700, so the agent cannot replace it; this is the second line, and its identity (device, inode, ctime)
 * lets a caller drop pooled connections to an earlier socket at that path.
 */
export async function verifyBackendSocket(socketPath: string, slug: string): Promise<SocketIdentity>;
/** With `absent: 'ok'`, no socket yet is null instead of an error (the caller's connect then fails as it would). */
export async function verifyBackendSocket(socketPath: string, slug: string, o: { absent: 'ok' }): Promise<SocketIdentity | null>;
export async function verifyBackendSocket(socketPath: string, slug: string, o?: { absent: 'ok' }): Promise<SocketIdentity | null> {
  const st = await lstat(socketPath, { bigint: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
    if (o?.absent === 'ok') return null;
    throw noSocket(slug, err);
  });
  return st ? identify(st, slug) : null;
}

/**
 * The same check, synchronous: for the proxy, which checks on every request; an lstat of a local file takes a few
 * microseconds, the promise version's trip through the thread pool about ten times that.
 */
export function verifyBackendSocketSync(socketPath: string, slug: string): SocketIdentity {
  let st: BigIntStats;
  try {
    st = lstatSync(socketPath, { bigint: true });
  } catch (err) {
    throw (err as NodeJS.ErrnoException).code === 'ENOENT' ? noSocket(slug, err) : err;
  }
  return identify(st, slug);
}

function noSocket(slug: string, cause: unknown): GroveError {
  return new GroveError('backend_unavailable', `the backend of "${slug}" has no socket yet; it may be starting or stopped`, { cause });
}

function identify(st: BigIntStats, slug: string): SocketIdentity {
  if (!st.isSocket()) {
    throw new GroveError('backend_unavailable', `the backend socket of "${slug}" is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a socket'}; refusing to connect to it`);
  }
  if (!TRUSTED_OWNERS.has(Number(st.uid))) {
    throw new GroveError('backend_unavailable', `the backend socket of "${slug}" belongs to uid ${st.uid}, not to the backend; refusing to connect to it`);
  }
  // A freed inode number is soon handed out again: the change time (in ns) tells a new socket apart.
  return { key: `${st.dev}:${st.ino}:${st.ctimeNs}` };
}
