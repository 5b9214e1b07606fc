// The proxy's connections to backends, over real Unix sockets and a real front server: pooled connections never
// outlive the socket they were made to, and a backend that takes a request and never answers gets a deadline.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { ERROR_STATUS } from '@grove/contracts';
import { sendError } from './errors.ts';
import { createWorkspaceProxy, parseProxyPath, rejectUpgrade, scrubWorkspaceResponse } from './proxy.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-proxy-'));
const logger = pino({ level: 'silent' });
const sock = (slug: string) => path.join(dir, `${slug}.sock`);
// Short, so the tests do not wait a minute; what is asserted is the answer, not how long it took.
const ANSWER_TIMEOUT_MS = 150;
// Likewise short: idle pooled connections are retired after this.
const UPSTREAM_IDLE_MS = 200;
const proxy = createWorkspaceProxy({
  grove: { socketFor: async (slug: string) => sock(slug) } as unknown as Grove,
  logger,
  onResponseHeaders: scrubWorkspaceResponse,
  answerTimeoutMs: ANSWER_TIMEOUT_MS,
  upstreamIdleMs: UPSTREAM_IDLE_MS,
});
let front: http.Server;
let base: string;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  front = http.createServer((req, res) => {
    const run = async () => {
      const t = parseProxyPath(req.url ?? '/');
      if (!t) throw new Error('not a proxy path');
      await proxy.web(req, res, t);
    };
    run().catch((err: unknown) => sendError(res, err, logger));
  });
  front.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const t = parseProxyPath(req.url ?? '/');
    if (t) proxy.ws(req, socket, head, t).catch((err: unknown) => rejectUpgrade(socket, err, logger));
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(front.address() as net.AddressInfo).port}`;
});

afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

afterAll(async () => {
  proxy.close();
  front.closeAllConnections();
  await new Promise((r) => front.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** One kept-alive client connection, so a stale or half-read upstream would show in the next answer on it. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function request(p: string, o: { method?: string; body?: string } = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${p}`, { agent, method: o.method ?? 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

/** An HTTP backend on a Unix socket that answers `answer`, keeps connections alive and counts them. */
async function backend(file: string, answer: string) {
  const open = new Set<net.Socket>();
  let hits = 0;
  let emptied: (() => void) | null = null;
  const server = http.createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => res.end(answer));
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s) => {
    open.add(s);
    s.on('close', () => {
      open.delete(s);
      if (open.size === 0) emptied?.();
    });
  });
  await new Promise<void>((r) => server.listen(file, r));
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    hits: () => hits,
    open: () => open.size,
    /** Resolves once every connection to this backend has closed. */
    allClosed: () => new Promise<void>((r) => (open.size === 0 ? r() : (emptied = r))),
  };
}

describe('the upstream pools', () => {
  it('drop their idle connections to a backend.sock that was replaced: the next requests reach the new backend, never a stale socket', async () => {
    const file = sock('demo~swap');
    const first = await backend(file, 'first');
    // One body-less request (the lean pool) and one with a body (node's agent): both leave a kept-alive connection.
    expect((await request('/w/demo~swap/a')).body).toBe('first');
    expect((await request('/w/demo~swap/b', { method: 'POST', body: 'x' })).body).toBe('first');
    expect(first.open()).toBeGreaterThan(0);

    // A new backend at the same path while the first still listens on its (now unlinked) socket and holds the
    // proxy's idle connections: what a restarted backend looks like.
    fs.rmSync(file);
    const second = await backend(file, 'second');
    for (let i = 0; i < 3; i++) {
      expect((await request('/w/demo~swap/a')).body).toBe('second');
      expect((await request('/w/demo~swap/b', { method: 'POST', body: 'x' })).body).toBe('second');
    }
    expect([first.hits(), second.hits()]).toEqual([2, 6]);
    // The proxy closed the connections to the first socket rather than keeping them idle.
    await first.allClosed();
    expect(first.open()).toBe(0);
  });

  it('retire idle connections before the backend closes them: a message sent after a quiet spell is answered, not lost', async () => {
    const file = sock('demo~quiet');
    // This backend closes a connection that was quiet for longer than the proxy's idle limit the moment the next
    // request arrives on it, unanswered: the race a keep-alive timeout loses against a request written in the same
    // instant, made certain. A request with a body cannot be sent again, so the proxy must not have kept it.
    const answeredAt = new WeakMap<net.Socket, number>();
    let connections = 0;
    const server = http.createServer((req, res) => {
      const at = answeredAt.get(req.socket);
      if (at !== undefined && Date.now() - at > UPSTREAM_IDLE_MS + 100) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on('end', () => res.end('ok', () => answeredAt.set(req.socket, Date.now())));
    });
    server.keepAliveTimeout = 60_000;
    server.on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(file, r));
    cleanups.push(() => {
      server.closeAllConnections();
      server.close();
    });

    const both = async () => {
      const post = await request('/w/demo~quiet/messages', { method: 'POST', body: '{"text":"hi"}' });
      const get = await request('/w/demo~quiet/status');
      return [post.status, post.body, get.status, get.body];
    };
    expect(await both()).toEqual([200, 'ok', 200, 'ok']);
    const before = connections;
    await new Promise((r) => setTimeout(r, UPSTREAM_IDLE_MS + 300));
    expect(await both()).toEqual([200, 'ok', 200, 'ok']);
    // New connections, because the pooled ones had been retired, not reused.
    expect(connections).toBeGreaterThan(before);
  });
});

/** A backend that accepts connections and reads requests but never answers; it tells when the proxy closes on it. */
async function silent(file: string) {
  const arrived: string[] = [];
  const closed: Array<Promise<void>> = [];
  const server = net.createServer((s) => {
    closed.push(new Promise<void>((r) => s.on('close', () => r())));
    s.on('data', (d: Buffer) => arrived.push(d.toString('latin1').split('\r\n')[0] ?? ''));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(file, r));
  cleanups.push(() => server.close());
  return { arrived, closed };
}

describe('a backend that takes a request and never answers', () => {
  it(`gets a deadline: the client gets ${ERROR_STATUS.backend_timeout} backend_timeout, the connection to the backend is closed, and the client connection serves the next request`, async () => {
    const hung = await silent(sock('demo~hung'));
    await backend(sock('demo~fine'), 'fine');
    for (const o of [{}, { method: 'POST', body: '{"text":"hi"}' }]) {
      const r = await request('/w/demo~hung/status', o);
      expect(r.status).toBe(504);
      expect(JSON.parse(r.body)).toMatchObject({ code: 'backend_timeout', message: expect.stringContaining('did not answer') as string });
      // Grove's own error, not a backend's answer: nothing of the hung connection reaches the client.
      expect(r.headers['content-type']).toContain('application/json');
    }
    expect(hung.arrived.filter((l) => l.startsWith('GET /status') || l.startsWith('POST /status'))).toHaveLength(2);
    // Neither attempt was retried on another connection, and every connection to the silent backend was closed.
    expect(hung.closed).toHaveLength(2);
    await Promise.all(hung.closed);
    // The client's kept-alive connection is fine for the next request, to another workspace.
    expect((await request('/w/demo~fine/x')).body).toBe('fine');
  });

  it('does not cut an answer that started in time, however long its body takes', async () => {
    const file = sock('demo~slowbody');
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('head ');
      // The rest comes well after the deadline would have fired had it still been running.
      setTimeout(() => res.end('and body'), ANSWER_TIMEOUT_MS * 3);
    });
    await new Promise<void>((r) => server.listen(file, r));
    cleanups.push(() => server.close());
    const r = await request('/w/demo~slowbody/x');
    expect([r.status, r.body]).toEqual([200, 'head and body']);
  });

  it('refuses a WebSocket upgrade the backend never answers with 504 backend_timeout', async () => {
    const hung = await silent(sock('demo~hungws'));
    const status = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${base}/w/demo~hungws/stream`, { agent: false, headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
      req.on('upgrade', () => reject(new Error('upgraded')));
      req.on('response', (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(status.status).toBe(504);
    expect(JSON.parse(status.body)).toMatchObject({ code: 'backend_timeout' });
    await Promise.all(hung.closed);
    expect(hung.closed).toHaveLength(1);
  });
});
