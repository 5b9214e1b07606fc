import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overSocket, probeHealth } from './health.ts';

// A real HTTP server on a Unix socket standing in for a backend, including one that misbehaves.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-health-'));
const sock = path.join(dir, 'backend.sock');
const headDripSock = path.join(dir, 'head-drip.sock');
let server: http.Server;
let headDrip: net.Server;
const timers = new Set<NodeJS.Timeout>();
/** What a dripping backend sends: a byte every DRIP_MS of a body that takes minutes to finish. */
const DRIP_MS = 250;
const DRIP_BYTES = 600; // 600 * 250 ms = 150 s
const dripped = { bytes: 0 };

/** Writes `text` one byte per DRIP_MS until done or the connection is gone. */
function drip(socket: net.Socket, text: string): void {
  let i = 0;
  const t = setInterval(() => {
    if (socket.destroyed || i >= text.length) {
      clearInterval(t);
      timers.delete(t);
      return;
    }
    socket.write(text[i++] ?? '');
    dripped.bytes++;
  }, DRIP_MS);
  timers.add(t);
  socket.on('close', () => {
    clearInterval(t);
    timers.delete(t);
  });
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.url === '/echo') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ method: req.method, type: req.headers['content-type'] ?? null, length: req.headers['content-length'] ?? null, body }));
      } else if (req.url === '/text') {
        res.end('not json');
      } else if (req.url === '/huge') {
        // Streams past the host's 1 MiB bound without ever ending on its own.
        const chunk = Buffer.alloc(64 * 1024, 'x');
        const pump = () => {
          while (res.write(chunk));
        };
        res.on('drain', pump);
        pump();
      } else if (req.url === '/drip') {
        // The hostile backend of issue 14: a valid head at once, then the body a byte at a time. An idle
        // timeout never fires on it.
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': DRIP_BYTES });
        res.flushHeaders();
        drip(res.socket as net.Socket, `"${'x'.repeat(DRIP_BYTES - 2)}"`);
      } else if (req.url === '/silent') {
        // Never answers.
      } else if (req.url === '/health') {
        res.end(JSON.stringify({ nope: true }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
  // Drips the status line and headers themselves: the answer never even starts.
  headDrip = net.createServer((s) => {
    s.on('error', () => undefined);
    s.once('data', () => drip(s, `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-pad: ${'y'.repeat(DRIP_BYTES)}\r\n\r\n{}`));
  });
  await new Promise<void>((r) => headDrip.listen(headDripSock, r));
});

afterAll(async () => {
  for (const t of timers) clearInterval(t);
  server.closeAllConnections();
  await new Promise<void>((r) => headDrip.close(() => r()));
  await new Promise<void>((r) => server.close(() => r()));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('overSocket', () => {
  it('sends a JSON body with its length and parses a JSON answer', async () => {
    const r = await overSocket(sock, { method: 'POST', path: '/echo', body: { a: 'ü' }, timeoutMs: 2_000 });
    expect(r).toEqual({ status: 200, body: { method: 'POST', type: 'application/json', length: String(Buffer.byteLength('{"a":"ü"}')), body: '{"a":"ü"}' } });
    expect((await overSocket(sock, { method: 'GET', path: '/echo', timeoutMs: 2_000 })).body).toMatchObject({ method: 'GET', type: null, body: '' });
  });

  it('gives a body that is not JSON as text', async () => {
    expect(await overSocket(sock, { method: 'GET', path: '/text', timeoutMs: 2_000 })).toEqual({ status: 200, body: 'not json' });
  });

  it('stops reading an answer past 1 MiB (a backend runs as the agent and may be hostile)', async () => {
    await expect(overSocket(sock, { method: 'POST', path: '/huge', body: {}, timeoutMs: 5_000 })).rejects.toThrow(/over 1048576 bytes/);
  });

  it('gives up on a backend that does not answer', async () => {
    await expect(overSocket(sock, { method: 'GET', path: '/silent', timeoutMs: 200 })).rejects.toThrow(/no complete answer within 200 ms/);
  });

  // Issue 14, 5b: the timeout was an idle timeout, so a byte every 500 ms held a stop for 73 s. These drips
  // take 150 s to finish; the call must give up at its deadline (1 s), long before that, with the reason.
  it('gives up at its deadline on a backend that drips its body a byte at a time', async () => {
    const before = dripped.bytes;
    await expect(overSocket(sock, { method: 'GET', path: '/drip', timeoutMs: 1_000 })).rejects.toThrow(/no complete answer within 1000 ms/);
    // It did drip (the timer was not simply silence) and was cut long before the end.
    const sent = dripped.bytes - before;
    expect(sent).toBeGreaterThan(0);
    expect(sent).toBeLessThan(DRIP_BYTES / 2);
  });

  it('gives up at its deadline on a backend that drips its status line and headers', async () => {
    const before = dripped.bytes;
    await expect(overSocket(headDripSock, { method: 'GET', path: '/status', timeoutMs: 1_000 })).rejects.toThrow(/no complete answer within 1000 ms/);
    expect(dripped.bytes - before).toBeGreaterThan(0);
  });

  it('fails on a socket nobody listens on', async () => {
    await expect(overSocket(path.join(dir, 'none.sock'), { method: 'GET', path: '/', timeoutMs: 200 })).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('probeHealth', () => {
  it('says what is wrong with an answer that is not a backend health document, without throwing', async () => {
    expect(await probeHealth(sock, 2_000)).toEqual({ ok: false, error: '/health answered an unexpected body: {"nope":true}' });
    expect(await probeHealth(path.join(dir, 'none.sock'), 200)).toEqual({ ok: false, error: 'socket not created yet' });
  });

  it('reports a dripping backend as unhealthy at its deadline', async () => {
    expect(await probeHealth(headDripSock, 1_000)).toEqual({ ok: false, error: 'no complete answer within 1000 ms' });
  });
});
