// The backend's side of the host seam: the after-turn hook on host.sock, POST /hold and POST /notes.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { holdResponseSchema, postMessageResponseSchema, threadResponseSchema, turnEndedRequestSchema } from '@grove/contracts';
import type { GroveThreadEvent, ThreadLine, TurnEndedRequest } from '@grove/contracts';
import { StreamClient, http, makeDirs, postMessage, startBackend } from './test-support.ts';
import type { TestBackend } from './test-support.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface FakeHost {
  calls: TurnEndedRequest[];
  /** What the next answers are; a function runs when the request arrives. */
  answer: (req: TurnEndedRequest) => Promise<{ status: number; body: unknown }>;
}

async function fakeHost(socketPath: string): Promise<FakeHost> {
  const host: FakeHost = { calls: [], answer: async () => ({ status: 200, body: { events: [] } }) };
  const server: Server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      const body = turnEndedRequestSchema.parse(JSON.parse(text));
      host.calls.push(body);
      void host.answer(body).then(({ status, body: out }) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(out));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return host;
}

async function start(opts: { hook?: boolean; hookTimeoutMs?: number } = {}): Promise<{ t: TestBackend; client: StreamClient; hookSocket: string }> {
  const dirs = await makeDirs();
  const hookSocket = join(dirs.root, 'host.sock');
  const t = await startBackend({ root: dirs.root, hostHookSocket: opts.hook === false ? undefined : hookSocket, hostHookTimeoutMs: opts.hookTimeoutMs });
  cleanups.push(t.dispose);
  const client = await StreamClient.connect(t.socketPath);
  cleanups.push(async () => client.close());
  return { t, client, hookSocket };
}

async function lines(t: TestBackend): Promise<ThreadLine[]> {
  return threadResponseSchema.parse((await http(t.socketPath, { path: '/thread' })).json).lines;
}

async function post(t: TestBackend, text: string): Promise<string> {
  const res = await postMessage(t.socketPath, text);
  expect(res.status, res.text).toBe(202);
  return postMessageResponseSchema.parse(res.json).turn;
}

const reverted: GroveThreadEvent = { type: 'paths_reverted', allowedPaths: ['src/**'], paths: [{ path: 'secret.txt', action: 'removed' }] };

describe('after-turn hook', () => {
  it('asks the host before turn_end, keeps the workspace busy meanwhile, and records what the host did', async () => {
    const { t, client, hookSocket } = await start();
    const host = await fakeHost(hookSocket);
    let release = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    host.answer = async () => {
      await released;
      return { status: 200, body: { events: [reverted] } };
    };
    const turn = await post(t, 'write secret.txt x');
    while (host.calls.length === 0) await delay(10);
    expect(host.calls).toEqual([{ turn, status: 'completed', waitingForUser: true }]);
    // The agent is done but the host is still checking: no new turn may start yet.
    expect((await postMessage(t.socketPath, 'next')).status).toBe(409);
    release();
    await client.waitForTurnEnd(turn);
    const mine = (await lines(t)).filter((l) => l.turn === turn);
    expect(mine.slice(-2)).toEqual([
      expect.objectContaining({ kind: 'raw', provider: 'grove', event: reverted }),
      expect.objectContaining({ kind: 'turn_end', status: 'completed' }),
    ]);
    expect((await postMessage(t.socketPath, 'next')).status).toBe(202);
  });

  it('tells the host about failed and cancelled turns too', async () => {
    const { t, client, hookSocket } = await start();
    const host = await fakeHost(hookSocket);
    await client.waitForTurnEnd(await post(t, 'fail'));
    const slow = await post(t, 'sleep 5000');
    await client.waitFor((f) => f.type === 'delta' && f.turn === slow);
    await http(t.socketPath, { method: 'POST', path: '/turn/cancel' });
    await client.waitForTurnEnd(slow);
    expect(host.calls.map((c) => c.status)).toEqual(['failed', 'cancelled']);
    // A failed turn carries its error line's message, so the dashboard can say why without reading the thread.
    expect(host.calls[0]).toEqual({ turn: expect.any(String), status: 'failed', error: expect.stringContaining('Scripted failure, as requested.'), waitingForUser: false });
    expect(host.calls[1]).toEqual({ turn: slow, status: 'cancelled', waitingForUser: false });
  });

  it('reports a turn cut by the backend shutting down as such, and still closes when the host never answers', async () => {
    const { t, client, hookSocket } = await start();
    const host = await fakeHost(hookSocket);
    const slow = await post(t, 'sleep 20000');
    await client.waitFor((f) => f.type === 'delta' && f.turn === slow);
    // A host that never answers: the stop must not hang on it.
    host.answer = () => new Promise(() => {});
    await t.dispose();
    expect(host.calls).toEqual([{ turn: slow, status: 'cancelled', waitingForUser: false, shutdown: true }]);
  });

  it('records that the host did not answer, and the turn still ends', async () => {
    const { t, client, hookSocket } = await start({ hookTimeoutMs: 300 });
    const host = await fakeHost(hookSocket);
    host.answer = async () => ({ status: 500, body: { code: 'internal', message: 'boom' } });
    const first = await post(t, 'hello');
    await client.waitForTurnEnd(first);
    expect((await lines(t)).filter((l) => l.turn === first).at(-2)).toMatchObject({ provider: 'grove', event: { type: 'host_unavailable', message: expect.stringContaining('500') } });
    host.answer = () => new Promise(() => {}); // never answers
    const second = await post(t, 'hello');
    await client.waitForTurnEnd(second);
    expect((await lines(t)).filter((l) => l.turn === second).at(-2)).toMatchObject({ event: { type: 'host_unavailable', message: expect.stringContaining('within 300 ms') } });
  });

  it('skips the hook quietly when no host listens (no socket file)', async () => {
    const { t, client } = await start();
    const turn = await post(t, 'hello');
    await client.waitForTurnEnd(turn);
    expect((await lines(t)).some((l) => l.kind === 'raw')).toBe(false);
  });
});

describe('POST /hold and /notes', () => {
  it('holds off new turns until released or expired, and refuses to hold a running turn', async () => {
    const { t, client } = await start({ hook: false });
    const held = await http(t.socketPath, { method: 'POST', path: '/hold', body: { reason: 'undo in progress', ttlMs: 60_000 } });
    expect(held.status).toBe(200);
    const { hold } = holdResponseSchema.parse(held.json);
    const refused = await postMessage(t.socketPath, 'hi');
    expect(refused.status).toBe(409);
    expect(refused.json).toMatchObject({ code: 'invalid_state', message: expect.stringContaining('undo in progress') });
    expect((await http(t.socketPath, { method: 'POST', path: '/hold', body: { reason: 'again', ttlMs: 1000 } })).status).toBe(409);
    expect((await http(t.socketPath, { method: 'POST', path: '/hold/release', body: { hold: 'not-mine' } })).json).toEqual({ released: false });
    expect((await http(t.socketPath, { method: 'POST', path: '/hold/release', body: { hold } })).json).toEqual({ released: true });
    const turn = await post(t, 'sleep 300');
    expect((await http(t.socketPath, { method: 'POST', path: '/hold', body: { reason: 'undo', ttlMs: 1000 } })).status).toBe(409);
    await client.waitForTurnEnd(turn);
    // A host that died while holding does not wedge the workspace: the hold expires.
    expect((await http(t.socketPath, { method: 'POST', path: '/hold', body: { reason: 'short', ttlMs: 100 } })).status).toBe(200);
    await delay(150);
    expect((await postMessage(t.socketPath, 'hi')).status).toBe(202);
  });

  it('appends a grove note to the thread, validated', async () => {
    const { t } = await start({ hook: false });
    const event: GroveThreadEvent = { type: 'undo', undoneTurn: 'turn-1', ref: 'refs/grove/demo+test/turns/1', restored: 'abc', files: ['a.txt'] };
    const res = await http(t.socketPath, { method: 'POST', path: '/notes', body: { turn: 'turn-1', event } });
    expect(res.status).toBe(201);
    expect((await lines(t)).at(-1)).toMatchObject({ kind: 'raw', turn: 'turn-1', provider: 'grove', event });
    expect((await http(t.socketPath, { method: 'POST', path: '/notes', body: { turn: 'turn-1', event: { type: 'made_up' } } })).status).toBe(422);
  });
});
