// The proxy's lean path against backends that answer raw bytes (a real Unix socket, a real front server): what the
// client receives is exactly the response the proxy framed, scrubbed; whatever a backend sends past it never
// reaches a client, and a kept-alive connection the backend closed is retried, not surfaced as an error.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { Grove } from '@grove/core';
import { sendError } from './errors.ts';
import { createWorkspaceProxy, parseProxyPath, scrubWorkspaceResponse } from './proxy.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-proxy-framing-'));
const logger = pino({ level: 'silent' });
/** What the raw backend answers per request path; each gets the connection and the request head. */
const answers = new Map<string, (s: net.Socket) => void>();
const seen: string[] = [];
let raw: net.Server;
let front: http.Server;
let base: string;
const proxy = createWorkspaceProxy({
  grove: { socketFor: async () => path.join(dir, 'raw.sock') } as unknown as Grove,
  logger,
  onResponseHeaders: scrubWorkspaceResponse,
});

beforeAll(async () => {
  raw = net.createServer((s) => {
    let buf = '';
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const reqHead = buf.slice(0, end);
        buf = buf.slice(end + 4);
        const p = reqHead.split(' ')[1] ?? '/';
        seen.push(p);
        (answers.get(p) ?? ((c: net.Socket) => c.write('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n')))(s);
      }
    });
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => raw.listen(path.join(dir, 'raw.sock'), r));
  front = http.createServer((req, res) => {
    const t = parseProxyPath(req.url ?? '/');
    if (!t) throw new Error('not a proxy path');
    proxy.web(req, res, t).catch((err: unknown) => sendError(res, err, logger));
  });
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(front.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  proxy.close();
  front.closeAllConnections();
  await new Promise((r) => front.close(r));
  await new Promise((r) => raw.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** GET over one kept-alive client connection, so a desync would show in the next answer on it. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function get(p: string, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/w/demo${p}`, { agent, method }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the lean path', () => {
  it('passes a chunked body through decoded and whole, with the head scrubbed', async () => {
    answers.set('/chunked', (s) => {
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: grove_token=shadow\r\nContent-Type: text/html\r\n\r\n5\r\nhello\r\n');
      setTimeout(() => s.write('6\r\n world\r\n0\r\n\r\n'), 20);
    });
    const r = await get('/chunked');
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('hello world');
    expect(r.headers['set-cookie']).toBeUndefined();
    expect(r.headers['content-security-policy']).toContain('sandbox');
  });

  it('sends a 256 KiB body byte for byte', async () => {
    const big = crypto.randomBytes(256 * 1024);
    answers.set('/big', (s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n`);
      s.write(big);
    });
    const r = await get('/big');
    expect(r.body.equals(big)).toBe(true);
  });

  it('never lets bytes past a response reach the client: a smuggled second response is dropped with its connection', async () => {
    answers.set('/smuggle', (s) =>
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nSet-Cookie: grove_token=evil\r\nContent-Length: 6\r\n\r\nforged'),
    );
    answers.set('/after', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter'));
    const first = await get('/smuggle');
    expect(first.body.toString()).toBe('ok');
    // The next request on the same client connection gets its own answer, not the forged one.
    const next = await get('/after');
    expect(next.body.toString()).toBe('after');
    expect(next.headers['set-cookie']).toBeUndefined();
  });

  it('answers 502 to framing it cannot read one way, and sends none of it', async () => {
    answers.set('/two-lengths', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\nok'));
    answers.set('/te-and-cl', (s) => s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nok'));
    answers.set('/garbage', (s) => s.write('HTTP/1.1 200 OK\r\nX-A: 1\r\n folded: yes\r\n\r\n'));
    for (const p of ['/two-lengths', '/te-and-cl', '/garbage']) {
      const r = await get(p);
      expect(r.status, p).toBe(502);
      expect(JSON.parse(r.body.toString()), p).toMatchObject({ code: 'backend_unavailable' });
    }
  });

  it('skips interim answers, and sends no body for HEAD, 204 and 304', async () => {
    answers.set('/early', (s) => s.write('HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody'));
    answers.set('/head', (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n'));
    answers.set('/none', (s) => s.write('HTTP/1.1 204 No Content\r\n\r\n'));
    expect((await get('/early')).body.toString()).toBe('body');
    const h = await get('/head', 'HEAD');
    expect([h.status, h.headers['content-length'], h.body.length]).toEqual([200, '9', 0]);
    expect((await get('/none')).status).toBe(204);
    // And the connection stayed usable after each.
    expect((await get('/after')).body.toString()).toBe('after');
  });

  it('ends a body delimited by the close when the backend closes', async () => {
    answers.set('/until-close', (s) => s.end('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it'));
    expect((await get('/until-close')).body.toString()).toBe('all of it');
  });

  it('retries once on a new connection when a kept-alive one closes under a request', async () => {
    let n = 0;
    answers.set('/flaky', (s) => {
      n++;
      // The first connection to get it closes without a byte, as a backend's idle timeout would.
      if (n === 1) s.destroy();
      else s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
    await get('/after'); // leaves a kept-alive upstream connection
    const r = await get('/flaky');
    expect([r.status, r.body.toString()]).toEqual([200, 'ok']);
    // The retired connection's close must not start a third attempt: one more round trip lets it show if it did.
    await get('/after');
    expect(n).toBe(2);
  });
});
