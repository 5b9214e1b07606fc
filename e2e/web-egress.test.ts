// The workspace card's network line, the teardown confirmation and the ports list, in a real browser (Debian
// Chromium) against the real server, Docker and gate (issues 5 and 8). Sandbox traffic goes to loopback only:
// the denied request asks the gate for 127.0.0.1, which it refuses before connecting anywhere.
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EgressResponse, GroveEvent, Workspace } from '@grove/contracts';
import { WEB_DIR, assertWebReady, launchBrowser, signedIn } from './browser.ts';
import { cleanup, containerOf, dockerExec, git, makeHome, startServer, waitFor, waitRunning, type RunningServer } from './harness.ts';

const home = makeHome('web-egress');
const SLUG = 'demo~net';
let s: RunningServer;
let browser: Browser;
let page: Page;

// Asks the workspace's relay (its gate) for a loopback address: denied as blocked-address:loopback, never connected.
const DENIED_REQUEST = `
const s = require('net').connect(3128, '127.0.0.1', () => s.write('CONNECT 127.0.0.1:9 HTTP/1.1\\r\\nHost: 127.0.0.1:9\\r\\n\\r\\n'));
let out = '';
s.on('data', (d) => { out += d; if (out.includes('\\r\\n\\r\\n')) { console.log(out.split('\\r\\n')[0]); process.exit(0); } });
s.on('error', (e) => { console.log(e.code); process.exit(3); });
setTimeout(() => { console.log('no answer: ' + out); process.exit(4); }, 10000);
`;

// A dev server inside the sandbox: answers every path with its tag.
const DEV_SERVER = `require('http').createServer((q, r) => r.end('preview-ok ' + process.argv[1] + ' ' + q.url)).listen(Number(process.argv[2]), '127.0.0.1');`;

function sandbox(): string {
  const id = containerOf(s.instance, SLUG);
  if (!id) throw new Error(`no container for ${SLUG}`);
  return id;
}

const card = (p: Page, name: string) => p.locator('.card', { has: p.getByRole('link', { name, exact: true }) });
const network = (p: Page, name: string) => card(p, name).getByRole('region', { name: `Network of ${name}` });

beforeAll(async () => {
  assertWebReady();
  s = await startServer({ home, env: { GROVE_WEB_DIR: WEB_DIR, GROVE_MAX_RUNNING: '3' } });
  await waitRunning(s, 'demo');
  const r = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'net' });
  expect(r.status).toBe(201);
  browser = await launchBrowser();
  page = await signedIn(browser, s.base);
});

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  cleanup(home);
});

describe('the workspace card: network', () => {
  it('shows the policy, then a denial from inside the sandbox without a reload', async () => {
    await page.goto(`${s.base}/workspaces`);
    // The scripted provider needs no host: the project default allows nothing.
    await network(page, 'net').getByText('Network: none').waitFor();
    expect(await network(page, 'net').getByRole('list').count()).toBe(0);

    const r = dockerExec(sandbox(), ['node', '-e', DENIED_REQUEST]);
    expect(r).toMatchObject({ code: 0 });
    expect(r.out).toMatch(/^HTTP\/1\.1 403/);
    const denials = card(page, 'net').getByRole('list', { name: 'Recent denials of net' });
    await denials.getByText('127.0.0.1:9').waitFor({ timeout: 15_000 });
    await denials.getByText('blocked-address:loopback').waitFor();
    // Only this workspace's card shows it.
    const other = page.getByRole('region', { name: 'Network of demo' });
    await other.getByText('Network: none').waitFor();
    expect(await other.getByRole('list').count()).toBe(0);
  });

  it('shows a policy set through the API, and resets it to the project default', async () => {
    const put = await s.api('PUT', `/api/workspaces/${SLUG}/egress`, { rules: [{ host: 'pkg.example', ports: [443] }, { host: '*.npm.example', ports: [443] }] });
    expect(put.status).toBe(200);
    const net = network(page, 'net');
    await net.getByText('pkg.example:443, *.npm.example:443').waitFor({ timeout: 15_000 });
    await net.getByText('custom').waitFor();

    await net.getByRole('button', { name: 'Reset to project default' }).click();
    await net.getByText('Network: none').waitFor({ timeout: 15_000 });
    expect(await net.getByRole('button', { name: 'Reset to project default' }).count()).toBe(0);
    const after = await s.api<EgressResponse>('GET', `/api/workspaces/${SLUG}/egress`);
    expect(after.body).toMatchObject({ source: 'default', policy: { rules: [] } });
    const events = await s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(SLUG)}&limit=1000`);
    expect(events.body.events.filter((e) => e.type === 'egress.policy').at(-1)?.data).toMatchObject({ reset: true, after: [], applied: true });
  });
});

describe('the workspace tab: ports and previews', () => {
  it('lists a server started in the sandbox and opens its preview in a new tab, at the same address after stop and reopen', async () => {
    await page.goto(`${s.base}/p/demo/w/net`);
    const ports = page.getByRole('region', { name: 'Workspace net' }).getByRole('region', { name: 'Listening ports' });
    await ports.getByText('nothing listens yet').waitFor({ timeout: 30_000 });

    const start = (tag: string) => {
      const r = dockerExec(sandbox(), ['sh', '-c', `node -e "$0" ${tag} 4180 >/tmp/dev.log 2>&1 &`, DEV_SERVER]);
      expect(r.code, r.out).toBe(0);
    };
    start('first');
    const link = ports.getByRole('link', { name: 'Open preview of port 4180' });
    // Refreshed on demand only: click until the server is up (it starts in the background).
    await waitFor('port 4180 in the list', async () => {
      await ports.getByRole('button', { name: 'Refresh ports' }).click();
      await ports.getByRole('button', { name: 'Refresh ports' }).and(page.locator(':enabled')).waitFor();
      return (await link.count()) > 0;
    }, 20_000);
    const href = `/w/${encodeURIComponent(SLUG)}/preview/4180/`;
    expect(await link.getAttribute('href')).toBe(href);
    expect(await link.getAttribute('target')).toBe('_blank');
    const [popup] = await Promise.all([page.waitForEvent('popup'), link.click()]);
    await popup.waitForLoadState();
    // Served on the preview origin (another port), never on the dashboard's.
    expect(popup.url()).toMatch(new RegExp(`^${s.previewBase}/pv/[A-Za-z0-9_-]{43}/${encodeURIComponent(SLUG)}/4180/$`));
    expect(await popup.locator('body').innerText()).toBe('preview-ok first /');
    const previewUrl = popup.url();
    await popup.close();

    // Stop and reopen: the same address serves the server started again.
    expect((await s.api('POST', `/api/workspaces/${SLUG}/stop`)).status).toBe(200);
    await ports.getByText('the sandbox is not running').waitFor({ timeout: 30_000 });
    expect((await s.api('POST', `/api/workspaces/${SLUG}/start`)).status).toBe(200);
    start('again');
    await waitFor('port 4180 after reopening', async () => {
      await ports.getByRole('button', { name: 'Refresh ports' }).click({ timeout: 30_000 });
      await ports.getByRole('button', { name: 'Refresh ports' }).and(page.locator(':enabled')).waitFor();
      return (await link.count()) > 0;
    }, 30_000);
    expect(await link.getAttribute('href')).toBe(href);
    const again = await page.context().request.get(`${s.base}${href}`);
    expect(again.url()).toBe(previewUrl);
    expect(await again.text()).toBe('preview-ok again /');
  });
});

describe('the teardown confirmation', () => {
  it('names the kept branch and the recovery ref of the uncommitted files, and the teardown saves there', async () => {
    expect(dockerExec(sandbox(), ['sh', '-c', 'echo draft > /workspace/scratch.txt']).code).toBe(0);
    await page.goto(`${s.base}/workspaces`);
    const dialog = page.getByRole('dialog', { name: 'Tear down net?' });
    // Under a loaded full run the card can render again right after the click and lose the open dialog
    // (seen once in 739; noted for the web app): click again until the dialog is there.
    await waitFor('the teardown confirmation', async () => {
      if (!(await dialog.isVisible())) await card(page, 'net').getByRole('button', { name: 'Tear down' }).click();
      return dialog.getByText('is kept').isVisible();
    }, 30_000);
    await dialog.locator('code', { hasText: 'grove/net' }).waitFor();
    await dialog.getByText('1 uncommitted change (scratch.txt added)').waitFor({ timeout: 30_000 });
    await dialog.locator('code', { hasText: 'refs/grove/demo+net/teardown/1' }).waitFor();
    await dialog.getByText('The sandbox and anything still running in it.').waitFor();
    await dialog.getByText(/The checkout/).waitFor();

    await dialog.getByRole('button', { name: 'Tear down' }).click();
    await card(page, 'net').waitFor({ state: 'detached', timeout: 60_000 });
    const events = await s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(SLUG)}&limit=1000`);
    expect(events.body.events.find((e) => e.type === 'workspace.cleaned')?.data).toMatchObject({ branch: 'grove/net', recoveryRef: 'refs/grove/demo+net/teardown/1' });
    // Saved work lives in the workspace's own object store, never in the primary every sandbox mounts.
    expect(git(path.join(home, 'objects', `${SLUG}.git`), 'show', 'refs/grove/demo+net/teardown/1:scratch.txt')).toBe('draft');
  });
});
