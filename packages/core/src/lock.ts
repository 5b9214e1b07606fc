import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { GroveError } from '@grove/contracts';
import type { Logger } from 'pino';
import { KeyedMutex, MutexTimeout } from './mutex.ts';

/**
 * Per-repository git lock that works across processes: an O_EXCL lock file holding {pid, at, nonce}.
 * A lock whose holder pid is dead is removed (self-healing after a crash); a live holder is waited for
 * until the timeout, then GroveError('git_busy'). Callers inside one process queue on a promise chain
 * first, so a process never polls against itself.
 */
export interface LockHolder {
  pid: number;
  at: string;
  nonce?: string;
}

export interface RepoLockOptions {
  dir: string;
  /** Lock file for a key; defaults to <dir>/<key>.lock. Grove passes its validated path builder. */
  fileFor?: (key: string) => string;
  timeoutMs: number;
  pollMs?: number;
  logger?: Logger;
}

/** Shared by every RepoLock in the process, keyed by lock file, so two Grove instances on one home serialize too. */
const inProcess = new KeyedMutex();

/** A lock file that cannot be parsed is only trusted this long (its writer may be between open and write). */
const CORRUPT_GRACE_MS = 2_000;
/** A heal marker older than this was left by a process that died while healing. */
const HEAL_GRACE_MS = 5_000;

export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: the process exists but belongs to someone else.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function errno(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | null)?.code;
}

async function readRaw(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if (errno(e) === 'ENOENT') return null;
    throw e;
  }
}

export function parseHolder(raw: string): LockHolder | null {
  try {
    const v = JSON.parse(raw) as Partial<LockHolder>;
    if (typeof v.pid !== 'number' || typeof v.at !== 'string') return null;
    return { pid: v.pid, at: v.at, nonce: typeof v.nonce === 'string' ? v.nonce : undefined };
  } catch {
    return null;
  }
}

async function ageMs(file: string): Promise<number | null> {
  try {
    return Date.now() - (await stat(file)).mtimeMs;
  } catch (e) {
    if (errno(e) === 'ENOENT') return null;
    throw e;
  }
}

/**
 * Remove a lock file whose content is still `expected`. A second marker file (O_EXCL) makes the
 * check-and-unlink exclusive, so two healers cannot both remove it and one of them delete a lock a
 * third process just took.
 */
async function heal(file: string, expected: string): Promise<boolean> {
  const marker = `${file}.heal`;
  try {
    const fh = await open(marker, 'wx');
    await fh.close();
  } catch (e) {
    if (errno(e) !== 'EEXIST') throw e;
    const age = await ageMs(marker);
    if (age !== null && age > HEAL_GRACE_MS) await unlink(marker).catch(() => undefined);
    return false;
  }
  try {
    if ((await readRaw(file)) !== expected) return false;
    await unlink(file);
    return true;
  } finally {
    await unlink(marker).catch(() => undefined);
  }
}

export class RepoLock {
  private readonly dir: string;
  private readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly logger: Logger | undefined;
  private readonly fileOf: (key: string) => string;

  constructor(opts: RepoLockOptions) {
    this.dir = opts.dir;
    this.fileOf = opts.fileFor ?? ((key) => join(opts.dir, `${key}.lock`));
    this.timeoutMs = opts.timeoutMs;
    this.pollMs = opts.pollMs ?? 30;
    this.logger = opts.logger;
  }

  fileFor(key: string): string {
    return this.fileOf(key);
  }

  /** Run fn while holding the lock for key (a validated project name). */
  async withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const file = this.fileFor(key);
    const deadline = Date.now() + this.timeoutMs;
    let release: () => void;
    try {
      release = await inProcess.acquire(file, this.timeoutMs);
    } catch (e) {
      if (e instanceof MutexTimeout) throw this.busy(key, 'another operation in this process');
      throw e;
    }
    try {
      const mine = await this.acquireFile(key, file, deadline);
      try {
        return await fn();
      } finally {
        await this.releaseFile(file, mine);
      }
    } finally {
      release();
    }
  }

  private busy(key: string, holder: LockHolder | string | null): GroveError {
    const who = holder === null ? 'an unknown holder' : typeof holder === 'string' ? holder : `pid ${holder.pid} since ${holder.at}`;
    return new GroveError('git_busy', `repository "${key}" is busy (lock held by ${who}); gave up after ${this.timeoutMs} ms`, {
      details: { project: key, holderPid: typeof holder === 'object' && holder ? holder.pid : null },
    });
  }

  private async acquireFile(key: string, file: string, deadline: number): Promise<string> {
    await mkdir(this.dir, { recursive: true });
    const content = JSON.stringify({ pid: process.pid, at: new Date().toISOString(), nonce: randomBytes(8).toString('hex') });
    for (;;) {
      try {
        const fh = await open(file, 'wx', 0o644);
        try {
          await fh.writeFile(content);
        } finally {
          await fh.close();
        }
        return content;
      } catch (e) {
        if (errno(e) !== 'EEXIST') throw e;
      }
      const raw = await readRaw(file);
      if (raw === null) continue; // released between our open and read
      const holder = parseHolder(raw);
      if (holder && !pidAlive(holder.pid)) {
        if (await heal(file, raw)) this.logger?.warn({ lock: file, pid: holder.pid, since: holder.at }, 'released stale git lock (holder is dead)');
        continue;
      }
      if (!holder && ((await ageMs(file)) ?? 0) > CORRUPT_GRACE_MS) {
        if (await heal(file, raw)) this.logger?.warn({ lock: file }, 'released unreadable git lock');
        continue;
      }
      if (Date.now() >= deadline) throw this.busy(key, holder);
      await sleep(this.pollMs);
    }
  }

  private async releaseFile(file: string, mine: string): Promise<void> {
    const raw = await readRaw(file);
    if (raw !== mine) {
      this.logger?.warn({ lock: file }, 'git lock was taken over while held; leaving the new holder alone');
      return;
    }
    await unlink(file).catch(() => undefined);
  }

  /** Remove every lock file in the directory whose holder pid is dead. Returns the released files. */
  async releaseStale(): Promise<string[]> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (e) {
      if (errno(e) === 'ENOENT') return [];
      throw e;
    }
    const released: string[] = [];
    for (const n of names.filter((x) => x.endsWith('.lock'))) {
      const file = join(this.dir, n);
      const raw = await readRaw(file);
      if (raw === null) continue;
      const holder = parseHolder(raw);
      const stale = holder ? !pidAlive(holder.pid) : ((await ageMs(file)) ?? 0) > CORRUPT_GRACE_MS;
      if (stale && (await heal(file, raw))) {
        released.push(file);
        this.logger?.warn({ lock: file, pid: holder?.pid }, 'released stale git lock at reconcile');
      }
    }
    return released;
  }
}
