// The last things said in a workspace's thread, read from the host's side of the mounted thread dir, so the
// registry can answer while the workspace is stopped (its backend, which serves /thread, is not there then).
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { GroveError, threadLineSchema, type LastMessage } from '@grove/contracts';

/** The backend's file name in the thread dir (packages/backend/src/thread-store.ts). */
const THREAD_FILE = 'thread.jsonl';
const NEWLINE = 0x0a;

/** One line as a message: on one line (flat) or with its line breaks kept, at most `max` characters. */
function asMessage(raw: Buffer, max: number, flat: boolean): LastMessage | null {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    // A torn last line (a crash mid-append) or a corrupt one: the backend repairs it; here it is skipped.
    return null;
  }
  const parsed = threadLineSchema.safeParse(json);
  if (!parsed.success) return null;
  const l = parsed.data;
  if (l.kind !== 'user' && l.kind !== 'assistant') return null;
  const body = flat ? l.text.replace(/\s+/g, ' ').trim() : l.text.trim();
  if (!body) return null;
  const text = body.length > max ? `${body.slice(0, max - 1).trimEnd()}…` : body;
  return { who: l.kind === 'user' ? 'user' : 'agent', text, at: l.at };
}

/** Bounds of one read (defaults: DEFAULT_SCAN). */
export interface ScanBounds {
  /** Read at most this much from the end of the file, in all. Default 4 MiB. */
  maxScanBytes: number;
  /** A line longer than this is skipped, never parsed or held. Default 1 MiB. */
  maxLineBytes: number;
  /** Size of each read. Default 64 KiB. */
  chunkBytes: number;
}

export const DEFAULT_SCAN: ScanBounds = { maxScanBytes: 4 * 1024 * 1024, maxLineBytes: 1024 * 1024, chunkBytes: 64 * 1024 };

/**
 * The newest user or assistant line of <threadDir>/thread.jsonl, on one line and at most `max` characters;
 * null when there is none (or no file), and null too when none is found within maxScanBytes of the end.
 */
export async function readLastMessage(
  threadDir: string,
  opts: { max?: number; onRead?: (bytes: number) => void } & Partial<ScanBounds> = {},
): Promise<LastMessage | null> {
  const [last] = await readRecentMessages(threadDir, { ...opts, count: 1, max: opts.max ?? 120, flat: true });
  return last ?? null;
}

/**
 * The newest `count` user and assistant lines of <threadDir>/thread.jsonl, oldest first, each at most `max`
 * characters (default 4000) with its line breaks kept unless `flat`; only those found within maxScanBytes of
 * the end: the file is written by the sandbox, so what the host spends reading it is bounded whatever it holds.
 * One pass backwards: every byte is read and searched for a newline once (a newline-free tail costs its
 * length, not its length squared), and a line is joined and parsed only when it is short enough to be one.
 * `onRead` sees each read's byte count (tests measure the bound with it).
 */
export async function readRecentMessages(
  threadDir: string,
  opts: { count: number; max?: number; flat?: boolean; onRead?: (bytes: number) => void } & Partial<ScanBounds>,
): Promise<LastMessage[]> {
  const max = opts.max ?? 4000;
  const flat = opts.flat ?? false;
  const bounds: ScanBounds = {
    maxScanBytes: opts.maxScanBytes ?? DEFAULT_SCAN.maxScanBytes,
    maxLineBytes: opts.maxLineBytes ?? DEFAULT_SCAN.maxLineBytes,
    chunkBytes: opts.chunkBytes ?? DEFAULT_SCAN.chunkBytes,
  };
  // Newest first while scanning; handed back oldest first.
  const found: LastMessage[] = [];
  const done = (): LastMessage[] => found.reverse();
  const path = join(threadDir, THREAD_FILE);
  const notPlain = () => new GroveError('internal', `${path} is not a regular file; the host does not read it`);
  let file;
  try {
    // The thread dir is writable inside the sandbox: never follow a link planted there, and never block
    // on a FIFO (O_NONBLOCK), which would hold a thread of the host's I/O pool for good.
    file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return done();
    if (code === 'ELOOP') throw notPlain();
    throw e;
  }
  try {
    const stat = await file.stat();
    if (!stat.isFile()) throw notPlain();
    const floor = Math.max(0, stat.size - bounds.maxScanBytes);
    let end = stat.size;
    // The pieces (newest last) of the line whose start has not been read yet, and their total length;
    // null once that line is known to be longer than maxLineBytes: it is then skipped, not held.
    let pending: Buffer[] | null = [];
    let pendingBytes = 0;
    // Takes the pending line as a message; true once `count` are found.
    const lineDone = (): boolean => {
      const line = pending === null ? null : Buffer.concat(pending.reverse(), pendingBytes);
      pending = [];
      pendingBytes = 0;
      const m = line && line.length > 0 ? asMessage(line, max, flat) : null;
      if (m) found.push(m);
      return found.length >= opts.count;
    };
    const keep = (piece: Buffer): void => {
      if (pending === null || piece.length === 0) return;
      pendingBytes += piece.length;
      if (pendingBytes > bounds.maxLineBytes) pending = null;
      else pending.push(piece);
    };
    while (end > floor) {
      const start = Math.max(floor, end - bounds.chunkBytes);
      const chunk = Buffer.alloc(end - start);
      const { bytesRead } = await file.read(chunk, 0, chunk.length, start);
      opts.onRead?.(bytesRead);
      // A file truncated under us: what is left is read on the next call.
      if (bytesRead < chunk.length) return done();
      // Newlines of this chunk only, newest first: bytes after the last one belong to the pending line.
      let to = chunk.length;
      for (let i = chunk.lastIndexOf(NEWLINE, to - 1); i >= 0; i = to > 0 ? chunk.lastIndexOf(NEWLINE, to - 1) : -1) {
        keep(chunk.subarray(i + 1, to));
        if (lineDone()) return done();
        to = i;
      }
      // subarray shares memory with chunk, which is not reused: no copy needed.
      keep(chunk.subarray(0, to));
      end = start;
    }
    // At the start of the file the pending line is whole; past the scan bound it is cut and is not read.
    if (floor === 0) lineDone();
    return done();
  } finally {
    await file.close();
  }
}
