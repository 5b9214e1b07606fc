// The dashboard in a real browser (Debian Chromium via playwright-core) against the real server, Docker and
// scripted agent: issue 4's proof. Screenshots go to docs/screenshots for the README only when
// GROVE_UPDATE_SCREENSHOTS=1 (so a test run leaves the tree clean); otherwise to the run's temp home.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TurnsResponse, Workspace } from '@grove/contracts';
import { WEB_DIR, assertWebReady, launchBrowser, reportFailure, screenshotter, signedIn as signIn } from './browser.ts';
import { cleanup, containerOf, makeHome, startServer, waitRunning, type RunningServer } from './harness.ts';

// The default workspace and two forks fill it: the cap is reached without waiting for more sandboxes.
const CAP = '3';

let s: RunningServer;
let browser: Browser;
const home = makeHome('web');

function serve(port = '0'): Promise<RunningServer> {
  return startServer({ home, env: { GROVE_WEB_DIR: WEB_DIR, GROVE_MAX_RUNNING: CAP, GROVE_PORT: port } });
}

beforeAll(async () => {
  // The server mounts the dashboard only when it is built; without it every page here is the fallback.
  assertWebReady();
  s = await serve();
  await waitRunning(s, 'demo');
  browser = await launchBrowser();
});

afterEach(async (ctx) => {
  if (ctx.task.result?.state === 'fail') await reportFailure(browser, s);
});

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  cleanup(home);
});

const signedIn = (width: number): Promise<Page> => signIn(browser, s.base, width);

let t0 = Date.now();
/** Where the long engineer test spends its time, in the test output. */
const step = (what: string) => console.log(`[web e2e] ${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s`);

const shot = screenshotter(home);

/**
 * Types a message and sends it with the Send button, which Playwright waits for: while the previous
 * turn is still ending the button says Queue, and Enter would queue the message instead of sending it.
 */
async function send(scope: Page | Locator, text: string): Promise<void> {
  await scope.getByLabel('Message').fill(text);
  await scope.getByRole('button', { name: 'Send', exact: true }).click();
}

/** Enter sends too (and runs /resume). */
async function enter(scope: Page | Locator, text: string): Promise<void> {
  const box = scope.getByLabel('Message');
  await box.fill(text);
  await box.press('Enter');
}

/** The tab panel of one workspace (panels of other tabs stay mounted, hidden). */
const pane = (page: Page, name: string) => page.getByRole('region', { name: `Workspace ${name}`, includeHidden: true });
const tabLink = (page: Page, name: string) => page.getByRole('navigation', { name: 'Open workspaces' }).getByRole('link', { name: new RegExp(`^${name} \\(`) });
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });
const meter = (page: Page) => page.locator('.meter-label');
const reply = (scope: Page | Locator, text: string) => scope.locator('.msg-assistant:not(.msg-streaming)', { hasText: text });

async function fork(page: Page, name: string): Promise<void> {
  await page.getByRole('button', { name: 'New workspace' }).first().click();
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create workspace' }).click();
  await page.getByRole('list', { name: `Progress of ${name}` }).first().waitFor();
}

describe('dashboard', () => {
  it('asks for the access link when the browser has no token', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(s.base);
    await page.getByText('Open Grove with your access link').waitFor();
    await ctx.close();
  });

  it('a non-engineer sends two messages in the default thread, watches the reply stream and finds both after reload', async () => {
    const page = await signedIn(1280);
    await page.getByLabel('Message').waitFor();
    await enter(page, 'hello from the browser');
    await reply(page, 'You said: "hello from the browser"').waitFor();

    // A slow turn: the streamed text is visible before the reply is persisted, and the button stops it.
    await send(page, 'sleep 2500');
    await page.locator('.msg-streaming').waitFor();
    await page.getByRole('button', { name: 'Stop the reply' }).waitFor();
    await shot(page, 'default-thread-streaming');
    await reply(page, 'Slept for 2500 ms').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Send' }).waitFor();

    const body = await page.locator('main').innerText();
    for (const word of ['branch', 'worktree', 'container', 'fork']) expect(body.toLowerCase()).not.toContain(word);

    await page.reload();
    await page.locator('.msg-user', { hasText: 'hello from the browser' }).waitFor();
    await page.locator('.msg-user', { hasText: 'sleep 2500' }).waitFor();
    await reply(page, 'Slept for 2500 ms').waitFor();
    await shot(page, 'default-thread');

    const phone = await signedIn(390);
    await reply(phone, 'Slept for 2500 ms').waitFor();
    await shot(phone, 'default-thread-390');
    await phone.context().close();

    // Its sandbox dies (a crash, a Docker restart): the page says it stopped unexpectedly, not that it was put to
    // sleep, keeps the reason for whoever runs Grove, and a message written there brings the same conversation back.
    execFileSync('docker', ['kill', containerOf(s.instance, 'demo') ?? 'no-container']);
    await page.getByText('This conversation is paused').waitFor({ timeout: 30_000 });
    await page.getByText('It stopped unexpectedly. Everything is kept').waitFor();
    expect(await page.getByText('put to sleep').count()).toBe(0);
    await page.getByText('Details for whoever runs Grove').click();
    await page.getByText(/^the sandbox stopped unexpectedly: it exited/).waitFor();
    // The conversation so far is there to read while it is paused (read on the host, its backend is down).
    const earlier = page.getByRole('region', { name: 'Earlier in this conversation' });
    await earlier.locator('.msg-user', { hasText: 'hello from the browser' }).waitFor();
    await earlier.locator('.msg-assistant', { hasText: 'Slept for 2500 ms' }).waitFor();
    await page.getByRole('button', { name: 'Reopen', exact: true }).waitFor();
    // Writing is enough to carry on: the message waits while the conversation reopens, then goes out, once.
    const held = page.getByLabel('Write to carry on the conversation');
    await held.fill('are you back?');
    await page.getByText('Sending reopens the conversation; the message goes out once it is open.').waitFor();
    await shot(page, 'default-thread-paused');
    await held.press('Enter');
    await reply(page, 'You said: "are you back?"').waitFor({ timeout: 60_000 });
    await page.getByLabel('Message').waitFor();
    await reply(page, 'Slept for 2500 ms').waitFor();
    expect(await page.locator('.msg-user', { hasText: 'are you back?' }).count()).toBe(1);
    expect(await page.getByRole('list', { name: 'Waiting to be sent' }).count()).toBe(0);
    await page.context().close();
  });

  it('a reply that changed a file shows "1 file changed" with its diff, puts back what is outside the allowed paths, and undoes', async () => {
    const notes = path.join(home, 'worktrees', 'demo', 'default', 'notes.txt');
    const page = await signedIn(1280);
    await page.getByLabel('Message').waitFor();
    const block = (text: string) => page.locator('.msg-changes', { hasText: text });

    await send(page, 'write notes.txt first line');
    await reply(page, 'I wrote notes.txt').waitFor();
    await send(page, 'write notes.txt second line');
    await reply(page, 'I wrote notes.txt').nth(1).waitFor();
    expect(fs.readFileSync(notes, 'utf8')).toBe('second line');

    // The newest changing reply: one file changed, with its line counts and the undo button.
    const latest = page.locator('.msg-changes').nth(1);
    await latest.getByText('1 file changed').waitFor();
    await latest.getByText('1 file changed').click();
    const file = latest.getByRole('button', { name: /changed\s*notes\.txt/ });
    await file.waitFor();
    await latest.getByLabel('1 line added, 1 removed').waitFor();
    await file.click();
    const diff = latest.getByRole('region', { name: 'Changes in notes.txt' });
    await diff.locator('.diff-add', { hasText: '+second line' }).waitFor();
    await diff.locator('.diff-del', { hasText: '-first line' }).waitFor();
    expect(await page.locator('.msg-changes').first().getByRole('button', { name: 'Undo these changes' }).count()).toBe(0);

    // Outside the allowed paths: put back, and said so in plain words; the reply changed no file that stays.
    expect((await s.api('PUT', '/api/projects/demo/config', { allowedPaths: ['notes.txt'] })).status).toBe(200);
    try {
      await send(page, 'write secret.md not allowed');
      await block('outside the allowed paths').getByText('secret.md').waitFor();
      await block('outside the allowed paths').getByText('1 change was put back because it is outside the allowed paths').waitFor();
      expect(fs.existsSync(path.join(home, 'worktrees', 'demo', 'default', 'secret.md'))).toBe(false);
      await latest.scrollIntoViewIfNeeded();
      await shot(page, 'turn-changes');
    } finally {
      await s.api('PUT', '/api/projects/demo/config', {});
    }
    await page.getByRole('button', { name: 'Send' }).waitFor();

    // Undo, behind a confirmation: the file is back, the thread says so, and the earlier reply is next.
    await latest.getByRole('button', { name: 'Undo these changes' }).click();
    await latest.getByText('Put these files back to how they were before this reply?').waitFor();
    await latest.getByRole('button', { name: 'Yes, undo' }).click();
    await page.locator('.msg-undo', { hasText: 'Undone: 1 file is back to how it was before that reply.' }).waitFor();
    await latest.getByText('undone', { exact: true }).waitFor();
    await latest.getByRole('button', { name: 'Undo these changes' }).waitFor({ state: 'detached' });
    expect(fs.readFileSync(notes, 'utf8')).toBe('first line');
    const first = page.locator('.msg-changes').first();
    await first.getByRole('button', { name: 'Undo these changes' }).waitFor();
    const turns = await s.api<TurnsResponse>('GET', '/api/workspaces/demo/turns');
    expect(turns.body.turns.filter((t) => t.recorded).map((t) => [t.undone, t.undoNext])).toEqual([
      [true, false],
      [false, true],
    ]);
    // The reader never had to know the sandbox's words.
    const body = (await page.locator('main').innerText()).toLowerCase();
    for (const word of ['branch', 'worktree', 'container', 'fork', 'commit', 'refs/']) expect(body).not.toContain(word);

    // Keyboard: the summary and the undo button are reachable; Enter opens and asks.
    await first.locator('summary').focus();
    await page.keyboard.press('Enter');
    await first.getByRole('button', { name: /added\s*notes\.txt/ }).waitFor();
    await first.getByRole('button', { name: 'Undo these changes' }).focus();
    await page.keyboard.press('Enter');
    await first.getByRole('button', { name: 'Keep them' }).waitFor();
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await first.getByRole('button', { name: 'Undo these changes' }).waitFor();
    expect(fs.readFileSync(notes, 'utf8')).toBe('first line');
    await page.context().close();

    // 390 px wide: the block fits, its diff scrolls inside it.
    const phone = await signedIn(390);
    const phoneBlock = phone.locator('.msg-changes').first();
    await phoneBlock.getByText('1 file changed').click();
    await phoneBlock.getByRole('button', { name: /notes\.txt/ }).click();
    await phoneBlock.locator('.diff-add', { hasText: '+first line' }).waitFor();
    const box = await phoneBlock.boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= 390).toBe(true);
    // A string: the e2e tsconfig has no DOM types.
    expect(await phone.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await phone.context().close();
  });

  it('an engineer forks two workspaces, streams in both tabs at once, stops a reply, hits the cap, tears one down and resumes the other after a restart', async () => {
    t0 = Date.now();
    const page = await signedIn(1280);
    await page.goto(`${s.base}/workspaces`);
    await meter(page).getByText('1 / 3').waitFor();

    // The fork dialog checks names with the server's schema, then shows the real lifecycle progress.
    await page.getByRole('button', { name: 'New workspace' }).click();
    await page.getByLabel('Name').fill('Bad_Name');
    await page.getByText('name must be lowercase').waitFor();
    await page.getByLabel('Name').fill('alpha');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('list', { name: 'Progress of alpha' }).first().waitFor();
    await shot(page, 'fork-progress');
    // A fork opens its own tab once it is ready: no click on Open.
    await page.waitForURL('**/p/demo/w/alpha', { timeout: 90_000 });
    await pane(page, 'alpha').getByLabel('Message').waitFor();

    await page.getByRole('link', { name: 'All workspaces' }).click();
    await fork(page, 'beta');
    await page.waitForURL('**/p/demo/w/beta', { timeout: 90_000 });
    await pane(page, 'beta').getByLabel('Message').waitFor();
    step('forked two');

    // Both agents reply at the same time, each in its own tab; a hidden tab keeps streaming.
    await send(pane(page, 'beta'), 'sleep 8000');
    await pane(page, 'beta').locator('.msg-streaming').waitFor();
    await tabLink(page, 'alpha').click();
    await pane(page, 'beta').locator('.msg-streaming').waitFor({ state: 'hidden' });
    expect(await pane(page, 'beta').locator('.msg-streaming').count()).toBe(1);
    await send(pane(page, 'alpha'), 'sleep 6000');
    await pane(page, 'alpha').locator('.msg-streaming').waitFor();
    await tabLink(page, 'beta').locator('.tab-replying').waitFor();
    // Side by side: beta pinned to the right, both streams in view at once.
    await tabLink(page, 'beta').click();
    await pane(page, 'beta').getByRole('button', { name: 'Side by side' }).click();
    await page.waitForURL('**/p/demo/w/alpha');
    await pane(page, 'alpha').locator('.msg-streaming').waitFor();
    await pane(page, 'beta').locator('.msg-streaming').waitFor();
    await shot(page, 'workspaces-tabs');
    await reply(pane(page, 'alpha'), 'Slept for 6000 ms').waitFor({ timeout: 30_000 });
    await reply(pane(page, 'beta'), 'Slept for 8000 ms').waitFor({ timeout: 30_000 });

    // A draft stays with its tab.
    await pane(page, 'alpha').getByLabel('Message').fill('a draft for alpha');
    await tabLink(page, 'beta').click();
    await pane(page, 'alpha').waitFor({ state: 'hidden' });
    await tabLink(page, 'alpha').click();
    expect(await pane(page, 'alpha').getByLabel('Message').inputValue()).toBe('a draft for alpha');

    // The stop button ends a running turn.
    await tabLink(page, 'beta').click();
    await send(pane(page, 'beta'), 'sleep 20000');
    await pane(page, 'beta').locator('.msg-streaming').waitFor();
    await pane(page, 'beta').getByRole('button', { name: 'Stop the reply' }).click();
    await pane(page, 'beta').getByText('The reply was stopped.').waitFor({ timeout: 10_000 });
    await pane(page, 'beta').getByRole('button', { name: 'Send' }).waitFor();
    await shot(page, 'workspace-thread');
    step('streamed and stopped');

    // Three of three sandboxes: new workspaces wait in line, and the page says which workspaces to stop.
    await page.getByRole('link', { name: 'All workspaces' }).click();
    await meter(page).getByText('3 / 3').waitFor({ timeout: 15_000 });
    await page.getByText(/All 3 sandboxes are in use \(3 running\)\. Stop or tear down one of: .*alpha/).waitFor();
    // Each card says what its workspace is about: the last thing said there.
    await card(page, 'alpha').locator('.card-last', { hasText: 'Agent: Slept for 6000 ms' }).waitFor();
    await card(page, 'beta').locator('.card-last').waitFor();
    await shot(page, 'workspaces-cap');
    step('cap');

    // The fork dialog offers the line by default; the card shows the place and leaves the line without a trace.
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    expect(await page.getByLabel('Wait in line for a free sandbox').isChecked()).toBe(true);
    await page.getByLabel('Name').fill('gamma');
    await page.getByRole('button', { name: 'Wait in line' }).click();
    await page.getByText('Waiting in line: #1.').waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    await card(page, 'gamma').getByText('#1 in line').waitFor();
    await card(page, 'gamma').getByText('Waiting in line', { exact: true }).waitFor();
    expect(await card(page, 'gamma').locator('.card-last').count()).toBe(0);
    await meter(page).getByText('1 waiting in line').waitFor();
    await card(page, 'gamma').getByRole('button', { name: 'Leave the line' }).click();
    await card(page, 'gamma').waitFor({ state: 'detached', timeout: 15_000 });
    step('queued and left the line');

    // Ctrl+K opens the resume picker anywhere.
    await page.keyboard.press('Control+k');
    const picker = page.getByRole('dialog', { name: 'Resume a workspace' });
    await picker.getByRole('option', { name: /beta/ }).waitFor();
    await picker.getByText('Agent: Slept for 6000 ms').waitFor();
    await shot(page, 'resume-picker');
    await page.keyboard.press('Escape');

    // GET /resume is a page: it opens the picker on arrival; choosing alpha opens its tab.
    const resume = await page.goto(`${s.base}/resume`);
    expect(resume?.status()).toBe(200);
    await picker.getByRole('option', { name: /alpha/ }).waitFor();
    await picker.getByRole('combobox', { name: 'Find a workspace' }).fill('alpha');
    await page.keyboard.press('Enter');
    await page.waitForURL('**/p/demo/w/alpha');
    await pane(page, 'alpha').getByLabel('Message').waitFor();
    await page.getByRole('link', { name: 'All workspaces' }).click();

    // Tear down alpha from its card: the confirmation says the branch is kept; its tab is closed by hand.
    await card(page, 'alpha').getByRole('button', { name: 'Tear down' }).click();
    await page.getByText('is kept').waitFor();
    await shot(page, 'teardown-confirm');
    await page.getByRole('dialog').getByRole('button', { name: 'Tear down' }).click();
    await meter(page).getByText('2 / 3').waitFor({ timeout: 30_000 });
    await card(page, 'alpha').waitFor({ state: 'detached', timeout: 30_000 });
    await page.getByRole('button', { name: 'Close tab alpha' }).click();
    expect(await tabLink(page, 'alpha').count()).toBe(0);

    // Stop beta, so resuming it after the restart has to start its sandbox again.
    await card(page, 'beta').getByRole('button', { name: 'Stop' }).click();
    await meter(page).getByText('1 / 3').waitFor({ timeout: 30_000 });

    // Restart the server on the same home and port (same origin: the tabs in localStorage stay).
    step('torn down and stopped');
    const port = new URL(s.base).port;
    await s.stop();
    s = await serve(port);
    await waitRunning(s, 'demo');
    step('restarted');

    // /resume typed in a composer (the default thread's) opens the picker; choosing beta reopens it in a tab.
    await page.goto(`${s.base}/p/demo/w/default`);
    await tabLink(page, 'beta').waitFor();
    await enter(pane(page, 'demo'), '/resume');
    await picker.getByRole('option', { name: /beta/ }).waitFor();
    // Stopped, yet quoted: the last message is read on the host, not from its (stopped) backend.
    await picker.getByRole('option', { name: /beta/ }).getByText(/^(You|Agent): \S/).waitFor();
    await picker.getByRole('combobox', { name: 'Find a workspace' }).fill('beta');
    await page.keyboard.press('Enter');
    await page.waitForURL('**/p/demo/w/beta');
    await pane(page, 'beta').getByRole('list', { name: 'Progress of beta' }).waitFor();
    await shot(page, 'reopen-progress');
    await reply(pane(page, 'beta'), 'Slept for 8000 ms').waitFor({ timeout: 60_000 });
    await pane(page, 'beta').locator('.msg-user', { hasText: 'sleep 20000' }).waitFor();
    await pane(page, 'beta').getByText('The reply was stopped.').waitFor();
    step('resumed');

    const phone = await signedIn(390);
    await phone.goto(`${s.base}/p/demo/w/beta`);
    await reply(pane(phone, 'beta'), 'Slept for 8000 ms').waitFor();
    await shot(phone, 'workspace-thread-390');
    await phone.context().close();
    await page.context().close();
  }, 240_000);

  it('a 429 after the dialog opened shows why and the way out, naming the running workspaces', async () => {
    const page = await signedIn(1280);
    await page.goto(`${s.base}/workspaces`);
    // The default workspace and beta run: one of three slots is free, so the dialog opens.
    await meter(page).getByText('2 / 3').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    await page.getByLabel('Name').fill('delta');
    // Someone else takes the last slot meanwhile.
    const other = await s.api('POST', '/api/workspaces', { project: 'demo', name: 'gamma' });
    expect(other.status).toBe(201);
    const dialog = page.getByRole('dialog', { name: 'New workspace' });
    // The open dialog follows the live list and now offers the line (ticked by default); declining it
    // sends a plain fork, which the server refuses with 429.
    await dialog.getByLabel('Wait in line for a free sandbox').uncheck({ timeout: 30_000 });
    await dialog.getByRole('button', { name: 'Create workspace' }).click();
    await dialog.getByRole('alert').getByText(/All 3 sandboxes are in use \(3 running\)\. Stop or tear down one of: .*beta/).waitFor();
    await dialog.getByRole('alert').getByText(/gamma/).waitFor({ timeout: 15_000 });
    await shot(page, 'fork-cap-429');
    expect((await s.api('GET', '/api/workspaces/demo~delta')).status).toBe(404);
    await page.context().close();
  });

  it('a message written to a stopped workspace at the cap stays queued beside the reason, one written to a fork in line waits too; each goes out once a slot frees', async () => {
    // gamma stopped, epsilon in its slot: three of three run again.
    expect((await s.api('POST', '/api/workspaces/demo~gamma/stop')).status).toBe(200);
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'epsilon' })).status).toBe(201);
    const page = await signedIn(1280);
    // Its address asks for a start, which the cap refuses; the reason names the way out.
    await page.goto(`${s.base}/p/demo/w/gamma`);
    const gamma = pane(page, 'gamma');
    await gamma.getByText('The workspace could not be reopened').waitFor({ timeout: 30_000 });
    await gamma.getByText(/All 3 sandboxes are in use/).waitFor();

    // Written anyway: the reopen it asks for is refused too, and the message waits, not lost.
    const held = gamma.getByLabel('Write to the agent (sent once it runs)');
    await held.fill('still there?');
    await held.press('Enter');
    const queued = gamma.getByRole('list', { name: 'Waiting to be sent' });
    await queued.getByText('still there?').waitFor();
    await gamma.getByText('Sent as soon as the workspace runs.').waitFor();
    await gamma.getByRole('button', { name: 'Try again' }).waitFor({ timeout: 30_000 });
    expect((await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/demo~gamma')).body.workspace.state).toBe('stopped');

    // A fork waiting in line: its tab says so (not a blank page) and takes a first message, sent once it runs.
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'zeta', queue: true })).status).toBe(202);
    await page.goto(`${s.base}/p/demo/w/zeta`);
    const zeta = pane(page, 'zeta');
    await zeta.getByText('Waiting in line for a sandbox (#1)').waitFor({ timeout: 30_000 });
    // Its workbench views say so too, with no Reopen to press.
    await zeta.getByRole('tab', { name: 'Terminal', exact: true }).click();
    await zeta.getByText('The workspace is waiting in line for a sandbox; terminals run in its sandbox.', { exact: false }).waitFor();
    expect(await zeta.getByRole('button', { name: 'Reopen' }).count()).toBe(0);
    await zeta.getByRole('tab', { name: 'Conversation', exact: true }).click();
    await zeta.getByLabel('Write to the agent (sent once it runs)').fill('hello from the line');
    await zeta.getByLabel('Write to the agent (sent once it runs)').press('Enter');
    await zeta.getByRole('list', { name: 'Waiting to be sent' }).getByText('hello from the line').waitFor();
    // epsilon's slot goes to the first in line.
    expect((await s.api('POST', '/api/workspaces/demo~epsilon/stop')).status).toBe(200);
    await reply(zeta, 'You said: "hello from the line"').waitFor({ timeout: 60_000 });

    // A slot frees again: showing gamma's tab (restored, not yet open in this page) reopens it, and the message
    // queued there before the page changed (the tab's sessionStorage) goes out, once.
    expect((await s.api('POST', '/api/workspaces/demo~zeta/stop')).status).toBe(200);
    await tabLink(page, 'gamma').click();
    await reply(gamma, 'You said: "still there?"').waitFor({ timeout: 60_000 });
    expect(await gamma.locator('.msg-user', { hasText: 'still there?' }).count()).toBe(1);
    expect(await gamma.getByRole('list', { name: 'Waiting to be sent' }).count()).toBe(0);
    await page.context().close();

    // The default conversation refused at the cap: its reader is told in plain words, not which workspaces to
    // stop or tear down (that is for whoever runs Grove).
    expect((await s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'eta' })).status).toBe(201);
    const reader = await signedIn(1280);
    await reader.goto(`${s.base}/`);
    await reader.getByText('This conversation is paused').waitFor({ timeout: 30_000 });
    await reader.getByRole('button', { name: 'Reopen', exact: true }).click();
    await reader.getByText('The conversation could not be reopened').waitFor({ timeout: 30_000 });
    await reader.getByText(/^Every agent Grove can run is busy right now\./).waitFor();
    const said = (await reader.locator('main').innerText()).toLowerCase();
    for (const word of ['tear down', 'sandboxes', 'stop one']) expect(said, word).not.toContain(word);
    await reader.context().close();

    // A message waiting for a workspace that is then torn down is shown as not sent, once: a later workspace of
    // the same name never sends it.
    const last = await signedIn(1280);
    await last.goto(`${s.base}/p/demo/w/zeta`);
    const z = pane(last, 'zeta');
    await z.getByText('The workspace could not be reopened').waitFor({ timeout: 30_000 });
    await z.getByLabel('Write to the agent (sent once it runs)').fill('lost in teardown?');
    await z.getByLabel('Write to the agent (sent once it runs)').press('Enter');
    await z.getByRole('list', { name: 'Waiting to be sent' }).getByText('lost in teardown?').waitFor();
    await z.getByRole('button', { name: 'Try again' }).waitFor({ timeout: 30_000 });
    expect((await s.api('DELETE', '/api/workspaces/demo~zeta')).status).toBe(200);
    await z.getByText('This workspace was torn down').waitFor({ timeout: 30_000 });
    await z.getByRole('region', { name: 'Not sent' }).getByText('lost in teardown?').waitFor();
    await last.reload();
    await z.getByText('This workspace was torn down').waitFor({ timeout: 30_000 });
    expect(await z.getByRole('region', { name: 'Not sent' }).count()).toBe(0);
    await last.context().close();
  }, 180_000);
});
