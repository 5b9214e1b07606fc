// Preview forwarding against a real HTTP + WebSocket server on the loopback, through the backend's Unix socket.
import { createServer, request } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { portsResponseSchema } from '@grove/contracts';
import { parsePortRanges, parseProcNetTcp } from './preview.ts';
import { startBackend } from './test-support.ts';
import type { TestBackend } from './test-support.ts';

interface Echo {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let dev: Server;
let devPort: number;
let closedPort: number;
let tb: TestBackend;

function send(path: string, o: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: tb.socketPath, path, method: o.method ?? 'GET', headers: o.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

beforeAll(async () => {
  dev = createServer((req, res) => {
    if (req.url === '/go-login') {
      res.writeHead(302, { location: '/login?next=1', 'set-cookie': ['a=1; Path=/', 'b=2; Path=/'] });
      res.end();
      return;
    }
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-dev': 'yes' });
      res.end(JSON.stringify({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body } satisfies Echo));
    });
  });
  const wss = new WebSocketServer({ server: dev });
  wss.on('connection', (s, req) => {
    s.send(`hello ${req.url ?? ''}`);
    // What the dev server got as a header's bytes (node reads them one char per byte).
    const name = req.headers['x-name'];
    if (typeof name === 'string') s.send(`name ${Buffer.from(name, 'latin1').toString('utf8')}`);
    s.on('message', (m: Buffer) => s.send(`echo ${m.toString()}`));
  });
  await new Promise<void>((r) => dev.listen(0, '127.0.0.1', r));
  devPort = (dev.address() as AddressInfo).port;
  // A port nobody listens on: bind, read it, close.
  const tmp = createServer();
  await new Promise<void>((r) => tmp.listen(0, '127.0.0.1', r));
  closedPort = (tmp.address() as AddressInfo).port;
  await new Promise((r) => tmp.close(r));
  tb = await startBackend({ egressPort: 3128 });
});

afterAll(async () => {
  await tb.dispose();
  await new Promise((r) => dev.close(r));
});

describe('preview', () => {
  it('forwards HTTP with the prefix stripped, method, query and body intact, and Grove credentials removed', async () => {
    const r = await send(`/preview/${devPort}/api/items?q=1&r=%2F`, {
      method: 'POST',
      headers: { authorization: 'Bearer secret', cookie: 'grove_token=secret; app=kept', 'x-forwarded-prefix': '/w/demo~test', 'content-type': 'text/plain' },
      body: 'payload',
    });
    expect(r.status).toBe(200);
    expect(r.headers['x-dev']).toBe('yes');
    const echo = JSON.parse(r.text) as Echo;
    expect(echo).toMatchObject({ method: 'POST', url: '/api/items?q=1&r=%2F', body: 'payload' });
    expect(echo.headers.authorization).toBeUndefined();
    expect(echo.headers.cookie).toBe('app=kept');
    expect(echo.headers['x-forwarded-prefix']).toBe(`/w/demo~test/preview/${devPort}`);
  });

  it('redirects /preview/<port> to the slash form, relative to wherever it is mounted', async () => {
    const r = await send(`/preview/${devPort}?x=1`);
    expect(r.status).toBe(308);
    expect(r.headers.location).toBe(`${devPort}/?x=1`);
  });

  it('keeps absolute-path redirects inside the preview and passes every Set-Cookie', async () => {
    const r = await send(`/preview/${devPort}/go-login`, { headers: { 'x-forwarded-prefix': '/w/demo~test' } });
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe(`/w/demo~test/preview/${devPort}/login?next=1`);
    expect(r.headers['set-cookie']).toEqual(['a=1; Path=/', 'b=2; Path=/']);
    // A forged prefix is ignored rather than echoed into a Location header.
    const forged = await send(`/preview/${devPort}/go-login`, { headers: { 'x-forwarded-prefix': '//evil.example' } });
    expect(forged.headers.location).toBe(`/preview/${devPort}/login?next=1`);
    // Mounted on the preview listener: /pv/<cap>/<slug>/<port>, no /preview segment.
    const cap = 'A'.repeat(40) + '_-0';
    const pv = await send(`/preview/${devPort}/go-login`, { headers: { 'x-forwarded-prefix': `/pv/${cap}/demo~test` } });
    expect(pv.headers.location).toBe(`/pv/${cap}/demo~test/${devPort}/login?next=1`);
    const short = await send(`/preview/${devPort}/go-login`, { headers: { 'x-forwarded-prefix': '/pv/short/demo~test' } });
    expect(short.headers.location).toBe(`/preview/${devPort}/login?next=1`);
  });

  it('passes WebSocket upgrades through with the path stripped', async () => {
    // A header in UTF-8 (ws sends a header string one byte per char): the dev server gets its bytes, not encoded twice.
    const ws = new WebSocket(`ws+unix://${tb.socketPath}:/preview/${devPort}/hmr?token=abc`, { headers: { authorization: 'Bearer secret', 'x-name': Buffer.from('café').toString('latin1') } });
    const got: string[] = [];
    ws.on('message', (m: Buffer) => got.push(m.toString()));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.send('ping');
    await expect.poll(() => got).toEqual(['hello /hmr?token=abc', 'name café', 'echo ping']);
    ws.close();
  });

  it('refuses ports outside the allowlist and the backend\'s own, and explains a port nobody listens on', async () => {
    for (const [port, code, status] of [
      ['80', 'port_not_allowed', 403],
      ['3128', 'port_not_allowed', 403],
      ['3129', 'port_not_allowed', 403],
      ['65536', 'invalid_input', 422],
      ['0', 'invalid_input', 422],
      ['abc', 'invalid_input', 422],
      [String(closedPort), 'preview_unreachable', 502],
    ] as const) {
      const r = await send(`/preview/${port}/`);
      expect(r.status, port).toBe(status);
      expect((JSON.parse(r.text) as { code: string }).code, port).toBe(code);
    }
    const own = JSON.parse((await send('/preview/3128/')).text) as { message: string };
    expect(own.message).toMatch(/backend's own/);
    const low = JSON.parse((await send('/preview/80/')).text) as { message: string };
    expect(low.message).toMatch(/1024-65535/);
    // Upgrades are refused the same way, before anything is connected.
    const ws = new WebSocket(`ws+unix://${tb.socketPath}:/preview/22/`);
    const status = await new Promise<number>((resolve) => ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)));
    expect(status).toBe(403);
  });

  it('lists listening TCP ports with whether each may be previewed', async () => {
    const r = await send('/ports');
    expect(r.status).toBe(200);
    const { ports } = portsResponseSchema.parse(JSON.parse(r.text));
    expect(ports.find((p) => p.port === devPort)).toEqual({ port: devPort, addresses: ['127.0.0.1'], preview: true });
    expect(ports.some((p) => p.port === closedPort)).toBe(false);
  });
});

describe('preview parsing', () => {
  it('reads port ranges and refuses bad ones', () => {
    expect(parsePortRanges('1024-65535')).toEqual([{ from: 1024, to: 65535 }]);
    expect(parsePortRanges('3000, 5173,8000-8099')).toEqual([{ from: 3000, to: 3000 }, { from: 5173, to: 5173 }, { from: 8000, to: 8099 }]);
    for (const bad of ['', '0', '70000', '5-1', 'x', '1-2-3']) expect(() => parsePortRanges(bad), bad).toThrow(/invalid port range/);
  });

  it('parses /proc/net/tcp and tcp6 LISTEN rows', () => {
    const tcp = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0',
      '   1: 00000000:1435 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 100 0 0 10 0',
      '   2: 0100007F:0BB8 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1',
    ].join('\n');
    expect(parseProcNetTcp(tcp)).toEqual([
      { address: '127.0.0.1', port: 3000 },
      { address: '0.0.0.0', port: 5173 },
    ]);
    const tcp6 = [
      '  sl  local_address                         remote_address                        st',
      '   0: 00000000000000000000000001000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000',
      '   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000',
    ].join('\n');
    expect(parseProcNetTcp(tcp6)).toEqual([
      { address: '::1', port: 8000 },
      { address: '::', port: 80 },
    ]);
  });
});
