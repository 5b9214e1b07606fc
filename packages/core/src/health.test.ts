import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { overSocket, probeHealth } from './health.ts';

// A real HTTP server on a Unix socket standing in for a backend, including one that misbehaves.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-health-'));
const sock = path.join(dir, 'backend.sock');
let server: http.Server;

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
      } else if (req.url === '/silent') {
        // Never answers.
      } else if (req.url === '/health') {
        res.end(JSON.stringify({ nope: true }));
      }
    });
  });
  await new Promise<void>((r) => server.listen(sock, r));
});

afterAll(async () => {
  server.closeAllConnections();
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
    await expect(overSocket(sock, { method: 'GET', path: '/silent', timeoutMs: 200 })).rejects.toThrow(/no answer within 200 ms/);
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
});
