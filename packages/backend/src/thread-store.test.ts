import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { threadLineSchema } from '@grove/contracts';
import type { ThreadLine } from '@grove/contracts';
import { createLogger } from './logger.ts';
import type { LogRecord } from './test-support.ts';
import { THREAD_FILE, openThreadStore } from './thread-store.ts';
import type { ThreadStore } from './thread-store.ts';

let dir: string;
let logs: LogRecord[];
const logger = () => createLogger({ level: 'debug', write: (l) => void logs.push(JSON.parse(l) as LogRecord) });
const fixedNow = () => new Date('2025-01-02T03:04:05.678Z');

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gts-'));
  logs = [];
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

const filePath = () => join(dir, THREAD_FILE);
const open_ = () => openThreadStore({ threadDir: dir, logger: logger(), now: fixedNow });
const userLine = (seq: number, text = `message ${seq}`): ThreadLine => ({ seq, turn: `turn-${seq}`, at: fixedNow().toISOString(), kind: 'user', text });
const jsonl = (lines: ThreadLine[]) => lines.map((l) => `${JSON.stringify(l)}\n`).join('');
const readLines = () =>
  readFileSync(filePath(), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => threadLineSchema.parse(JSON.parse(l)));

async function withStore<T>(fn: (store: ThreadStore) => Promise<T>): Promise<T> {
  const store = await open_();
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

describe('thread store', () => {
  it('creates the directory and file, stamps seq from 0 and at, and reads them back after reopening', async () => {
    rmSync(dir, { recursive: true });
    await withStore(async (store) => {
      expect(store.lastSeq()).toBe(-1);
      const a = await store.append({ kind: 'user', turn: 't1', text: 'hi' });
      const b = await store.append({ kind: 'assistant', turn: 't1', text: 'hello' });
      expect(a).toEqual({ seq: 0, turn: 't1', at: '2025-01-02T03:04:05.678Z', kind: 'user', text: 'hi' });
      expect(b.seq).toBe(1);
      expect(store.lastSeq()).toBe(1);
    });
    await withStore(async (store) => {
      expect(store.lines().map((l) => l.seq)).toEqual([0, 1]);
      expect((await store.append({ kind: 'turn_end', turn: 't1', status: 'completed' })).seq).toBe(2);
    });
    expect(readLines().map((l) => l.kind)).toEqual(['user', 'assistant', 'turn_end']);
  });

  it('serializes concurrent appends: seq follows call order and no line interleaves', async () => {
    const big = 'x'.repeat(200_000); // larger than a pipe buffer, so a non-serialized write could interleave
    await withStore(async (store) => {
      const appended = await Promise.all(Array.from({ length: 40 }, (_, i) => store.append({ kind: 'user', turn: `t${i}`, text: `${i}:${big}` })));
      expect(appended.map((l) => l.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i));
      expect(appended.map((l) => l.turn)).toEqual(Array.from({ length: 40 }, (_, i) => `t${i}`));
    });
    const lines = readLines();
    expect(lines).toHaveLength(40);
    lines.forEach((l, i) => expect(l).toMatchObject({ seq: i, turn: `t${i}`, text: `${i}:${big}` }));
  });

  it('writes and fsyncs before telling listeners, and tells listeners before acknowledging', async () => {
    const events: string[] = [];
    const probe = await open(join(dir, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void>; write: (...a: unknown[]) => Promise<unknown> };
    await probe.close();
    const realSync = proto.sync;
    const realWrite = proto.write;
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      events.push('write');
      return realWrite.apply(this, args);
    });
    vi.spyOn(proto, 'sync').mockImplementation(async function (this: unknown) {
      await realSync.apply(this);
      events.push('synced');
    });
    await withStore(async (store) => {
      store.onLine((line) => {
        // The line is already in the file when anyone hears about it.
        expect(readLines().at(-1)).toEqual(line);
        events.push('listener');
      });
      events.length = 0;
      await store.append({ kind: 'user', turn: 't', text: 'x' });
      events.push('ack');
    });
    expect(events).toEqual(['write', 'synced', 'listener', 'ack']);
  });

  it('rejects an invalid line without writing anything, and keeps going', async () => {
    await withStore(async (store) => {
      const bad = { kind: 'tool_result', turn: 't', callId: 'c', output: 'o' } as unknown as Parameters<typeof store.append>[0];
      await expect(store.append(bad)).rejects.toThrow(/invalid thread line: isError/);
      expect((await store.append({ kind: 'user', turn: 't', text: 'ok' })).seq).toBe(0);
    });
    expect(readLines()).toHaveLength(1);
  });

  it('rejects appends after close, but finishes those queued before it', async () => {
    const store = await open_();
    const queued = store.append({ kind: 'user', turn: 't', text: 'queued' });
    const closed = store.close();
    await expect(store.append({ kind: 'user', turn: 't', text: 'late' })).rejects.toThrow(/closed/);
    await expect(queued).resolves.toMatchObject({ seq: 0 });
    await closed;
    expect(readLines().map((l) => l.kind === 'user' && l.text)).toEqual(['queued']);
  });

  it('repairs a torn last line (no newline): truncates to the last good line, logs what was dropped, continues the seq', async () => {
    const good = [userLine(0), userLine(1)];
    const torn = JSON.stringify(userLine(2)).slice(0, 25);
    writeFileSync(filePath(), jsonl(good) + torn);
    await withStore(async (store) => {
      expect(store.lines()).toEqual(good);
      expect(readFileSync(filePath(), 'utf8')).toBe(jsonl(good));
      expect((await store.append({ kind: 'user', turn: 't', text: 'after repair' })).seq).toBe(2);
    });
    const warning = logs.find((r) => r.level === 'warn');
    expect(warning).toMatchObject({ dropped: torn, droppedBytes: torn.length, keptLines: 2, reason: 'no trailing newline (torn write)' });
    expect(readLines().map((l) => l.seq)).toEqual([0, 1, 2]);
  });

  it('treats an unparseable or out-of-sequence LAST line as torn too', async () => {
    for (const last of ['\0\0\0\0\n', '{"seq":2,"kind":"user"}\n', `${JSON.stringify(userLine(7))}\n`]) {
      writeFileSync(filePath(), jsonl([userLine(0), userLine(1)]) + last);
      await withStore(async (store) => expect(store.lastSeq()).toBe(1));
      expect(readFileSync(filePath(), 'utf8')).toBe(jsonl([userLine(0), userLine(1)]));
    }
    expect(logs.filter((r) => r.level === 'warn')).toHaveLength(3);
    expect(readdirSync(dir)).toEqual([THREAD_FILE]);
  });

  it('keeps a file with a corrupt MIDDLE line aside, continues from the valid prefix and logs at error level', async () => {
    const original = jsonl([userLine(0), userLine(1)]) + '{"broken\n' + jsonl([userLine(3), userLine(4)]);
    writeFileSync(filePath(), original);
    await withStore(async (store) => {
      expect(store.lines().map((l) => l.seq)).toEqual([0, 1]);
      expect((await store.append({ kind: 'user', turn: 't', text: 'next' })).seq).toBe(2);
    });
    const aside = readdirSync(dir).filter((f) => f.startsWith(`${THREAD_FILE}.corrupt-`));
    expect(aside).toEqual([`${THREAD_FILE}.corrupt-2025-01-02T03-04-05-678Z`]);
    expect(readFileSync(join(dir, aside[0] ?? ''), 'utf8')).toBe(original);
    expect(readLines().map((l) => l.seq)).toEqual([0, 1, 2]);
    const error = logs.find((r) => r.level === 'error');
    expect(error).toMatchObject({ badLineNumber: 3, keptLines: 2, linesAfterBadLine: 2, reason: 'not valid JSON', badLine: '{"broken' });
    expect(error?.msg).toMatch(/corrupt line in the middle/);
  });

  it('treats a seq gap followed by more lines as mid-file corruption', async () => {
    writeFileSync(filePath(), jsonl([userLine(0), userLine(2), userLine(3)]));
    await withStore(async (store) => expect(store.lastSeq()).toBe(0));
    expect(logs.find((r) => r.level === 'error')).toMatchObject({ reason: 'seq 2 where 1 was expected' });
  });

  it('property: any crash-truncated file reopens to exactly its complete lines and appends the next seq', async () => {
    const texts = fc.array(fc.string({ unit: 'grapheme', maxLength: 40 }), { minLength: 0, maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(texts, fc.double({ min: 0, max: 1, noNaN: true }), async (ts, cutAt) => {
        const content = Buffer.from(jsonl(ts.map((text, seq) => userLine(seq, text))), 'utf8');
        const cut = Math.floor(content.length * cutAt);
        mkdirSync(dir, { recursive: true });
        writeFileSync(filePath(), content.subarray(0, cut));
        const complete = content.subarray(0, cut).toString('latin1').split('\n').length - 1;
        await withStore(async (store) => {
          expect(store.lines().length).toBe(complete);
          expect((await store.append({ kind: 'user', turn: 't', text: 'next' })).seq).toBe(complete);
        });
        expect(readLines()).toHaveLength(complete + 1);
        rmSync(dir, { recursive: true, force: true });
      }),
      { numRuns: 60 },
    );
  });

  it('rolls a failed write back so the next append does not land behind a partial line', async () => {
    await withStore(async (store) => {
      await store.append({ kind: 'user', turn: 't', text: 'before' });
      const probe = await open(join(dir, 'probe'), 'w');
      const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
      await probe.close();
      // The bytes are written, then fsync fails (as with EIO): the line must not stay in the file.
      vi.spyOn(proto, 'sync').mockRejectedValueOnce(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
      await expect(store.append({ kind: 'user', turn: 't', text: 'lost' })).rejects.toThrow(/could not append .*EIO/);
      expect((await store.append({ kind: 'user', turn: 't', text: 'after' })).seq).toBe(1);
    });
    expect(readLines().map((l) => l.kind === 'user' && l.text)).toEqual(['before', 'after']);
  });

  it('appends to a file that already ends in good lines without touching them', async () => {
    writeFileSync(filePath(), jsonl([userLine(0)]));
    await withStore(async (store) => void (await store.append({ kind: 'user', turn: 't', text: 'second' })));
    appendFileSync(filePath(), '');
    expect(readLines().map((l) => l.seq)).toEqual([0, 1]);
    expect(logs.filter((r) => r.level === 'warn' || r.level === 'error')).toEqual([]);
  });
});
