// The bounds of the host's sandbox-facing listeners (host.sock, provider.sock), in process on real Unix sockets
// with short limits. The same attacks from inside a real sandbox: host-services.docker.test.ts.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HostServices } from './host-services.ts';
import type { HostServicesOptions } from './host-services.ts';
import type { ListenerLimits } from '@grove/egress';
import { startFakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';
import type { FakeAnthropic } from '../../egress/src/test-support/fake-anthropic.ts';

let dir: string;
let fake: FakeAnthropic;
const open: HostServices[] = [];
const clients = new Set<Socket>();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'grove-limits-'));
  fake = await startFakeAnthropic();
});
afterEach(async () => {
  for (const c of clients) c.destroy();
  clients.clear();
  await Promise.all(open.splice(0).map((h) => h.closeAll()));
});
afterAll(async () => {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

const SHORT: ListenerLimits = { maxConnections: 8, maxInFlight: 2, headersTimeoutMs: 300, requestTimeoutMs: 600, idleTimeoutMs: 300 };

/** Warn lines of the services' logger, parsed. */
function capture(): { logger: pino.Logger; warnings: Array<{ msg: string; listener?: string }> } {
  const warnings: Array<{ msg: string; listener?: string }> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        const entry = JSON.parse(line) as { level: number; msg: string; listener?: string };
        if (entry.level === 40) warnings.push(entry);
      }
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, sink), warnings };
}

let n = 0;
async function services(over: Partial<HostServicesOptions> = {}): Promise<{ host: HostServices; run: string; warnings: Array<{ msg: string; listener?: string }> }> {
  const run = join(dir, `run-${++n}`);
  mkdirSync(run);
  const { logger, warnings } = capture();
  const host = new HostServices({
    logger,
    runDir: () => run,
    onTurnEnded: async () => ({ events: [] }),
    hookLimits: SHORT,
    providerRelay: { upstream: new URL(fake.url), apiKey: 'sk-host', limits: SHORT },
    ...over,
  });
  open.push(host);
  await host.ensure('demo');
  return { host, run, warnings };
}

/** A raw connection; resolves once connected, with what the server sent and whether it closed. */
function raw(path: string): Promise<{ socket: Socket; got: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    clients.add(socket);
    let got = '';
    let onClose: () => void = () => undefined;
    const closed = new Promise<void>((r) => (onClose = r));
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => onClose());
    socket.once('connect', () => resolve({ socket, got: () => got, closed }));
    socket.once('error', reject);
  });
}

function post(path: string, url: string, body: unknown, agent = false): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = request({ socketPath: path, path: url, method: 'POST', agent: agent ? undefined : false, headers: { 'content-type': 'application/json' } }, (res) => {
      let out = '';
      res.on('data', (d: Buffer) => (out += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: out }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms))]);

describe.each(['host.sock', 'provider.sock'] as const)('%s', (sock) => {
  it('holds at most maxConnections: the ones over it are closed at once, logged once per window', async () => {
    const { run, warnings } = await services();
    const path = join(run, sock);
    const conns = await Promise.all(Array.from({ length: 40 }, () => raw(path)));
    // Over the cap Node closes the connection without reading it; the first 8 stay open.
    await within(Promise.all(conns.slice(8).map((c) => c.closed)), 2_000, 'connections over the cap');
    const open = conns.filter((c) => !c.socket.destroyed);
    expect(open.length).toBe(8);
    expect(warnings.filter((w) => w.msg.includes('connections, new ones closed'))).toHaveLength(1);
    // The cap is per listener: the workspace's other socket still answers.
    const other = sock === 'host.sock' ? 'provider.sock' : 'host.sock';
    const r = other === 'host.sock' ? await post(join(run, other), '/turn-ended', { turn: 't', status: 'completed' }) : await post(join(run, other), '/v1/messages/count_tokens', {});
    expect(r.status).toBe(200);
  });

  it('closes a connection that sends no head, half a head, or drips its body, at the deadline', async () => {
    const { run } = await services();
    const path = join(run, sock);
    const silent = await raw(path);
    const half = await raw(path);
    half.socket.write('POST /turn-ended HTTP/1.1\r\nHost: x\r\n');
    const drip = await raw(path);
    const target = sock === 'host.sock' ? '/turn-ended' : '/v1/messages';
    drip.socket.write(`POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{`);
    const t = setInterval(() => drip.socket.writable && drip.socket.write(' '), 50);
    try {
      // Deadlines of 300 and 600 ms; without them these connections would stay for good.
      await within(Promise.all([silent.closed, half.closed, drip.closed]), 5_000, 'stalled connections');
    } finally {
      clearInterval(t);
    }
    for (const c of [silent, half, drip]) expect(c.got()).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(drip.got().slice(drip.got().indexOf('\r\n\r\n') + 4))).toMatchObject({ rule: 'request-timeout' });
  });

  it('closes a kept-alive connection idle past the idle timeout', async () => {
    const { run } = await services();
    const c = await raw(join(run, sock));
    const body = '{"turn":"t","status":"completed"}';
    const target = sock === 'host.sock' ? '/turn-ended' : '/v1/messages/count_tokens';
    c.socket.write(`POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await within(c.closed, 5_000, 'idle kept-alive connection');
    expect(c.got()).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('requests in flight', () => {
  it('host.sock refuses a third concurrent turn report with 429, and the long after-turn work is not cut by the request deadline', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let started = 0;
    const { run } = await services({
      onTurnEnded: async () => {
        started++;
        await gate;
        return { events: [] };
      },
    });
    const path = join(run, 'host.sock');
    const first = post(path, '/turn-ended', { turn: 't1', status: 'completed' });
    const second = post(path, '/turn-ended', { turn: 't2', status: 'completed' });
    while (started < 2) await new Promise((r) => setTimeout(r, 10));
    const third = await post(path, '/turn-ended', { turn: 't3', status: 'completed' });
    expect(third.status).toBe(429);
    expect(JSON.parse(third.text)).toMatchObject({ code: 'capacity_reached' });
    // Held past requestTimeoutMs (600 ms): the deadline is on receiving the request, not on the answer.
    await new Promise((r) => setTimeout(r, 900));
    release();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(started).toBe(2);
  });

  it('provider.sock refuses a request over maxInFlight with 429 naming the rule, while streams run', async () => {
    const records: string[] = [];
    const { run } = await services({ providerRelay: { upstream: new URL(fake.url), apiKey: 'sk-host', limits: SHORT, onRequest: (r) => records.push(`${r.status} ${r.rule ?? ''}`) } });
    const path = join(run, 'provider.sock');
    // Two endless streams (the fake's "slow" model), held open.
    const streams = await Promise.all(
      [0, 1].map(async () => {
        const c = await raw(path);
        const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'slow' }] });
        c.socket.write(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        return c;
      }),
    );
    const deadline = Date.now() + 5_000;
    while (!streams.every((s) => s.got().includes('tick'))) {
      if (Date.now() > deadline) throw new Error('the streams did not start');
      await new Promise((r) => setTimeout(r, 20));
    }
    const third = await post(path, '/v1/messages/count_tokens', {});
    expect(third.status).toBe(429);
    expect(JSON.parse(third.text)).toMatchObject({ code: 'egress_limit', rule: 'in-flight-limit' });
    expect(records).toContain('429 in-flight-limit');
    for (const s of streams) s.socket.destroy();
    // Once they are gone, there is room again.
    await new Promise((r) => setTimeout(r, 100));
    expect((await post(path, '/v1/messages/count_tokens', {})).status).toBe(200);
  });
});

describe('host.sock body', () => {
  it('refuses a declared body over 64 KiB with 413 without reading it', async () => {
    const calls: string[] = [];
    const { run } = await services({ onTurnEnded: async (_s, r) => (calls.push(r.turn), { events: [] }) });
    const c = await raw(join(run, 'host.sock'));
    c.socket.write(`POST /turn-ended HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1 << 30}\r\n\r\n{`);
    await within(c.closed, 5_000, 'oversized report');
    expect(c.got()).toMatch(/^HTTP\/1\.1 413 /);
    expect(calls).toEqual([]);
  });
});
