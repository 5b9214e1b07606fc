// The fast lane: its strict head parser on its own, then two real front doors (lane on and off) before one real
// backend on a Unix socket, compared answer by answer, and raw TCP connections that mix what the lane answers
// with what it must give to node (bodies, upgrades, heads it does not trust), pipelined.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { GroveError } from '@grove/contracts';
import { parseLaneHead } from './lane.ts';
import { createGroveServer, type GroveServer } from './server.ts';

const TOKEN = 'lane-token-0123456789abcdef';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-lane-'));
const sock = path.join(dir, 'backend.sock');
/** A second workspace's socket, which a test replaces. */
const swapSock = path.join(dir, 'swap.sock');
const fakeSocket = new net.Socket();

describe('the lane head parser', () => {
  const head = (...lines: string[]) => parseLaneHead(lines.join('\r\n'), fakeSocket);
  it('takes a plain GET or HEAD under /w/ with a Host', () => {
    expect(head('GET /w/demo/status HTTP/1.1', 'Host: a', 'Cookie: grove_token=x')).toMatchObject({ method: 'GET', url: '/w/demo/status', headers: { host: 'a', cookie: 'grove_token=x' } });
    expect(head('HEAD /w/demo/ HTTP/1.1', 'host:  a  ', 'Connection: keep-alive')).toMatchObject({ method: 'HEAD', headers: { host: 'a', connection: 'keep-alive' }, close: false });
    expect(head('GET /w/demo/ HTTP/1.1', 'Host: a', 'Connection: close')).toMatchObject({ close: true });
  });
  it.each([
    ['another method', ['POST /w/demo/ HTTP/1.1', 'Host: a']],
    ['OPTIONS', ['OPTIONS /w/demo/ HTTP/1.1', 'Host: a']],
    ['HTTP/1.0', ['GET /w/demo/ HTTP/1.0', 'Host: a']],
    ['absolute form', ['GET http://a/w/demo/ HTTP/1.1', 'Host: a']],
    ['a path outside /w/', ['GET /api/workspaces HTTP/1.1', 'Host: a']],
    ['a space in the target', ['GET /w/demo/a b HTTP/1.1', 'Host: a']],
    ['no Host', ['GET /w/demo/ HTTP/1.1']],
    ['Host twice', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Host: b']],
    ['a header twice in other cases', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Authorization: Bearer x', 'authorization: Bearer y']],
    ['a Content-Length, even 0', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Content-Length: 0']],
    ['Transfer-Encoding', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Transfer-Encoding: chunked']],
    ['an upgrade', ['GET /w/demo/stream HTTP/1.1', 'Host: a', 'Connection: Upgrade', 'Upgrade: websocket']],
    ['another Connection', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Connection: keep-alive, x-a']],
    ['Expect', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'Expect: 100-continue']],
    ['a folded line', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'X-A: b', ' c']],
    ['a space before the colon', ['GET /w/demo/ HTTP/1.1', 'Host : a']],
    ['a line without a colon', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'nonsense']],
    ['a bare CR in a value', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'X-A: b\rContent-Length: 5']],
    ['a bare LF in a value', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'X-A: b\nContent-Length: 5']],
    ['a NUL in a value', ['GET /w/demo/ HTTP/1.1', 'Host: a', 'X-A: b\0']],
    ['a head over 16 KiB', ['GET /w/demo/ HTTP/1.1', 'Host: a', `X-A: ${'b'.repeat(17 * 1024)}`]],
  ])('leaves to node: %s', (_what, lines) => {
    expect(head(...lines)).toBeNull();
  });
});

const grove = {
  socketFor: async (slug: string) => {
    if (slug === 'demo') return sock;
    if (slug === 'swap') return swapSock;
    throw new GroveError('workspace_not_found', `no workspace "${slug}"`);
  },
} as unknown as Grove;

let backend: http.Server;
let lane: GroveServer;
let plain: GroveServer;
let laneBase: string;
let plainBase: string;
let lanePort: number;
/** What the backend saw, one line per request: method, path and body. */
const seen: string[] = [];
let closedMidAnswer = 0;
/** The second backend, and how many connections it took. */
let swapBackend: http.Server;
let swapConnections = 0;

beforeAll(async () => {
  backend = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      seen.push(`${req.method} ${req.url} ${body}`);
      if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': 'grove_token=shadow' });
        res.write('one,');
        setTimeout(() => res.end('two'), 10);
        return;
      }
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 256 * 1024 });
        res.end(Buffer.alloc(256 * 1024, 7));
        return;
      }
      if (req.url === '/endless') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        const t = setInterval(() => res.write('x'.repeat(1024)), 5);
        res.on('close', () => {
          clearInterval(t);
          closedMidAnswer++;
        });
        return;
      }
      if (req.url === '/control') {
        // A control character node's parser lets through in a value and node's writeHead refuses.
        res.socket?.end('HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok');
        return;
      }
      if (req.url === '/headers') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(req.headers));
        return;
      }
      if (req.url === '/nothing') {
        res.writeHead(204);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-backend': 'yes' });
      res.end(JSON.stringify({ method: req.method, url: req.url, body, cookie: req.headers.cookie ?? null, auth: req.headers.authorization ?? null, prefix: req.headers['x-forwarded-prefix'] }));
    });
  });
  const wss = new WebSocketServer({ noServer: true });
  wss.on('connection', (s, req) => s.send(`hello ${req.url}`));
  backend.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => wss.handleUpgrade(req, socket, head, (w) => wss.emit('connection', w, req)));
  await new Promise<void>((r) => backend.listen(sock, r));
  swapBackend = http.createServer((req, res) => res.end(`swap ${req.url}`));
  swapBackend.on('connection', () => swapConnections++);
  await new Promise<void>((r) => swapBackend.listen(swapSock, r));
  const logger = pino({ level: 'silent' });
  lane = createGroveServer({ grove, logger, token: TOKEN });
  plain = createGroveServer({ grove, logger, token: TOKEN, fastLane: false });
  lanePort = await lane.listen(0, '127.0.0.1');
  laneBase = `http://127.0.0.1:${lanePort}`;
  plainBase = `http://127.0.0.1:${await plain.listen(0, '127.0.0.1')}`;
});

afterAll(async () => {
  await lane.close();
  await plain.close();
  swapBackend.closeAllConnections();
  await new Promise((r) => swapBackend.close(r));
  backend.closeAllConnections();
  await new Promise((r) => backend.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}` };

/** One request on a fresh connection; the answer's headers without the ones that differ by the second. */
async function get(base: string, p: string, init: RequestInit = {}): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const r = await fetch(`${base}${p}`, { ...init, headers: { ...auth, ...(init.headers as Record<string, string> | undefined) } });
  const headers = Object.fromEntries([...r.headers].filter(([k]) => k !== 'date'));
  return { status: r.status, headers, body: await r.text() };
}

/** Write `text` on one raw connection and read until `done` says the answers are all there (or the peer closes). */
function raw(text: string, done: (got: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(lanePort, '127.0.0.1');
    let got = '';
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error(`no full answer; got ${JSON.stringify(got.slice(0, 2000))}`));
    }, 5_000);
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      got += d;
      if (done(got)) {
        clearTimeout(t);
        s.destroy();
        resolve(got);
      }
    });
    s.on('close', () => {
      clearTimeout(t);
      resolve(got);
    });
    s.on('error', reject);
    s.write(text);
  });
}
const count = (text: string, what: string) => text.split(what).length - 1;
/** The answers here are chunked (the backend writes its head before its body): each ends with the last chunk. */
const answers = (text: string) => count(text, '\r\n0\r\n\r\n');

describe('the fast lane in front of a backend', () => {
  it('answers as node would, with the same headers, the scrub and the front door headers included', async () => {
    for (const p of ['/w/demo/status?x=1', '/w/demo/chunked', '/w/demo/big', '/w/demo/nothing']) {
      const before = lane.lane?.served ?? 0;
      const [a, b] = [await get(laneBase, p), await get(plainBase, p)];
      expect(a).toEqual(b);
      expect([p, (lane.lane?.served ?? 0) - before]).toEqual([p, 1]);
    }
    // An answer node would refuse to write is refused alike: 502, never passed on.
    const [bad, badPlain] = [await get(laneBase, '/w/demo/control'), await get(plainBase, '/w/demo/control')];
    expect(bad.status).toBe(502);
    expect(bad.status).toBe(badPlain.status);
    const before = lane.lane?.served ?? 0;
    const head = await fetch(`${laneBase}/w/demo/big`, { method: 'HEAD', headers: auth });
    expect([head.status, head.headers.get('content-length'), await head.text()]).toEqual([200, String(256 * 1024), '']);
    // Each of them went the lane's way; the backend saw neither the token nor the cookie.
    expect((lane.lane?.served ?? 0) - before).toBe(1);
    const status = JSON.parse((await get(laneBase, '/w/demo/status', { headers: { cookie: `grove_token=${TOKEN}; app=1` } })).body) as Record<string, unknown>;
    expect(status).toMatchObject({ url: '/status', auth: null, cookie: 'app=1', prefix: '/w/demo' });
    const chunked = await get(laneBase, '/w/demo/chunked');
    expect([chunked.body, chunked.headers['set-cookie'], chunked.headers['x-frame-options']]).toEqual(['one,two', undefined, 'DENY']);
  });

  it('sends the backend the same request head as node’s path: no token, no Grove cookie, the x-forwarded-* set', async () => {
    const headers = { cookie: `a=1; grove_token=${TOKEN}; b=2`, 'x-forwarded-for': '10.9.8.7', 'x-forwarded-host': 'evil', 'x-forwarded-prefix': '/evil', 'x-forwarded-proto': 'https', 'x-custom': 'kept' };
    const [a, b] = [await get(laneBase, '/w/demo/headers', { headers }), await get(plainBase, '/w/demo/headers', { headers })];
    const [fromLane, fromNode] = [JSON.parse(a.body) as Record<string, string>, JSON.parse(b.body) as Record<string, string>];
    // The two front doors listen on different ports: the Host (and so x-forwarded-host) differs by that alone.
    const port = (h: Record<string, string>) => ({ ...h, host: h.host?.replace(/:\d+$/, ''), 'x-forwarded-host': h['x-forwarded-host']?.replace(/:\d+$/, '') });
    expect(port(fromLane)).toEqual(port(fromNode));
    expect(fromLane).toMatchObject({ cookie: 'a=1; b=2', 'x-forwarded-for': '10.9.8.7, 127.0.0.1', 'x-forwarded-prefix': '/w/demo', 'x-forwarded-proto': 'http', 'x-custom': 'kept' });
    expect(fromLane.authorization).toBeUndefined();
    expect(fromLane['x-forwarded-host']).toBe(fromLane.host);
    // Only the token's cookie: nothing is left to send.
    const only = JSON.parse((await get(laneBase, '/w/demo/headers', { headers: { cookie: `grove_token=${TOKEN}` } })).body) as Record<string, string>;
    expect(only.cookie).toBeUndefined();
  });

  it('passes a header value’s bytes through as they came, on both paths (UTF-8 in a header is not encoded twice)', async () => {
    // A client sending a file name in UTF-8: the bytes c3 a9 ("é"), which node's parser reads as two latin1 chars.
    const sent = Buffer.from('café', 'utf8').toString('latin1');
    for (const base of [laneBase, plainBase]) {
      const h = JSON.parse((await get(base, '/w/demo/headers', { headers: { 'x-name': sent } })).body) as Record<string, string>;
      expect([base, Buffer.from(h['x-name'] ?? '', 'latin1').toString('utf8')]).toEqual([base, 'café']);
    }
  });

  it('keeps one backend connection per client connection, and checks the socket each time it opens one', async () => {
    // Three requests on one client connection reach the backend over one connection of its own.
    const before = swapConnections;
    const one = (p: string) => `GET /w/swap/${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
    const out = await raw(one('a') + one('b') + one('c'), (got) => got.includes('swap /c'));
    expect([out.includes('swap /a'), out.includes('swap /b'), swapConnections - before]).toEqual([true, true, 1]);
    // A client connection that keeps its backend connection across a swap of the file at the socket's path…
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const viaAgent = (p: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        http
          .get(`${laneBase}/w/swap${p}`, { agent, headers: auth }, (r) => {
            let body = '';
            r.setEncoding('utf8');
            r.on('data', (d: string) => (body += d));
            r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
          })
          .on('error', reject);
      });
    expect(await viaAgent('/before')).toEqual({ status: 200, body: 'swap /before' });
    fs.renameSync(swapSock, `${swapSock}.moved`);
    fs.writeFileSync(swapSock, 'not a socket');
    try {
      // …goes on reaching the backend it was opened to (checked then); a new one is checked, and refused, as on node's path.
      expect(await viaAgent('/after')).toEqual({ status: 200, body: 'swap /after' });
      const [fresh, freshPlain] = [await get(laneBase, '/w/swap/x'), await get(plainBase, '/w/swap/x')];
      expect(fresh.status).toBe(502);
      expect(fresh).toEqual(freshPlain);
    } finally {
      agent.destroy();
      fs.rmSync(swapSock);
      fs.renameSync(`${swapSock}.moved`, swapSock);
    }
  });

  it('gives node what it must answer itself: no token, no such workspace, a bad slug, a host-only route', async () => {
    for (const [p, headers] of [
      ['/w/demo/status', { authorization: 'Bearer wrong' }],
      ['/w/nope/status', {}],
      ['/w/Bad%20Slug/status', {}],
      ['/w/demo/hold', {}],
      ['/w/demo/./notes', {}],
    ] as const) {
      const [a, b] = [await get(laneBase, p, { headers }), await get(plainBase, p, { headers })];
      expect(a.status).toBeGreaterThanOrEqual(400);
      expect(a).toEqual(b);
    }
  });

  it('on one connection, pipelined: answers its own, hands a request with a body to node at its boundary, in order', async () => {
    const get1 = `GET /w/demo/one HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
    const post = `POST /w/demo/two HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello`;
    const get3 = `GET /w/demo/three HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
    const handed = lane.lane?.handedOff ?? 0;
    const out = await raw(get1 + post + get3, (got) => answers(got) === 3);
    const order = [...out.matchAll(/"url":"(\/[a-z]+)"/g)].map((m) => m[1]);
    expect(order).toEqual(['/one', '/two', '/three']);
    expect(out).toContain('"body":"hello"');
    expect((lane.lane?.handedOff ?? 0) - handed).toBe(1);
  });

  it('never lets a body hide a request: a GET with a length, or chunked, is node’s and its body stays a body', async () => {
    const inner = `GET /w/demo/smuggled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`;
    for (const framing of [`Content-Length: ${inner.length}`, 'Transfer-Encoding: chunked']) {
      seen.length = 0;
      const body = framing.startsWith('Content') ? inner : `${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
      const out = await raw(`GET /w/demo/outer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n${framing}\r\n\r\n${body}`, (got) => answers(got) === 1);
      expect(count(out, 'HTTP/1.1 ')).toBe(1);
      expect(seen).toEqual([`GET /outer ${inner}`]);
    }
    // Without a token, the request behind it is never served either: node answers 401 and the backend sees nothing.
    seen.length = 0;
    const out = await raw(`GET /w/demo/a HTTP/1.1\r\nHost: x\r\n\r\n${inner}`, (got) => count(got, 'HTTP/1.1 ') === 2);
    expect(out.startsWith('HTTP/1.1 401')).toBe(true);
    expect(seen).toEqual(['GET /smuggled ']);
  });

  it('ends the connection after a request that asks it to, and serves nothing pipelined behind it', async () => {
    seen.length = 0;
    const one = (p: string, extra = '') => `GET /w/demo/${p} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n${extra}\r\n`;
    // Resolves when the front door closes the connection.
    const out = await raw(one('first', 'Connection: close\r\n') + one('second'), () => false);
    expect(out).toContain('\r\nConnection: close\r\n');
    expect(answers(out)).toBe(1);
    expect(seen).toEqual(['GET /first ']);
  });

  it('hands a WebSocket upgrade to node on a connection the lane answered before', async () => {
    const out = await raw(
      `GET /w/demo/one HTTP/1.1\r\nHost: 127.0.0.1:${lanePort}\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n` +
        `GET /w/demo/stream HTTP/1.1\r\nHost: 127.0.0.1:${lanePort}\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
      (got) => got.includes('hello /stream'),
    );
    expect(out).toContain('"/one"');
    expect(out).toContain('HTTP/1.1 101');
    // And a client's own WebSocket, on a fresh connection, as the dashboard opens it.
    const w = new WebSocket(`ws://127.0.0.1:${lanePort}/w/demo/feed`, { headers: auth });
    const first = await new Promise<string>((resolve, reject) => {
      w.once('message', (d: Buffer) => resolve(d.toString()));
      w.once('error', reject);
    });
    w.close();
    expect(first).toBe('hello /feed');
  });

  it('stops the backend answer when the client goes away in the middle of it', async () => {
    const before = closedMidAnswer;
    await raw(`GET /w/demo/endless HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`, (got) => got.length > 8 * 1024);
    await expect.poll(() => closedMidAnswer).toBe(before + 1);
  });

  it('hands a head that arrives in pieces to node, which answers it', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      const s = net.connect(lanePort, '127.0.0.1');
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (d: string) => {
        got += d;
        if (answers(got) === 1) {
          s.destroy();
          resolve(got);
        }
      });
      s.on('error', reject);
      s.write('GET /w/demo/slow HTTP/1.1\r\nHost: x\r\n');
      setTimeout(() => s.write(`Authorization: Bearer ${TOKEN}\r\n\r\n`), 50);
    });
    expect(out.startsWith('HTTP/1.1 200')).toBe(true);
    expect(out).toContain('"/slow"');
  });
});
