import { spawn } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  backendHealthSchema,
  backendStatusSchema,
  cancelTurnResponseSchema,
  errorBodySchema,
  postMessageResponseSchema,
  threadLineSchema,
  threadResponseSchema,
} from '@grove/contracts';
import type { StreamFrame, ThreadLine } from '@grove/contracts';
import type { Provider } from './providers/types.ts';
import { StreamClient, http, makeDirs, postMessage, startBackend } from './test-support.ts';
import type { TestBackend } from './test-support.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function start(overrides: Parameters<typeof startBackend>[0] = {}): Promise<TestBackend> {
  const t = await startBackend(overrides);
  cleanups.push(t.dispose);
  return t;
}

async function connect(t: TestBackend): Promise<StreamClient> {
  const client = await StreamClient.connect(t.socketPath);
  cleanups.push(async () => client.close());
  return client;
}

async function thread(t: TestBackend): Promise<ThreadLine[]> {
  const res = await http(t.socketPath, { path: '/thread' });
  expect(res.status).toBe(200);
  return threadResponseSchema.parse(res.json).lines;
}

/** Posts a message, asserts 202, and waits (on the stream) until its turn has ended. */
async function runTurn(t: TestBackend, client: StreamClient, text: string): Promise<{ turn: string; lines: ThreadLine[] }> {
  const res = await postMessage(t.socketPath, text);
  expect(res.status, res.text).toBe(202);
  const { turn } = postMessageResponseSchema.parse(res.json);
  await client.waitForTurnEnd(turn);
  return { turn, lines: (await thread(t)).filter((l) => l.turn === turn) };
}

const lineFrames = (frames: StreamFrame[]) => frames.flatMap((f) => (f.type === 'line' ? [f.line] : []));

describe('backend HTTP', () => {
  it('answers /health and /status per the contract, and 404 for unknown routes', async () => {
    const t = await start();
    const health = await http(t.socketPath, { path: '/health' });
    expect(health.status).toBe(200);
    expect(backendHealthSchema.parse(health.json)).toEqual({ ok: true, slug: 'demo~test', provider: 'scripted' });

    const status = await http(t.socketPath, { path: '/status' });
    expect(backendStatusSchema.parse(status.json)).toMatchObject({ busy: false, currentTurn: null, lines: 0, lastSeq: -1, agentSessionId: null });

    for (const [method, path] of [['GET', '/nope'], ['GET', '/messages'], ['DELETE', '/thread']] as const) {
      const res = await http(t.socketPath, { method, path });
      expect(res.status).toBe(404);
      expect(errorBodySchema.parse(res.json)).toEqual({ code: 'not_found', message: `no route for ${method} ${path}` });
    }
  });

  it('streams hello, deltas and lines for a turn, and GET /thread has user, assistant, turn_end', async () => {
    const t = await start();
    const client = await connect(t);
    expect(client.frames[0]).toEqual({ type: 'hello', lastSeq: -1, busy: false });

    const res = await postMessage(t.socketPath, 'hello there');
    expect(res.status).toBe(202);
    expect(postMessageResponseSchema.parse(res.json)).toEqual({ turn: 'turn-1', seq: 0 });
    await client.waitForTurnEnd('turn-1');

    const frames = client.frames.slice(1);
    const deltas = frames.flatMap((f) => (f.type === 'delta' ? [f.text] : []));
    expect(deltas.length).toBeGreaterThanOrEqual(4);
    const lines = lineFrames(frames);
    expect(lines.map((l) => l.kind)).toEqual(['user', 'assistant', 'turn_end']);
    const assistant = lines[1];
    expect(assistant?.kind === 'assistant' && assistant.text).toBe('Scripted agent here. You said: "hello there". (turn 1)');
    expect(deltas.join('')).toBe(assistant?.kind === 'assistant' ? assistant.text : null);
    // Every delta arrives after the user line and before the assistant line.
    const kinds = frames.map((f) => (f.type === 'line' ? f.line.kind : f.type));
    expect(kinds.indexOf('delta')).toBeGreaterThan(kinds.indexOf('user'));
    expect(kinds.lastIndexOf('delta')).toBeLessThan(kinds.indexOf('assistant'));

    const stored = await thread(t);
    expect(stored).toEqual(lines);
    expect(stored.map((l) => [l.seq, l.kind, l.turn])).toEqual([
      [0, 'user', 'turn-1'],
      [1, 'assistant', 'turn-1'],
      [2, 'turn_end', 'turn-1'],
    ]);
    expect(stored[2]).toMatchObject({ kind: 'turn_end', status: 'completed' });
  });

  it('broadcasts to every connected client, and a late client gets hello with the current lastSeq', async () => {
    const t = await start();
    const a = await connect(t);
    const b = await connect(t);
    await runTurn(t, a, 'one');
    await b.waitForTurnEnd('turn-1');
    expect(lineFrames(b.frames)).toEqual(lineFrames(a.frames));

    const late = await connect(t);
    expect(late.frames[0]).toEqual({ type: 'hello', lastSeq: 2, busy: false });
  });

  it('has the user line on disk when the 202 arrives', async () => {
    const t = await start({ scriptedDelayMs: 50 });
    const res = await postMessage(t.socketPath, 'durable?');
    expect(res.status).toBe(202);
    const { seq } = postMessageResponseSchema.parse(res.json);
    const onDisk = readFileSync(join(t.threadDir, 'thread.jsonl'), 'utf8').split('\n').filter(Boolean);
    const line = threadLineSchema.parse(JSON.parse(onDisk[seq] ?? 'null'));
    expect(line).toMatchObject({ seq, kind: 'user', text: 'durable?' });
  });

  it('answers 409 while a turn runs, and accepts the next message as soon as turn_end is streamed', async () => {
    const t = await start();
    const client = await connect(t);
    const first = await postMessage(t.socketPath, 'sleep 300');
    expect(first.status).toBe(202);

    const status = backendStatusSchema.parse((await http(t.socketPath, { path: '/status' })).json);
    expect(status).toMatchObject({ busy: true, currentTurn: 'turn-1' });
    const second = await postMessage(t.socketPath, 'me too');
    expect(second.status).toBe(409);
    expect(second.json).toEqual({ code: 'invalid_state', message: 'a turn is already running in this workspace' });

    // Post from inside the turn_end frame handler: busy must already be cleared when the line is broadcast.
    const third = await new Promise<Awaited<ReturnType<typeof postMessage>>>((resolve, reject) => {
      client.ws.on('message', (data: Buffer) => {
        const frame = JSON.parse(data.toString('utf8')) as StreamFrame;
        if (frame.type === 'line' && frame.line.kind === 'turn_end') postMessage(t.socketPath, 'now').then(resolve, reject);
      });
    });
    expect(third.status).toBe(202);
    expect(third.json).toEqual({ turn: 'turn-2', seq: 3 });
    await client.waitForTurnEnd('turn-2');
    expect((await thread(t)).filter((l) => l.kind === 'user').map((l) => l.text)).toEqual(['sleep 300', 'now']);
  });

  it('lets only one of many simultaneous messages start a turn', async () => {
    const t = await start();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => postMessage(t.socketPath, `race ${i}`)));
    expect(results.map((r) => r.status).sort()).toEqual([202, 409, 409, 409, 409, 409, 409, 409]);
  });

  it('rejects invalid bodies with 422 and a message naming the problem', async () => {
    const t = await start({ maxBodyBytes: 1024 });
    const cases: { body: string; message: RegExp; issuePath?: string }[] = [
      { body: '{not json', message: /^request body is not valid JSON/ },
      { body: '', message: /request body is empty/ },
      { body: '{}', message: /^invalid message: text: /, issuePath: 'text' },
      { body: '{"text":""}', message: /text: text must not be empty/, issuePath: 'text' },
      { body: '{"text":42}', message: /text: .*expected string/, issuePath: 'text' },
      { body: '{"text":"hi","extra":1}', message: /Unrecognized key: "extra"/ },
      { body: '[1]', message: /invalid message/ },
      { body: JSON.stringify({ text: 'x'.repeat(2000) }), message: /request body is larger than 1024 bytes/ },
    ];
    for (const c of cases) {
      const res = await http(t.socketPath, { method: 'POST', path: '/messages', body: c.body });
      expect(res.status, c.body.slice(0, 40)).toBe(422);
      const body = errorBodySchema.parse(res.json);
      expect(body.code).toBe('invalid_input');
      expect(body.message).toMatch(c.message);
      if (c.issuePath) expect(body.issues?.map((i) => i.path)).toContain(c.issuePath);
    }
    // Nothing was appended and the backend still works.
    expect(await thread(t)).toEqual([]);
    expect((await postMessage(t.socketPath, 'fine')).status).toBe(202);
  });

  it('rejects a chunked body over the limit without a content-length', async () => {
    const t = await start({ maxBodyBytes: 1024 });
    const { request } = await import('node:http');
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ socketPath: t.socketPath, method: 'POST', path: '/messages' }, (r) => {
        let body = '';
        r.on('data', (c: Buffer) => (body += c.toString()));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      for (let i = 0; i < 8; i++) req.write('x'.repeat(512));
      req.end();
    });
    expect(res.status).toBe(422);
    expect(res.body).toContain('larger than 1024 bytes');
  });
});

describe('scripted commands through the backend', () => {
  it('write creates the file and records tool_call, tool_result, assistant, turn_end', async () => {
    const t = await start();
    const client = await connect(t);
    const { lines } = await runTurn(t, client, 'write src/deep/hello.txt hello  world\nsecond line');
    expect(readFileSync(join(t.workspaceDir, 'src/deep/hello.txt'), 'utf8')).toBe('hello  world\nsecond line');
    expect(lines.map((l) => l.kind)).toEqual(['user', 'tool_call', 'tool_result', 'assistant', 'turn_end']);
    expect(lines[1]).toMatchObject({ tool: 'write_file', input: { path: 'src/deep/hello.txt', content: 'hello  world\nsecond line' } });
    expect(lines[2]).toMatchObject({ isError: false, output: 'wrote 24 bytes to src/deep/hello.txt' });
    expect(lines[2]?.kind === 'tool_result' && lines[1]?.kind === 'tool_call' && lines[2].callId === lines[1].callId).toBe(true);
    expect(lines[4]).toMatchObject({ status: 'completed' });
  });

  it('refuses path escapes (.., absolute, through a symlink) and still completes the turn', async () => {
    const t = await start();
    const client = await connect(t);
    const outside = join(t.root, 'outside');
    mkdirSync(outside);
    symlinkSync(outside, join(t.workspaceDir, 'link'));

    const attempts: [string, RegExp][] = [
      ['../x', /contains "\.\."/],
      ['a/../../x', /contains "\.\."/],
      [join(t.root, 'abs.txt'), /is absolute/],
      ['link/x', /is a symlink/],
      ['link', /is a symlink/],
    ];
    for (const [path, why] of attempts) {
      const { lines } = await runTurn(t, client, `write ${path} pwned`);
      const result = lines.find((l) => l.kind === 'tool_result');
      expect(result, path).toMatchObject({ isError: true });
      expect(result?.kind === 'tool_result' && result.output).toMatch(why);
      expect(lines.at(-1)).toMatchObject({ kind: 'turn_end', status: 'completed' });
    }
    expect(existsSync(join(t.root, 'x'))).toBe(false);
    expect(existsSync(join(t.root, 'abs.txt'))).toBe(false);
    expect(existsSync(join(outside, 'x'))).toBe(false);
  });

  it('fail ends the turn failed with an error line, and the next turn works', async () => {
    const t = await start();
    const client = await connect(t);
    const failed = await runTurn(t, client, 'fail');
    expect(failed.lines.map((l) => l.kind)).toEqual(['user', 'error', 'turn_end']);
    expect(failed.lines.at(-1)).toMatchObject({ status: 'failed' });

    const next = await runTurn(t, client, 'again');
    expect(next.lines.at(-1)).toMatchObject({ status: 'completed' });
    expect(next.lines.find((l) => l.kind === 'assistant')).toMatchObject({ text: 'Scripted agent here. You said: "again". (turn 2)' });
  });

  it('a provider that throws fails the turn with an error line; the backend keeps serving', async () => {
    let calls = 0;
    const flaky: Provider = {
      name: 'flaky',
      runTurn: async (_text, ctx) => {
        calls++;
        if (calls === 1) throw new Error('kaboom');
        await ctx.appendLine({ kind: 'assistant', text: 'recovered' });
        return { status: 'completed' };
      },
    };
    const t = await start({ provider: flaky });
    const client = await connect(t);
    const first = await runTurn(t, client, 'go');
    expect(first.lines.map((l) => l.kind)).toEqual(['user', 'error', 'turn_end']);
    expect(first.lines[1]).toMatchObject({ message: 'the flaky provider failed: kaboom' });
    expect(first.lines[2]).toMatchObject({ status: 'failed' });
    expect(t.logs.some((r) => r.level === 'error' && r.msg === 'provider failed')).toBe(true);

    expect((await http(t.socketPath, { path: '/health' })).json).toMatchObject({ ok: true, provider: 'flaky' });
    const second = await runTurn(t, client, 'go again');
    expect(second.lines.map((l) => l.kind)).toEqual(['user', 'assistant', 'turn_end']);
  });

  it('does not let a provider append user or turn_end lines', async () => {
    const sneaky: Provider = {
      name: 'sneaky',
      runTurn: async (_text, ctx) => {
        const forged = { kind: 'turn_end', status: 'completed' } as unknown as Parameters<typeof ctx.appendLine>[0];
        await ctx.appendLine(forged);
        return { status: 'completed' };
      },
    };
    const t = await start({ provider: sneaky });
    const client = await connect(t);
    const { lines } = await runTurn(t, client, 'x');
    expect(lines.map((l) => l.kind)).toEqual(['user', 'error', 'turn_end']);
    expect(lines[1]).toMatchObject({ message: expect.stringMatching(/may not append a turn_end line/) });
  });
});

describe('POST /turn/cancel', () => {
  it('aborts the running turn: 202 {turn}, turn_end cancelled, no assistant line, and the next message runs', async () => {
    const t = await start();
    const client = await connect(t);
    // 8 s in 32 chunks: the first delta comes after 250 ms, the turn would end long after the cancel.
    expect((await postMessage(t.socketPath, 'sleep 8000')).status).toBe(202);
    await client.waitFor((f) => f.type === 'delta');
    const started = Date.now();
    const res = await http(t.socketPath, { method: 'POST', path: '/turn/cancel' });
    expect(res.status, res.text).toBe(202);
    expect(cancelTurnResponseSchema.parse(res.json)).toEqual({ turn: 'turn-1' });
    // A second click while it winds down is not an error.
    const again = await http(t.socketPath, { method: 'POST', path: '/turn/cancel' });
    expect([202, 409]).toContain(again.status);
    await client.waitForTurnEnd('turn-1');
    expect(Date.now() - started).toBeLessThan(2000);

    const lines = (await thread(t)).filter((l) => l.turn === 'turn-1');
    expect(lines.map((l) => l.kind)).toEqual(['user', 'turn_end']);
    expect(lines[1]).toMatchObject({ status: 'cancelled' });
    expect(backendStatusSchema.parse((await http(t.socketPath, { path: '/status' })).json)).toMatchObject({ busy: false, currentTurn: null });
    const { lines: next } = await runTurn(t, client, 'after the stop');
    expect(next.map((l) => l.kind)).toEqual(['user', 'assistant', 'turn_end']);
  });

  it('hands the abort to the provider through its AbortSignal', async () => {
    let seen: unknown = null;
    const waiting: Provider = {
      name: 'scripted',
      runTurn: (_text, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.emitDelta('thinking');
          ctx.signal.addEventListener('abort', () => {
            seen = ctx.signal.reason;
            reject(new Error('aborted'));
          });
        }),
    };
    const t = await start({ provider: waiting });
    const client = await connect(t);
    expect((await postMessage(t.socketPath, 'x')).status).toBe(202);
    await client.waitFor((f) => f.type === 'delta');
    expect((await http(t.socketPath, { method: 'POST', path: '/turn/cancel' })).status).toBe(202);
    await client.waitForTurnEnd('turn-1');
    expect(seen).toMatchObject({ code: 'invalid_state', message: 'the turn was cancelled' });
    // Cancelled, not failed: no error line is written for an abort the user asked for.
    expect((await thread(t)).map((l) => l.kind)).toEqual(['user', 'turn_end']);
  });

  it('answers 409 invalid_state when no turn runs', async () => {
    const t = await start();
    const client = await connect(t);
    const idle = await http(t.socketPath, { method: 'POST', path: '/turn/cancel' });
    expect(idle.status).toBe(409);
    expect(errorBodySchema.parse(idle.json)).toMatchObject({ code: 'invalid_state' });
    await runTurn(t, client, 'quick');
    const after = await http(t.socketPath, { method: 'POST', path: '/turn/cancel' });
    expect(after.status).toBe(409);
    expect(errorBodySchema.parse(after.json)).toMatchObject({ code: 'invalid_state', message: 'no turn is running in this workspace' });
  });
});

describe('backend lifecycle', () => {
  it('close() cancels a running turn, records turn_end cancelled, says goodbye to stream clients and removes the socket', async () => {
    const t = await start();
    const client = await connect(t);
    expect((await postMessage(t.socketPath, 'sleep 60000')).status).toBe(202);
    await client.waitFor((f) => f.type === 'line' && f.line.kind === 'user');
    const closed = client.closed();
    const started = Date.now();
    await t.backend.close();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await closed).toEqual({ code: 1001, reason: 'backend shutting down' });
    expect(existsSync(t.socketPath)).toBe(false);
    const onDisk = readFileSync(join(t.threadDir, 'thread.jsonl'), 'utf8').trim().split('\n').map((l) => threadLineSchema.parse(JSON.parse(l)));
    expect(onDisk.at(-1)).toMatchObject({ kind: 'turn_end', turn: 'turn-1', status: 'cancelled' });
    await t.backend.close(); // idempotent
  });

  it('keeps the thread across restarts, continuing seq and turn numbers', async () => {
    const dirs = await makeDirs();
    const first = await startBackend({ root: dirs.root });
    const c1 = await StreamClient.connect(first.socketPath);
    await runTurn(first, c1, 'first');
    await first.backend.close();

    const second = await start({ root: dirs.root });
    const c2 = await connect(second);
    expect(c2.frames[0]).toEqual({ type: 'hello', lastSeq: 2, busy: false });
    const res = await postMessage(second.socketPath, 'second');
    expect(res.json).toEqual({ turn: 'turn-2', seq: 3 });
    await c2.waitForTurnEnd('turn-2');
    const lines = await thread(second);
    expect(lines.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(lines[4]).toMatchObject({ kind: 'assistant', text: 'Scripted agent here. You said: "second". (turn 2)' });
  });

  it('closes a turn the previous process left open as failed', async () => {
    const dirs = await makeDirs();
    mkdirSync(dirs.threadDir);
    const user = { seq: 0, turn: 'turn-1', at: new Date().toISOString(), kind: 'user', text: 'crashed mid-turn' };
    writeFileSync(join(dirs.threadDir, 'thread.jsonl'), `${JSON.stringify(user)}\n`);
    const t = await start({ root: dirs.root });
    const lines = await thread(t);
    expect(lines.map((l) => [l.seq, l.kind, l.turn])).toEqual([
      [0, 'user', 'turn-1'],
      [1, 'error', 'turn-1'],
      [2, 'turn_end', 'turn-1'],
    ]);
    expect(lines[2]).toMatchObject({ status: 'failed' });
    expect((await postMessage(t.socketPath, 'next')).json).toEqual({ turn: 'turn-2', seq: 3 });
  });

  it('replaces a stale socket file but never a live socket or a regular file', async () => {
    const dirs = await makeDirs();

    // A process killed with SIGKILL leaves its socket file behind.
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(dirs.socketPath)}, () => console.log('up'))`]);
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(existsSync(dirs.socketPath)).toBe(true);
    const t = await start({ root: dirs.root });
    expect((await http(t.socketPath, { path: '/health' })).status).toBe(200);
    expect(t.logs.some((r) => r.msg === 'removed a stale socket file')).toBe(true);
    await t.backend.close();

    const live = createServer();
    await new Promise<void>((resolve) => live.listen(dirs.socketPath, resolve));
    await expect(startBackend({ root: dirs.root })).rejects.toThrow(/another process is already listening/);
    await new Promise((resolve) => live.close(resolve));

    writeFileSync(dirs.socketPath, 'not a socket');
    await expect(startBackend({ root: dirs.root })).rejects.toThrow(/exists and is not a socket/);
    expect(readFileSync(dirs.socketPath, 'utf8')).toBe('not a socket');
  });
});
