// The last thing said in a workspace's thread, read from the host's side of the mounted thread dir, so the
// registry can answer while the workspace is stopped (its backend, which serves /thread, is not there then).
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { GroveError, threadLineSchema, type LastMessage } from '@grove/contracts';

/** The backend's file name in the thread dir (packages/backend/src/thread-store.ts). */
const THREAD_FILE = 'thread.jsonl';
const NEWLINE = 0x0a;

function asMessage(raw: Buffer, max: number): LastMessage | null {
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
  const flat = l.text.replace(/\s+/g, ' ').trim();
  if (!flat) return null;
  const text = flat.length > max ? `${flat.slice(0, max - 1).trimEnd()}…` : flat;
  return { who: l.kind === 'user' ? 'user' : 'agent', text, at: l.at };
}

/**
 * The newest user or assistant line of <threadDir>/thread.jsonl, on one line and at most `max` characters;
 * null when there is none (or no file). Reads backwards in chunks: a long thread costs only its tail.
 */
export async function readLastMessage(threadDir: string, opts: { max?: number; chunkBytes?: number } = {}): Promise<LastMessage | null> {
  const max = opts.max ?? 120;
  const chunkBytes = opts.chunkBytes ?? 64 * 1024;
  const path = join(threadDir, THREAD_FILE);
  const notPlain = () => new GroveError('internal', `${path} is not a regular file; the host does not read it`);
  let file;
  try {
    // The thread dir is writable inside the sandbox: never follow a link planted there, and never block
    // on a FIFO (O_NONBLOCK), which would hold a thread of the host's I/O pool for good.
    file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw notPlain();
    throw e;
  }
  try {
    const stat = await file.stat();
    if (!stat.isFile()) throw notPlain();
    let end = stat.size;
    // Bytes before the first newline of the chunk read last: the tail of a line that starts further back.
    let carry = Buffer.alloc(0);
    while (end > 0) {
      const start = Math.max(0, end - chunkBytes);
      const chunk = Buffer.alloc(end - start);
      const { bytesRead } = await file.read(chunk, 0, chunk.length, start);
      const data = Buffer.concat([chunk.subarray(0, bytesRead), carry]);
      const lines: Buffer[] = [];
      let from = 0;
      for (let i = data.indexOf(NEWLINE); i >= 0; i = data.indexOf(NEWLINE, from)) {
        lines.push(data.subarray(from, i));
        from = i + 1;
      }
      lines.push(data.subarray(from));
      // Unless this chunk starts the file, its first line may be cut: it is completed by the next read.
      carry = start > 0 ? Buffer.from(lines.shift() ?? Buffer.alloc(0)) : Buffer.alloc(0);
      for (let i = lines.length - 1; i >= 0; i--) {
        const line = lines[i];
        if (!line || line.length === 0) continue;
        const m = asMessage(line, max);
        if (m) return m;
      }
      end = start;
    }
    return null;
  } finally {
    await file.close();
  }
}
