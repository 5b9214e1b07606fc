// A page the agent builds is untrusted code. Served by a dev server in a real sandbox and opened in a real
// browser (Debian Chromium) signed in to Grove, it runs on the preview origin: it can neither read the
// dashboard's API nor drive it (stop another workspace, open its stream), and Grove's cookie never reaches it.
// The same holds for a workspace's backend taken over by its agent, which answers on the dashboard's origin.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PortsResponse, Workspace } from '@grove/contracts';
import { launchBrowser, signedIn } from './browser.ts';
import { TOKEN, containerOf, dockerExec, useServer, waitFor } from './harness.ts';

const ctx = useServer('preview-origin');
let browser: Browser;

// The hostile page: ?d=<dashboard origin>&slug=<workspace to stop>. It reports what it could do in #out.
const PAGE = [
  '<!doctype html><meta charset="utf-8"><title>agent page</title><pre id="out"></pre><script>',
  '(async () => {',
  '  const q = new URLSearchParams(location.search), d = q.get("d"), slug = encodeURIComponent(q.get("slug")), out = {};',
  '  try { const r = await fetch(d + "/api/workspaces", { credentials: "include" }); out.read = "read " + r.status + " " + (await r.text()).slice(0, 40); }',
  '  catch (e) { out.read = "unreadable: " + e.name; }',
  '  try { const r = await fetch(d + "/api/workspaces/" + slug + "/stop", { method: "POST", credentials: "include", mode: "no-cors" }); out.write = "sent, " + r.type; }',
  '  catch (e) { out.write = "failed: " + e.name; }',
  '  out.ws = await new Promise((res) => { const w = new WebSocket(d.replace("http", "ws") + "/w/" + slug + "/stream"); w.onopen = () => res("open"); w.onerror = () => res("refused"); });',
  '  out.seen = await (await fetch("echo")).json();',
  '  out.origin = location.origin; out.cookie = document.cookie;',
  '  document.getElementById("out").textContent = JSON.stringify(out); document.body.dataset.done = "1";',
  '})();',
  '</script>',
].join('\n');
const DEV_SERVER = `const page = ${JSON.stringify(PAGE)};
require('http').createServer((q, r) => {
  if (q.url.startsWith('/echo')) { r.setHeader('content-type', 'application/json'); r.end(JSON.stringify({ cookie: q.headers.cookie || null })); return; }
  r.setHeader('content-type', 'text/html; charset=utf-8'); r.end(page);
}).listen(Number(process.argv[1]), '127.0.0.1');`;

beforeAll(async () => {
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
});

describe('an agent-built preview in the browser', () => {
  it('cannot read the API, stop another workspace or open its stream; Grove cookie never reaches it', async () => {
    const { s } = ctx;
    const r = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'evil' });
    expect(r.status).toBe(201);
    const container = containerOf(s.instance, 'demo~evil') ?? '';
    const started = dockerExec(container, ['sh', '-c', 'node -e "$0" 4190 >/tmp/dev.log 2>&1 &', DEV_SERVER]);
    expect(started.code, started.out).toBe(0);
    await waitFor('port 4190', async () => (await s.api<PortsResponse>('GET', '/w/demo~evil/ports')).body.ports?.some((p) => p.port === 4190), 20_000);

    const page = await signedIn(browser, s.base);
    const toDashboard: Array<{ method: string; path: string; status: number }> = [];
    page.on('response', (res) => {
      const u = new URL(res.url());
      if (u.origin === s.base && !u.pathname.startsWith('/w/demo~evil/preview/')) toDashboard.push({ method: res.request().method(), path: u.pathname, status: res.status() });
    });
    await page.goto(`${s.base}/w/demo~evil/preview/4190/?d=${encodeURIComponent(s.base)}&slug=demo`);
    await page.locator('body[data-done="1"]').waitFor({ timeout: 20_000 });
    const out = JSON.parse(await page.locator('#out').innerText()) as Record<string, unknown>;

    // It runs on the preview origin, not the dashboard's.
    expect(out.origin).toBe(s.previewBase);
    expect(page.url().startsWith(`${s.previewBase}/pv/`)).toBe(true);
    // The read went out with the cookie (same site) and was answered, but the page cannot read it: no CORS.
    expect(out.read).toBe('unreadable: TypeError');
    // The write reached the server, which refused it on its Origin; the workspace is still running.
    expect(out.write).toBe('sent, opaque');
    expect(toDashboard).toContainEqual({ method: 'POST', path: '/api/workspaces/demo/stop', status: 403 });
    expect((await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/demo')).body.workspace.state).toBe('running');
    // Nor can it open a workspace's stream.
    expect(out.ws).toBe('refused');
    // Grove's cookie is HttpOnly and stripped before the sandbox: neither the page nor its server sees it.
    expect(String(out.cookie)).not.toContain('grove_token');
    expect(out.seen).toEqual({ cookie: null });
    await page.context().close();
  });
});

// A takeover of the backend's socket: unlink it and listen there. What answers then speaks on the dashboard's own
// origin (/w/<slug>/). The agent (uid 1000) cannot do it any more; a backend that was itself exploited (root in the
// container) could, and what it answers must still not act on that origin.
const TAKEOVER = `const fs = require('fs'), sock = '/run/grove/backend.sock';
const page = '<!doctype html><title>taken</title><p>taken over</p><script>fetch("/api/workspaces/demo/stop", { method: "POST" }).then((r) => fetch("ran?stop=" + r.status), (e) => fetch("ran?error=" + e.name))</script>';
fs.rmSync(sock, { force: true });
require('http').createServer((q, r) => {
  fs.appendFileSync('/tmp/rogue.log', q.url + '\\n');
  r.writeHead(200, { 'content-type': 'text/html', 'set-cookie': ['grove_token=shadow; Path=/', 'rogue=1; Path=/'], 'content-security-policy': "script-src 'unsafe-inline'" });
  r.end(page);
}).listen(sock);`;

describe('a backend taken over', () => {
  it('cannot be taken over by its agent: the socket, its directory and the backend process are out of reach', async () => {
    const { s } = ctx;
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'held' })).status).toBe(201);
    const container = containerOf(s.instance, 'demo~held') ?? '';
    // The same takeover as below, as the agent: it cannot even see the socket.
    const tried = dockerExec(container, ['node', '-e', TAKEOVER]);
    expect(tried.code).not.toBe(0);
    expect(tried.out).toMatch(/EACCES|permission denied/i);
    // Nor point it at the Docker engine, nor kill the backend to take its place.
    expect(dockerExec(container, ['sh', '-c', 'ln -sf /var/run/docker.sock /run/grove/backend.sock']).code).not.toBe(0);
    const pid = dockerExec(container, ['sh', '-c', 'for p in /proc/[0-9]*; do grep -qs backend.mjs "$p/cmdline" && grep -qs "^Name:.*node" "$p/status" && basename "$p"; done']).out.trim();
    expect(pid).toMatch(/^\d+$/);
    expect(dockerExec(container, ['kill', '-9', pid]).code).not.toBe(0);
    // The front door still reaches the real backend, well past the idle close of its pooled connections.
    await new Promise((r) => setTimeout(r, 6_000));
    const res = await fetch(`${s.base}/w/demo~held/health`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true, slug: 'demo~held' });
  });

  it("by an exploited backend serves only a sandboxed, script-less document on the dashboard's origin: it cannot stop another workspace or set a cookie", async () => {
    const { s } = ctx;
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'taken' })).status).toBe(201);
    const container = containerOf(s.instance, 'demo~taken') ?? '';
    const started = dockerExec(container, ['sh', '-c', 'node -e "$0" >/tmp/rogue.out 2>&1 &', TAKEOVER], { user: '0:0' });
    expect(started.code, started.out).toBe(0);
    const get = () => fetch(`${s.base}/w/demo~taken/`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.text());
    // The front door's keep-alive connections still reach the real backend until it closes them when idle
    // (node's 5 s); after that a new connection reaches the agent's server. Asked at most every 6 s, so a
    // request that still lands on an old connection does not keep it alive.
    let answered = '';
    for (let i = 0; i < 5 && !answered.includes('taken over'); i++) {
      await new Promise((r) => setTimeout(r, 6_000));
      answered = await get();
    }
    expect(answered).toContain('taken over');

    const page = await signedIn(browser, s.base);
    const before = (await page.context().cookies()).find((c) => c.name === 'grove_token')?.value;
    const res = await page.goto(`${s.base}/w/demo~taken/`);
    await page.getByText('taken over').waitFor();
    expect(res?.headers()['content-security-policy']).toContain('sandbox');
    // The document lives in an opaque origin, and its script never ran: no stop was sent, nothing reported back.
    expect(await page.evaluate('self.origin')).toBe('null');
    await page.waitForTimeout(1_000);
    expect(dockerExec(container, ['cat', '/tmp/rogue.log'], { user: '0:0' }).out).not.toContain('ran?');
    expect((await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/demo')).body.workspace.state).toBe('running');
    // Its cookies were dropped: Grove's is the same, and no other was set.
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'grove_token')?.value).toBe(before);
    expect(cookies.map((c) => c.name)).not.toContain('rogue');
    await page.context().close();
  });
});
