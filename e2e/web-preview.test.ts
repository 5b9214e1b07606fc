// The Preview view in real Chromium against the real server and sandbox: a dev server started in the workspace shows
// in the view's frame, which is on the preview listener's origin (never the dashboard's); Reload loads it again; the
// chosen port is remembered across a page reload; the conversation's ports row shows a port there; a server that stops
// is said to be gone, with the others offered;
// stopped, the view offers Reopen, and the same address shows the page again once the server listens again.
// Screenshot workbench-preview.
import type { Frame, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { PortsResponse, PreviewUrlResponse } from '@grove/contracts';
import { TOKEN, containerOf, dockerExec, waitFor } from './harness.ts';
import { useWebServer } from './support/web.ts';

// A dependency-free dev server, run with node -e inside the sandbox: argv = port, tag. It answers / with a page that
// names it and counts its visits (so a reload is seen), and nothing else.
const DEV_SERVER = `
const http = require('http');
const [port, tag] = process.argv.slice(1);
let visits = 0;
http.createServer((req, res) => {
  if (req.url !== '/') { res.writeHead(404); res.end(); return; }
  visits += 1;
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><meta charset="utf-8"><title>dev</title><h1>Hello from ' + tag + '</h1><p id="visit">visit ' + visits + '</p>');
}).listen(Number(port), '127.0.0.1');
`;

const web = useWebServer('web-preview');

/** Starts the dev server in the default workspace's sandbox, as the agent; answers its pid once /ports lists it. */
async function serve(port: number, tag: string): Promise<string> {
  const container = containerOf(web.s.instance, 'demo') ?? '';
  const r = dockerExec(container, ['sh', '-c', `node -e "$0" ${port} "$1" >/tmp/dev-${port}.log 2>&1 & echo $!`, DEV_SERVER, tag]);
  expect(r.code, r.out).toBe(0);
  await waitFor(`listening on ${port}`, async () => (await web.s.api<PortsResponse>('GET', '/w/demo/ports')).body.ports?.some((p) => p.port === port && p.preview), 20_000);
  return r.out.trim();
}

/** The preview's frame, once it has loaded something from the preview origin. */
function previewFrame(page: Page): Promise<Frame> {
  return waitFor('the preview frame', async () => page.frames().find((f) => f.url().includes('/pv/')), 20_000);
}

describe('Preview view', () => {
  it("frames the dev server from the preview origin, reloads it, follows its port, and shows it again after a reopen", async () => {
    const page = await web.signedIn(1280);
    await page.goto(`${web.s.base}/p/demo/w/default`);
    const previewTab = page.getByRole('tab', { name: 'Preview', exact: true });
    await previewTab.click();

    // Nothing listens yet: the view says how to start something, and its button opens the Terminal view.
    await page.getByText('Nothing listens yet: start a dev server (for example in the Terminal) and it shows here.').waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Open the Terminal' }).click();
    await expect.poll(() => page.getByRole('tab', { name: 'Terminal', exact: true }).getAttribute('aria-selected')).toBe('true');
    await previewTab.click();

    // A dev server starts: the view shows it by itself (it re-reads the ports while on screen).
    await serve(4173, 'the first server');
    const frame = page.frameLocator('iframe.preview-frame');
    await frame.getByRole('heading', { name: 'Hello from the first server' }).waitFor({ timeout: 20_000 });
    const iframe = page.locator('iframe.preview-frame');
    expect(await iframe.getAttribute('sandbox')).toBe('allow-scripts allow-forms allow-same-origin');
    expect(await iframe.getAttribute('referrerpolicy')).toBe('no-referrer');

    // The frame's document is on the preview listener's origin, at the workspace's stable address (the one the
    // dashboard's /w/<slug>/preview/<port>/ redirects to), not on the dashboard's.
    const first = await previewFrame(page);
    const at = first.url();
    expect(new URL(at).origin).toBe(web.s.previewBase);
    expect(new URL(at).origin).not.toBe(new URL(web.s.base).origin);
    expect(await first.evaluate('self.origin')).toBe(web.s.previewBase);
    const redirect = await fetch(`${web.s.base}/w/demo/preview/4173/`, { headers: { authorization: `Bearer ${TOKEN}` }, redirect: 'manual' });
    expect(redirect.headers.get('location')).toBe(at);
    expect((await web.s.api<PreviewUrlResponse>('GET', '/api/workspaces/demo/preview/4173')).body).toEqual({ port: 4173, url: at });
    // Only for a workspace that exists.
    const unknown = await web.s.api<{ code: string }>('GET', '/api/workspaces/demo~nope/preview/4173');
    expect([unknown.status, unknown.body.code]).toEqual([404, 'workspace_not_found']);
    expect(await page.getByRole('link', { name: 'Open in new tab ↗' }).getAttribute('href')).toBe(at);
    // The preview may be framed (the dev server sent no policy and Grove adds none there); the dashboard may not.
    const framed = await fetch(at);
    expect(framed.headers.get('x-frame-options')).toBeNull();
    expect(framed.headers.get('content-security-policy')).toBeNull();
    const dashboard = await fetch(`${web.s.base}/p/demo/w/default`);
    expect(dashboard.headers.get('x-frame-options')).toBe('DENY');
    expect(dashboard.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    await web.shot(page, 'workbench-preview');

    // Reload asks the dev server again: the frame shows a later visit (the fetch above counted one too).
    const visit = frame.locator('#visit');
    const visitNumber = async () => Number((await visit.innerText()).replace('visit ', ''));
    const before = await visitNumber();
    await page.getByRole('button', { name: 'Reload', exact: true }).click();
    await expect.poll(visitNumber, { timeout: 20_000 }).toBeGreaterThan(before);

    // Another server: chosen in the port chooser, and remembered across a page reload although 4173 comes first.
    const second = await serve(4175, 'the second server');
    const chooser = page.getByRole('combobox', { name: 'Preview port' });
    await expect.poll(() => chooser.locator('option').allInnerTexts(), { timeout: 20_000 }).toContain(':4175');
    await chooser.selectOption('4175');
    await frame.getByRole('heading', { name: 'Hello from the second server' }).waitFor({ timeout: 20_000 });
    await page.reload();
    await previewTab.click();
    await frame.getByRole('heading', { name: 'Hello from the second server' }).waitFor({ timeout: 20_000 });

    // The conversation's ports row shows a port in this view.
    await page.getByRole('tab', { name: 'Conversation', exact: true }).click();
    const ports = page.getByRole('region', { name: 'Listening ports' });
    // The row reads the ports once when the pane mounts; ask again so it does not depend on when that was.
    await ports.getByRole('button', { name: 'Refresh ports' }).click();
    await ports.getByRole('button', { name: 'Show port 4173 in preview' }).click({ timeout: 20_000 });
    await expect.poll(() => previewTab.getAttribute('aria-selected')).toBe('true');
    await frame.getByRole('heading', { name: 'Hello from the first server' }).waitFor({ timeout: 20_000 });
    await chooser.selectOption('4175');
    await frame.getByRole('heading', { name: 'Hello from the second server' }).waitFor({ timeout: 20_000 });

    // It stops: the view says so and offers what still listens.
    expect(second).toMatch(/^\d+$/);
    // The image has no kill binary: the shell's builtin.
    expect(dockerExec(containerOf(web.s.instance, 'demo') ?? '', ['sh', '-c', 'kill "$0"', second]).code).toBe(0);
    await page.getByText('Nothing listens on :4175 now.').waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Show :4173' }).click();
    await frame.getByRole('heading', { name: 'Hello from the first server' }).waitFor({ timeout: 20_000 });

    // Stopped (from the API, as from another tab): the view says so and offers Reopen. After the reopen nothing
    // listens until the dev server is started again, and then the same address shows it.
    expect((await web.s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
    await page.getByText(/^The workspace is stopped; its preview shows here again/).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Reopen', exact: true }).click();
    await page.getByText('Nothing listens on :4173 now.').waitFor({ timeout: 60_000 });
    await serve(4173, 'the first server, again');
    await frame.getByRole('heading', { name: 'Hello from the first server, again' }).waitFor({ timeout: 20_000 });
    expect((await previewFrame(page)).url()).toBe(at);
    await page.context().close();
  });
});
