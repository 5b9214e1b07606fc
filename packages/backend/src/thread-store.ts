import { copyFile, mkdir, open, readFile, rename } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { GroveError, parseOrThrow, threadLineSchema } from '@grove/contracts';
import type { ThreadLine } from '@grove/contracts';
import type { Logger } from './logger.ts';
import type { NewThreadLine } from './providers/types.ts';

export const THREAD_FILE = 'thread.jsonl';

/** How much of a dropped line goes into the log: enough to recognise it, not a whole tool output. */
const PREVIEW_CHARS = 200;

export interface ThreadStoreOptions {
  threadDir: string;
  logger: Logger;
  /** Clock for the `at` stamp; injectable so tests can pin it. */
  now?: () => Date;
}

export interface ThreadStore {
  readonly path: string;
  /** A copy of every line, in seq order. */
  lines(): ThreadLine[];
  /** seq of the last line, -1 when the thread is empty. */
  lastSeq(): number;
  /**
   * Stamps seq and at, validates, writes and fsyncs the line, then tells the listeners, then resolves.
   * Appends are serialized in call order, so lines never interleave and seq follows call order.
   */
  append(line: NewThreadLine): Promise<ThreadLine>;
  /** Called synchronously for each line right after it is durable, in seq order. Returns an unsubscribe. */
  onLine(listener: (line: ThreadLine) => void): () => void;
  /** Lets appends already queued finish, then closes the file. Later appends reject. */
  close(): Promise<void>;
}

/** Opens (creating if needed) `<threadDir>/thread.jsonl`, repairing what a crash can leave behind. */
export async function openThreadStore(options: ThreadStoreOptions): Promise<ThreadStore> {
  const { threadDir, logger } = options;
  const now = options.now ?? (() => new Date());
  const path = join(threadDir, THREAD_FILE);
  await mkdir(threadDir, { recursive: true });

  const scan = scanThread(await readOrEmpty(path));
  await repair({ path, scan, logger, now });
  const file = await open(path, 'a');
  logger.info({ path, lines: scan.lines.length }, 'thread opened');
  return new JsonlThreadStore({ path, file, lines: scan.lines, size: scan.validBytes, logger, now });
}

interface Scan {
  lines: ThreadLine[];
  /** Byte length of the valid prefix: every line in `lines`, each with its newline. */
  validBytes: number;
  /** The valid prefix, byte for byte. */
  prefix: Buffer;
  /** Everything after the valid prefix (empty when the file is clean). */
  rest: Buffer;
  /** Why the line at `validBytes` was rejected. */
  problem: string | null;
}

function scanThread(buf: Buffer): Scan {
  const lines: ThreadLine[] = [];
  let offset = 0;
  const stopAt = (problem: string | null): Scan => ({
    lines,
    validBytes: offset,
    prefix: buf.subarray(0, offset),
    rest: buf.subarray(offset),
    problem,
  });
  while (offset < buf.length) {
    const newline = buf.indexOf(0x0a, offset);
    if (newline === -1) return stopAt('no trailing newline (torn write)');
    const checked = checkLine(buf.toString('utf8', offset, newline), lines.length);
    if (typeof checked === 'string') return stopAt(checked);
    lines.push(checked);
    offset = newline + 1;
  }
  return stopAt(null);
}

/** The parsed line, or a sentence saying what is wrong with it. */
function checkLine(text: string, expectedSeq: number): ThreadLine | string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return 'not valid JSON';
  }
  const parsed = threadLineSchema.safeParse(json);
  if (!parsed.success) {
    return `not a thread line (${parsed.error.issues.map((i) => `${i.path.join('.') || 'line'}: ${i.message}`).join('; ')})`;
  }
  if (parsed.data.seq !== expectedSeq) return `seq ${parsed.data.seq} where ${expectedSeq} was expected`;
  return parsed.data;
}

/**
 * A crash can only tear the LAST line: appends are serialized and each one is fsynced before the
 * next starts. So junk confined to one final line is a torn write that was never acknowledged, and
 * it is truncated away. Junk followed by more lines is something else (disk corruption, a bad hand
 * edit, a bug), and the lines after it may be real acknowledged history. Dropping them silently
 * would lose data; refusing to start would leave the workspace unusable. So the file is kept as
 * `thread.jsonl.corrupt-<ts>` for a human to look at, the thread continues from the valid prefix,
 * and the log says so at error level.
 */
async function repair(args: { path: string; scan: Scan; logger: Logger; now: () => Date }): Promise<void> {
  const { path, scan, logger, now } = args;
  if (scan.rest.length === 0) return;
  const restText = scan.rest.toString('utf8');
  const firstNewline = restText.indexOf('\n');
  const isTornTail = firstNewline === -1 || restText.slice(firstNewline + 1).trim() === '';
  const droppedText = firstNewline === -1 ? restText : restText.slice(0, firstNewline);

  if (isTornTail) {
    const file = await open(path, 'r+');
    try {
      await file.truncate(scan.validBytes);
      await file.sync();
    } finally {
      await file.close();
    }
    logger.warn(
      {
        path,
        reason: scan.problem,
        keptLines: scan.lines.length,
        droppedBytes: scan.rest.length,
        dropped: droppedText.slice(0, PREVIEW_CHARS),
      },
      'thread.jsonl ended in a torn line; truncated it to the last valid line',
    );
    return;
  }

  const aside = `${path}.corrupt-${now().toISOString().replace(/[:.]/g, '-')}`;
  // Copy first, then atomically replace: a crash at any point leaves either the original (and the
  // next start repeats this) or the repaired thread with the evidence next to it.
  await copyFile(path, aside);
  await syncFile(aside);
  const tmp = `${path}.tmp`;
  const fresh = await open(tmp, 'w');
  try {
    await writeAll(fresh, scan.prefix);
    await fresh.sync();
  } finally {
    await fresh.close();
  }
  await rename(tmp, path);
  await syncDir(path);
  const linesAfter = restText.split('\n').filter((l) => l.trim() !== '').length - 1;
  logger.error(
    {
      path,
      keptAs: aside,
      badLineNumber: scan.lines.length + 1,
      reason: scan.problem,
      badLine: droppedText.slice(0, PREVIEW_CHARS),
      keptLines: scan.lines.length,
      linesAfterBadLine: linesAfter,
    },
    'thread.jsonl has a corrupt line in the middle: kept the original aside and continue from the valid lines before it; the lines after it are NOT in the live thread',
  );
}

class JsonlThreadStore implements ThreadStore {
  readonly path: string;
  private file: FileHandle;
  private readonly stored: ThreadLine[];
  /** Bytes of durable, valid content; a failed append truncates back to it. */
  private size: number;
  private readonly logger: Logger;
  private readonly now: () => Date;
  private readonly listeners = new Set<(line: ThreadLine) => void>();
  private tail: Promise<unknown> = Promise.resolve();
  private closing = false;
  /** Set when a failed append could not be rolled back: the file may end in a partial line. */
  private broken: Error | null = null;

  constructor(args: { path: string; file: FileHandle; lines: ThreadLine[]; size: number; logger: Logger; now: () => Date }) {
    this.path = args.path;
    this.file = args.file;
    this.stored = args.lines;
    this.size = args.size;
    this.logger = args.logger;
    this.now = args.now;
  }

  lines(): ThreadLine[] {
    return this.stored.slice();
  }

  lastSeq(): number {
    return this.stored.length - 1;
  }

  append(line: NewThreadLine): Promise<ThreadLine> {
    if (this.closing) return Promise.reject(new GroveError('invalid_state', 'the thread store is closed'));
    const step = this.tail.then(() => this.write(line));
    this.tail = step.catch(() => undefined);
    return step;
  }

  onLine(listener: (line: ThreadLine) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await this.tail;
    await this.file.close();
  }

  private async write(input: NewThreadLine): Promise<ThreadLine> {
    if (this.broken) throw new GroveError('internal', `the thread file is unusable after a failed write: ${this.broken.message}`);
    // seq last in the spread, so a caller cannot smuggle its own seq or at in.
    const candidate = { ...input, seq: this.stored.length, at: this.now().toISOString() };
    const line = parseOrThrow(threadLineSchema, candidate, { what: 'thread line', code: 'internal' });
    const bytes = Buffer.from(`${JSON.stringify(line)}\n`, 'utf8');
    try {
      await writeAll(this.file, bytes);
      await this.file.sync();
    } catch (err) {
      await this.rollback(err);
      throw new GroveError('internal', `could not append to ${this.path}: ${errorMessage(err)}`, { cause: err });
    }
    this.size += bytes.length;
    this.stored.push(line);
    for (const listener of this.listeners) {
      try {
        listener(line);
      } catch (err) {
        this.logger.error({ err, seq: line.seq }, 'thread line listener failed');
      }
    }
    return line;
  }

  /** Cut a half-written line off again, so the next append does not land behind it (mid-file corruption). */
  private async rollback(cause: unknown): Promise<void> {
    try {
      await this.file.truncate(this.size);
      await this.file.sync();
      this.logger.error({ err: cause, path: this.path }, 'thread append failed; rolled the file back to the last line');
    } catch (err) {
      this.broken = err instanceof Error ? err : new Error(String(err));
      this.logger.fatal({ err, cause, path: this.path }, 'thread append failed and could not be rolled back; refusing further appends');
    }
  }
}

async function readOrEmpty(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
    throw err;
  }
}

async function writeAll(file: FileHandle, bytes: Buffer): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await file.write(bytes, offset, bytes.length - offset);
    if (bytesWritten === 0) throw new Error('write made no progress');
    offset += bytesWritten;
  }
}

async function syncFile(path: string): Promise<void> {
  const file = await open(path, 'r');
  try {
    await file.sync();
  } finally {
    await file.close();
  }
}

/** Makes a rename durable; best effort, since not every filesystem lets a directory be fsynced. */
async function syncDir(filePath: string): Promise<void> {
  const dir = await open(join(filePath, '..'), 'r').catch(() => null);
  if (!dir) return;
  try {
    await dir.sync();
  } catch {
    // Some filesystems (and some container overlays) refuse fsync on a directory; the data itself is synced.
  } finally {
    await dir.close();
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
