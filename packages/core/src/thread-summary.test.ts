// The last messages of a thread, read from thread.jsonl on the host (pure file reading, real temp files).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SCAN, readLastMessage, readRecentMessages } from './thread-summary.ts';

const dirs: string[] = [];
function threadDir(lines: Array<Record<string, unknown> | string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-thread-summary-'));
  dirs.push(dir);
  const text = lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n');
  fs.writeFileSync(path.join(dir, 'thread.jsonl'), text);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

let seq = 0;
const at = '2026-01-02T03:04:05.000Z';
const user = (text: string) => ({ seq: seq++, turn: 't1', at, kind: 'user', text });
const agent = (text: string) => ({ seq: seq++, turn: 't1', at, kind: 'assistant', text });
const tool = () => ({ seq: seq++, turn: 't1', at, kind: 'tool_result', callId: 'c', output: 'x'.repeat(300), isError: false });
const end = () => ({ seq: seq++, turn: 't1', at, kind: 'turn_end', status: 'completed' });

describe('readLastMessage', () => {
  it('is null without a thread file or without anything said', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-thread-summary-'));
    dirs.push(empty);
    expect(await readLastMessage(empty)).toBeNull();
    expect(await readLastMessage(threadDir([tool(), end()]))).toBeNull();
  });

  it('skips tool lines, turn ends, blank text and a torn last line', async () => {
    const dir = threadDir([user('fix the bug'), agent('  done:\n\nall   green '), tool(), agent('   '), end(), '{"seq":99,"kind":"user","te']);
    expect(await readLastMessage(dir)).toEqual({ who: 'agent', text: 'done: all green', at });
    expect(await readLastMessage(threadDir([agent('hi'), user('thanks')]))).toEqual({ who: 'user', text: 'thanks', at });
  });

  it('shortens a long message to max characters', async () => {
    const m = await readLastMessage(threadDir([agent('a long reply')]), { max: 6 });
    expect(m?.text).toBe('a lon…');
  });

  it('finds a message many chunks back, with multi-byte text across chunk edges', async () => {
    const text = `grüße ${'ä€'.repeat(200)} 🌳`;
    const dir = threadDir([user('first'), agent(text), ...Array.from({ length: 50 }, tool), end(), '']);
    for (const chunkBytes of [7, 64, 1000, 1 << 20]) {
      expect(await readLastMessage(dir, { chunkBytes, max: 10_000 })).toEqual({ who: 'agent', text, at });
    }
  });

  it('refuses a symbolic link or a FIFO planted as thread.jsonl (the sandbox can write the thread dir)', async () => {
    const elsewhere = threadDir([user('another workspace said this')]);
    const linked = threadDir([]);
    fs.rmSync(path.join(linked, 'thread.jsonl'));
    fs.symlinkSync(path.join(elsewhere, 'thread.jsonl'), path.join(linked, 'thread.jsonl'));
    await expect(readLastMessage(linked)).rejects.toThrow(/not a regular file/);
    const fifo = threadDir([]);
    fs.rmSync(path.join(fifo, 'thread.jsonl'));
    execFileSync('mkfifo', [path.join(fifo, 'thread.jsonl')]);
    await expect(readLastMessage(fifo)).rejects.toThrow(/not a regular file/);
  });
});

// Issue 14, 5c: the sandbox writes thread.jsonl, so what the host spends reading its end is bounded by the host.
describe('readRecentMessages', () => {
  it('gives the newest count messages oldest first, line breaks kept, tool lines and turn ends left out', async () => {
    const dir = threadDir([user('one'), agent('two'), tool(), user('three'), agent('four\n\n- a\n- b  '), end(), '{"seq":99,"kind":"user","te']);
    expect(await readRecentMessages(dir, { count: 3 })).toEqual([
      { who: 'agent', text: 'two', at },
      { who: 'user', text: 'three', at },
      { who: 'agent', text: 'four\n\n- a\n- b', at },
    ]);
    expect((await readRecentMessages(dir, { count: 10 })).map((m) => m.text)).toEqual(['one', 'two', 'three', 'four\n\n- a\n- b']);
    expect((await readRecentMessages(dir, { count: 2, max: 4 })).map((m) => m.text)).toEqual(['thr…', 'fou…']);
  });

  it('is empty without a thread file', async () => {
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-thread-summary-'));
    dirs.push(empty);
    expect(await readRecentMessages(empty, { count: 5 })).toEqual([]);
  });
});

describe('readLastMessage on a hostile thread file', () => {
  /** Reads with a counter of the bytes read. */
  async function counted(dir: string, opts: Parameters<typeof readLastMessage>[1] = {}) {
    let bytes = 0;
    let reads = 0;
    const message = await readLastMessage(dir, {
      ...opts,
      onRead: (n) => {
        bytes += n;
        reads++;
      },
    });
    return { message, bytes, reads };
  }

  it('reads at most its bound, once, from a 64 MiB tail without a newline, and reports no message', async () => {
    const dir = threadDir([user('said before the flood'), '']);
    fs.appendFileSync(path.join(dir, 'thread.jsonl'), Buffer.alloc(64 * 1024 * 1024, 0x78));
    const { message, bytes, reads } = await counted(dir);
    // Before the fix this took a minute of CPU (every chunk re-searched the whole carried tail).
    expect(message).toBeNull();
    expect(bytes).toBe(DEFAULT_SCAN.maxScanBytes);
    expect(reads).toBe(DEFAULT_SCAN.maxScanBytes / DEFAULT_SCAN.chunkBytes);
  });

  it('skips a line longer than maxLineBytes without holding it, and finds the message before it', async () => {
    const dir = threadDir([user('the question'), agent('the answer'), tool(), '']);
    fs.appendFileSync(path.join(dir, 'thread.jsonl'), `${'y'.repeat(40_000)}\n${JSON.stringify(tool())}\n`);
    const size = fs.statSync(path.join(dir, 'thread.jsonl')).size;
    const { message, bytes } = await counted(dir, { maxLineBytes: 8_192, maxScanBytes: 64 * 1024, chunkBytes: 4_096 });
    expect(message).toEqual({ who: 'agent', text: 'the answer', at });
    expect(bytes).toBeLessThanOrEqual(size);
    // The same file with a scan bound that ends inside the long line: nothing found, nothing read past the bound.
    const short = await counted(dir, { maxLineBytes: 8_192, maxScanBytes: 16 * 1024, chunkBytes: 4_096 });
    expect(short.message).toBeNull();
    expect(short.bytes).toBe(16 * 1024);
  });

  it('still finds a message whose line is exactly at the scan bound from the start of the file', async () => {
    const dir = threadDir([agent('only line')]);
    const size = fs.statSync(path.join(dir, 'thread.jsonl')).size;
    const { message, bytes } = await counted(dir, { maxScanBytes: size, chunkBytes: 5 });
    expect(message).toEqual({ who: 'agent', text: 'only line', at });
    expect(bytes).toBe(size);
  });
});
