// One stable preview URL per workspace, against the real stack: a dev server started inside a real sandbox
// answers HTTP and WebSocket at /w/<slug>/preview/<port>/ through the Grove server and the workspace backend;
// ports off the allowlist are refused; one workspace's preview path never reaches another's server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { PortsResponse, Workspace } from '@grove/contracts';
import { TOKEN, cleanup, containerOf, dockerExec, makeHome, startServer, waitFor, waitRunning, type RunningServer } from './harness.ts';

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

const home = makeHome('preview');
let s: RunningServer;

beforeAll(async () => {
  s = await startServer({ home });
  await waitRunning(s, 'demo');
});

afterAll(async () => {
  await s?.stop();
  cleanup(home);
});

async function fork(name: string): Promise<Workspace> {
  const r = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
  expect(r.status).toBe(201);
  return r.body.workspace;
}

/** Start the dev server in the sandbox and wait until /ports lists it. */
async function serve(slug: string, port: number, tag: string): Promise<void> {
  const container = containerOf(s.instance, slug) ?? '';
  const r = dockerExec(container, ['sh', '-c', `node -e "$0" ${port} ${tag} >/tmp/dev-${port}.log 2>&1 &`, DEV_SERVER]);
  expect(r.code, r.out).toBe(0);
  await waitFor(`${slug} listening on ${port}`, async () => {
    const ports = await s.api<PortsResponse>('GET', `/w/${slug}/ports`);
    return ports.body.ports?.some((p) => p.port === port && p.preview);
  }, 20_000);
}

async function get(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${s.base}${path}`, { headers: { authorization: `Bearer ${TOKEN}`, ...headers }, redirect: 'manual' });
}

function openWs(path: string): Promise<{ ws: WebSocket; messages: string[] }> {
  const ws = new WebSocket(`${s.base.replace('http', 'ws')}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const messages: string[] = [];
  ws.on('message', (m: Buffer) => messages.push(m.toString()));
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, messages }));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

describe('preview URL', () => {
  it('reaches a dev server inside the sandbox over HTTP and WebSocket through both hops; A never reaches B', async () => {
    const [a, b] = [await fork('prev-a'), await fork('prev-b')];
    await serve(a.slug, 4173, 'A');
    await serve(b.slug, 4174, 'B');

    // HTTP: the prefix is stripped, the query kept, the Grove token never reaches the dev server.
    const r = await get(`/w/${a.slug}/preview/4173/src/main.js?v=1`, { cookie: `grove_token=${TOKEN}; theme=dark` });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ tag: 'A', url: '/src/main.js?v=1', cookie: 'theme=dark', authorization: null });
    // Without the trailing slash: a redirect that resolves under the workspace's own path.
    const bare = await get(`/w/${a.slug}/preview/4173`);
    expect(bare.status).toBe(308);
    expect(new URL(bare.headers.get('location') ?? '', `${s.base}/w/${a.slug}/preview/4173`).pathname).toBe(`/w/${a.slug}/preview/4173/`);
    // The dev server's own absolute redirects stay inside its preview.
    const away = await get(`/w/${a.slug}/preview/4173/away`);
    expect(away.headers.get('location')).toBe(`/w/${a.slug}/preview/4173/landing`);

    // WebSocket (hot reload) through the Grove server and the backend.
    const { ws, messages } = await openWs(`/w/${a.slug}/preview/4173/hmr?x=1`);
    ws.send('ping');
    await expect.poll(() => messages, { timeout: 5_000 }).toEqual(['A:open /hmr?x=1', 'A:ping']);
    ws.close();

    // Isolation: each workspace's preview path reaches only its own container's loopback.
    const bOwn = await get(`/w/${b.slug}/preview/4174/`);
    expect(((await bOwn.json()) as { tag: string }).tag).toBe('B');
    for (const [slug, port] of [[a.slug, 4174], [b.slug, 4173]] as const) {
      const cross = await get(`/w/${slug}/preview/${port}/`);
      expect(cross.status, `${slug} -> ${port}`).toBe(502);
      expect(((await cross.json()) as { code: string }).code).toBe('preview_unreachable');
    }
    await expect(openWs(`/w/${b.slug}/preview/4173/hmr`)).rejects.toThrow(/502/);

    // /ports lists what listens inside each sandbox, and only that.
    const aPorts = (await s.api<PortsResponse>('GET', `/w/${a.slug}/ports`)).body.ports.map((p) => p.port);
    expect(aPorts).toContain(4173);
    expect(aPorts).not.toContain(4174);
  });

  it('refuses ports outside the allowlist with a clear error', async () => {
    for (const port of [22, 80, 1023, 3128]) {
      const r = await get(`/w/demo/preview/${port}/`);
      expect(r.status, String(port)).toBe(403);
      const body = (await r.json()) as { code: string; message: string };
      expect(body.code).toBe('port_not_allowed');
      expect(body.message).toMatch(new RegExp(`port ${port} cannot be previewed`));
    }
    await expect(openWs('/w/demo/preview/80/')).rejects.toThrow(/403/);
    const bad = await get('/w/demo/preview/99999/');
    expect(bad.status).toBe(422);
  });
});
