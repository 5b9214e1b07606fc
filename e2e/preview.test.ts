// One stable preview URL per workspace, against the real stack: /w/<slug>/preview/<port>/ on the dashboard sends
// the signed-in user to the preview listener (its own origin), where a dev server started inside a real sandbox
// answers HTTP and WebSocket through the Grove server and the workspace backend, authorized by the workspace's
// cap alone; ports off the allowlist are refused; one workspace's preview never reaches another's server.
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { PortsResponse, Workspace } from '@grove/contracts';
import { TOKEN, containerOf, dockerExec, useServer, waitFor } from './harness.ts';

// A dependency-free HTTP + WebSocket (RFC 6455, text frames under 126 bytes) server, run with node -e inside
// the sandbox: argv = port, tag. HTTP answers what it saw; the WebSocket echoes "<tag>:<text>".
const DEV_SERVER = `
const http = require('http'), crypto = require('crypto');
const [port, tag] = process.argv.slice(1);
const server = http.createServer((req, res) => {
  if (req.url === '/away') { res.writeHead(302, { location: '/landing' }); res.end(); return; }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ tag, url: req.url, cookie: req.headers.cookie || null, authorization: req.headers.authorization || null }));
});
server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1').update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + '\\r\\n\\r\\n');
  const send = (text) => { const b = Buffer.from(text); socket.write(Buffer.concat([Buffer.from([0x81, b.length]), b])); };
  send(tag + ':open ' + req.url);
  socket.on('data', (d) => {
    const len = d[1] & 0x7f, mask = d.subarray(2, 6), data = Buffer.from(d.subarray(6, 6 + len));
    for (let i = 0; i < data.length; i++) data[i] ^= mask[i % 4];
    if ((d[0] & 0x0f) === 1) send(tag + ':' + data.toString());
    else if ((d[0] & 0x0f) === 8) socket.end();
  });
});
server.listen(Number(port), '127.0.0.1');
`;

const fx = useServer('preview');

async function fork(name: string): Promise<Workspace> {
  const r = await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
  expect(r.status).toBe(201);
  return r.body.workspace;
}

/** Start the dev server in the sandbox and wait until /ports lists it. */
async function serve(slug: string, port: number, tag: string): Promise<void> {
  const container = containerOf(fx.s.instance, slug) ?? '';
  const r = dockerExec(container, ['sh', '-c', `node -e "$0" ${port} ${tag} >/tmp/dev-${port}.log 2>&1 &`, DEV_SERVER]);
  expect(r.code, r.out).toBe(0);
  await waitFor(`${slug} listening on ${port}`, async () => {
    const ports = await fx.s.api<PortsResponse>('GET', `/w/${slug}/ports`);
    return ports.body.ports?.some((p) => p.port === port && p.preview);
  }, 20_000);
}

async function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${fx.s.base}${path}`, { headers: { authorization: `Bearer ${TOKEN}`, ...headers }, redirect: 'manual' });
}

/** Where the dashboard's /w/<slug>/preview/<port><rest> sends the signed-in user: the preview origin. */
async function previewAt(slug: string, port: number, rest = '/'): Promise<string> {
  const r = await get(`/w/${slug}/preview/${port}${rest}`);
  expect(r.status).toBe(302);
  const location = r.headers.get('location') ?? '';
  expect(location.startsWith(`${fx.s.previewBase}/pv/`), location).toBe(true);
  return location;
}

function openWs(url: string, headers: Record<string, string> = {}): Promise<{ ws: WebSocket; messages: string[] }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), { headers });
  const messages: string[] = [];
  ws.on('message', (m: Buffer) => messages.push(m.toString()));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages }));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
    });
  });
}

describe('preview URL', () => {
  it('sends /w/<slug>/preview/<port>/ to the preview origin, which reaches a dev server in the sandbox over HTTP and WebSocket; A never reaches B', async () => {
    const [a, b] = [await fork('prev-a'), await fork('prev-b')];
    await serve(a.slug, 4173, 'A');
    await serve(b.slug, 4174, 'B');

    // The dashboard's address redirects (query kept) to the preview listener: another port, so another origin.
    const at = await previewAt(a.slug, 4173, '/src/main.js?v=1');
    const cap = new URL(at).pathname.split('/')[2] ?? '';
    expect(at).toBe(`${fx.s.previewBase}/pv/${cap}/${a.slug}/4173/src/main.js?v=1`);
    expect(new URL(at).origin).not.toBe(new URL(fx.s.base).origin);
    // Stable: the same address every time.
    expect(await previewAt(a.slug, 4173, '/src/main.js?v=1')).toBe(at);

    // HTTP by the cap alone: the prefix is stripped, the query kept, the Grove cookie (a browser sends it to
    // every port of the host) and any bearer never reach the dev server; the cap never leaves in a Referer.
    const r = await fetch(at, { headers: { cookie: `grove_token=${TOKEN}; theme=dark`, authorization: `Bearer ${TOKEN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect(await r.json()).toEqual({ tag: 'A', url: '/src/main.js?v=1', cookie: 'theme=dark', authorization: null });
    const root = `${fx.s.previewBase}/pv/${cap}/${a.slug}/4173`;
    // Without the trailing slash: a redirect that resolves under the preview's own path.
    const bare = await fetch(root, { redirect: 'manual' });
    expect(bare.status).toBe(308);
    expect(new URL(bare.headers.get('location') ?? '', root).pathname).toBe(`/pv/${cap}/${a.slug}/4173/`);
    // The dev server's own absolute redirects stay inside its preview.
    const away = await fetch(`${root}/away`, { redirect: 'manual' });
    expect(away.headers.get('location')).toBe(`/pv/${cap}/${a.slug}/4173/landing`);

    // WebSocket (hot reload) on the preview origin, through the Grove server and the backend.
    const { ws, messages } = await openWs(`${root}/hmr?x=1`);
    ws.send('ping');
    await expect.poll(() => messages, { timeout: 5_000 }).toEqual(['A:open /hmr?x=1', 'A:ping']);
    ws.close();
    // Not on the dashboard's origin: a WebSocket cannot follow a redirect, so the refusal says where to go.
    await expect(openWs(`${fx.s.base}/w/${a.slug}/preview/4173/hmr`, { authorization: `Bearer ${TOKEN}` })).rejects.toThrow(new RegExp(`404 .*pv/${cap}/`));

    // Isolation: each workspace's preview reaches only its own container's loopback, and only with its own cap.
    const bAt = await previewAt(b.slug, 4174);
    expect(((await (await fetch(bAt)).json()) as { tag: string }).tag).toBe('B');
    const bCap = new URL(bAt).pathname.split('/')[2] ?? '';
    expect(bCap).not.toBe(cap);
    for (const [slug, port] of [[a.slug, 4174], [b.slug, 4173]] as const) {
      const cross = await fetch(await previewAt(slug, port));
      expect(cross.status, `${slug} -> ${port}`).toBe(502);
      expect(((await cross.json()) as { code: string }).code).toBe('preview_unreachable');
    }
    await expect(openWs(`${(await previewAt(b.slug, 4173)).replace(/\/$/, '')}/hmr`)).rejects.toThrow(/502/);
    for (const wrong of [`/pv/${bCap}/${a.slug}/4173/`, `/pv/${cap}/${b.slug}/4174/`, `/pv/${'A'.repeat(43)}/${a.slug}/4173/`, `/pv/${a.slug}/4173/`]) {
      const w = await fetch(`${fx.s.previewBase}${wrong}`, { headers: { cookie: `grove_token=${TOKEN}` } });
      expect(w.status, wrong).toBe(404);
      expect(((await w.json()) as { code: string }).code).toBe('not_found');
    }
    await expect(openWs(`${fx.s.previewBase}/pv/${bCap}/${a.slug}/4173/hmr`)).rejects.toThrow(/404/);

    // The preview origin serves no API, no workspace route and no dashboard, even with the token.
    for (const p of ['/api/workspaces', `/w/${a.slug}/thread`, `/w/${a.slug}/preview/4173/`, '/', `/login?token=${TOKEN}`]) {
      const r2 = await fetch(`${fx.s.previewBase}${p}`, { headers: { authorization: `Bearer ${TOKEN}`, cookie: `grove_token=${TOKEN}` }, redirect: 'manual' });
      expect(r2.status, p).toBe(404);
    }
    await expect(openWs(`${fx.s.previewBase}/w/${a.slug}/stream`, { authorization: `Bearer ${TOKEN}` })).rejects.toThrow(/404/);

    // /ports lists what listens inside each sandbox, and only that.
    const aPorts = (await fx.s.api<PortsResponse>('GET', `/w/${a.slug}/ports`)).body.ports.map((p) => p.port);
    expect(aPorts).toContain(4173);
    expect(aPorts).not.toContain(4174);
  });

  it('keeps the preview address across stop, reopen and a server restart (same token)', async () => {
    const before = await previewAt('demo~prev-a', 4173);
    expect((await fx.s.api('POST', '/api/workspaces/demo~prev-a/stop')).status).toBe(200);
    expect((await fetch(before)).status).toBe(409);
    await fx.s.stop();
    await fx.restart();
    expect((await fx.s.api('POST', '/api/workspaces/demo~prev-a/start')).status).toBe(200);
    await serve('demo~prev-a', 4173, 'again');
    const after = await previewAt('demo~prev-a', 4173);
    expect(new URL(after).pathname).toBe(new URL(before).pathname);
    expect(((await (await fetch(after)).json()) as { tag: string }).tag).toBe('again');
  });

  it('refuses ports outside the allowlist with a clear error', async () => {
    for (const port of [22, 80, 1023, 3128]) {
      const r = await fetch(await previewAt('demo', port));
      expect(r.status, String(port)).toBe(403);
      const body = (await r.json()) as { code: string; message: string };
      expect(body.code).toBe('port_not_allowed');
      expect(body.message).toMatch(new RegExp(`port ${port} cannot be previewed`));
    }
    await expect(openWs(await previewAt('demo', 80))).rejects.toThrow(/403/);
    const bad = await get('/w/demo/preview/99999/');
    expect(bad.status).toBe(422);
  });
});
