// The first screen of a Grove without its demo (GROVE_DEMO=0), in a real browser against the real server: no
// project yet says so (it is not "getting ready" forever), and a project added meanwhile shows up by itself, on its
// first message, with nothing started until someone writes.
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEB_DIR, assertWebReady, launchBrowser, signedIn } from './browser.ts';
import { cleanup, makeHome, makeUpstream, startServer, type RunningServer } from './harness.ts';

const home = makeHome('web-empty');
let s: RunningServer;
let browser: Browser;

beforeAll(async () => {
  assertWebReady();
  makeUpstream(home, { 'README.md': '# shop\n' });
  s = await startServer({ home: path.join(home, 'grove'), env: { GROVE_DEMO: '0', GROVE_WEB_DIR: WEB_DIR } });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  cleanup(path.join(home, 'grove'));
  cleanup(home);
});

describe('/ with no project', () => {
  it('says there is none, then opens the first message of the project added meanwhile, and its conversation once begun, without a reload', async () => {
    const page = await signedIn(browser, s.base);
    await page.goto(`${s.base}/`);
    await page.getByRole('heading', { name: 'No projects yet' }).waitFor();
    expect(await page.getByText('Getting things ready').count()).toBe(0);

    expect((await s.api('POST', '/api/projects', { name: 'shop', source: `file://${path.join(home, 'upstream.git')}` })).status).toBe(201);
    // project.added on the event stream: the page looks again by itself.
    await page.getByRole('heading', { name: 'Start the conversation' }).waitFor({ timeout: 10_000 });
    await page.getByRole('heading', { level: 1, name: 'shop', exact: true }).waitFor();
    expect((await s.api<{ workspaces: unknown[] }>('GET', '/api/workspaces')).body.workspaces).toEqual([]);

    // Begun elsewhere (another tab's first message, `grove send`): this page follows its own project's events.
    expect((await s.api('POST', '/api/projects/shop/default')).status).toBe(202);
    expect((await s.api('POST', '/api/projects/shop/default')).status).toBe(200);
    await page.getByLabel('Message').waitFor({ timeout: 60_000 });
    await page.context().close();
  }, 60_000);
});
