// The dashboard in a real browser (Debian Chromium via playwright-core) against the real server, Docker and scripted agent.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKEN, cleanup, makeHome, startServer, waitRunning, type RunningServer } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const webDir = path.join(root, 'apps/web');
const shots = path.join(root, 'docs/screenshots');
const CHROMIUM = '/usr/bin/chromium';

let s: RunningServer;
let browser: Browser;
const home = makeHome('web');

beforeAll(async () => {
  // The server mounts the dashboard only when it is built; without it every page here is the fallback.
  if (!fs.existsSync(path.join(webDir, '.next', 'BUILD_ID'))) {
    throw new Error('apps/web is not built: run `npm run build -w @grove/web` (or scripts/setup.sh) before the web e2e test');
  }
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
  fs.mkdirSync(shots, { recursive: true });
  s = await startServer({ home, env: { GROVE_WEB_DIR: webDir, GROVE_MAX_RUNNING: '2' } });
  await waitRunning(s, 'demo');
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  cleanup(home);
});

async function signedIn(width: number): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width, height: width < 600 ? 844 : 800 } });
  const page = await ctx.newPage();
  await page.goto(`${s.base}/login?token=${TOKEN}`);
  return page;
}

async function send(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
}

describe('dashboard', () => {
  it('asks for the access link when the browser has no token', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(s.base);
    await expect(page.getByText('Open Grove with your access link').waitFor()).resolves.toBeUndefined();
    await ctx.close();
  });

  it('a non-engineer talks in the default thread, watches the reply stream and finds it all after reload', async () => {
    const page = await signedIn(1280);
    await page.getByLabel('Message').waitFor();
    await send(page, 'hello from the browser');
    await page.locator('.msg-assistant:not(.msg-streaming)', { hasText: 'You said: "hello from the browser"' }).waitFor();

    // A slow turn: the streamed text is visible before the reply is persisted, and sending waits.
    await send(page, 'sleep 2500');
    await page.locator('.msg-streaming').waitFor();
    expect(await page.getByRole('button', { name: 'Working' }).isDisabled()).toBe(true);
    await page.screenshot({ path: path.join(shots, 'default-thread-streaming.png') });
    await page.locator('.msg-assistant:not(.msg-streaming)', { hasText: 'Slept for 2500 ms' }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Send' }).waitFor();

    const body = await page.locator('main').innerText();
    for (const word of ['branch', 'worktree', 'container', 'fork']) expect(body.toLowerCase()).not.toContain(word);

    await page.reload();
    await page.locator('.msg-user', { hasText: 'hello from the browser' }).waitFor();
    await page.locator('.msg-assistant', { hasText: 'Slept for 2500 ms' }).waitFor();
    await page.screenshot({ path: path.join(shots, 'default-thread.png') });

    const phone = await signedIn(390);
    await phone.locator('.msg-assistant', { hasText: 'Slept for 2500 ms' }).waitFor();
    await phone.screenshot({ path: path.join(shots, 'default-thread-390.png') });
    await phone.context().close();
    await page.context().close();
  });

  it('an engineer forks from the dialog, sees progress and the cap, and tears the workspace down', async () => {
    const page = await signedIn(1280);
    await page.goto(`${s.base}/workspaces`);
    await page.getByText('1 / 2').waitFor();
    await page.getByRole('button', { name: 'New workspace' }).click();

    const name = page.getByLabel('Name');
    await name.fill('Bad_Name');
    await page.getByText('name must be lowercase').waitFor();
    await name.fill('web-fork');
    await page.getByLabel('First message (optional)').fill('hello from the fork dialog');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('list', { name: 'Progress of web-fork' }).first().waitFor();
    await page.screenshot({ path: path.join(shots, 'fork-progress.png') });
    await page.getByRole('link', { name: 'Open web-fork' }).waitFor({ timeout: 60_000 });
    await page.getByText('First message sent.').waitFor();
    await page.getByRole('button', { name: 'Close' }).click();

    // Two of two sandboxes: the fork button is disabled and says which workspaces to stop.
    await page.getByText('2 / 2').waitFor({ timeout: 15_000 });
    expect(await page.getByRole('button', { name: 'New workspace' }).first().isDisabled()).toBe(true);
    await page.getByText('Stop or tear down one of: demo (default), web-fork.').waitFor();
    await page.screenshot({ path: path.join(shots, 'workspaces-cap.png') });

    await page.getByRole('link', { name: 'web-fork' }).click();
    await page.locator('.msg-assistant', { hasText: 'hello from the fork dialog' }).waitFor({ timeout: 30_000 });
    await page.screenshot({ path: path.join(shots, 'workspace-thread.png') });

    await page.goto(`${s.base}/workspaces`);
    await page.getByRole('button', { name: 'Tear down' }).click();
    await page.getByText('is kept').waitFor();
    await page.screenshot({ path: path.join(shots, 'teardown-confirm.png') });
    await page.getByRole('dialog').getByRole('button', { name: 'Tear down' }).click();
    await page.getByText('1 / 2').waitFor({ timeout: 30_000 });
    expect(await page.getByRole('link', { name: 'web-fork' }).count()).toBe(0);
    await page.context().close();
  });
});
