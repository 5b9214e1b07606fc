// The engineer's Project settings dialog in a real browser (Debian Chromium) against the real server: overlay files
// added, replaced and removed through the UI and stored on the host, and the project's keepCheckoutOnClose
// (docs/git-flow.md). The demo project, and a second one from a local checkout with a workspace of its own.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OverlayListResponse, ProjectConfigResponse, Workspace } from '@grove/contracts';
import { WEB_DIR, assertWebReady, launchBrowser, screenshotter, signedIn } from './browser.ts';
import { git, makeHome, useServer, waitFor } from './harness.ts';

const fx = useServer('web-settings', { GROVE_WEB_DIR: WEB_DIR });
const src = makeHome('web-settings-src');
let browser: Browser;

const KEEP_LABEL = "When a workspace's pull request is merged or closed";
const overlay = async (project: string) => (await fx.s.api<OverlayListResponse>('GET', `/api/projects/${project}/overlay`)).body.files;
const config = async (project: string) => (await fx.s.api<ProjectConfigResponse>('GET', `/api/projects/${project}/config`)).body.config;
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });

beforeAll(async () => {
  assertWebReady();
  // A project from a local checkout with an untracked .env: it is taken into the overlay when the project is added.
  git(src, 'init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(src, 'README.md'), '# zeta\n');
  git(src, 'add', '.');
  git(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'first');
  fs.writeFileSync(path.join(src, '.env'), 'ZETA=1\n');
  expect((await fx.s.api('POST', '/api/projects', { name: 'zeta', source: src })).status).toBe(201);
  // A workspace whose card names the project's setting, so a change here must reach it (a card carries the
  // setting once the workspace has a choice of its own or a pull request); and with two projects on the page
  // each group has its own way into its settings.
  const fork = await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'zeta', name: 'feat', keepCheckoutOnClose: false });
  expect(fork.status, JSON.stringify(fork.body)).toBe(201);
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  fs.rmSync(src, { recursive: true, force: true });
});

describe('Project settings', () => {
  it('adds, replaces and removes an overlay file through the dialog, each stored on the host; refusals say why', async () => {
    const page = await signedIn(browser, fx.s.base);
    // Engineers only: the default thread at / has no way in.
    await page.getByLabel('Message').waitFor();
    expect(await page.getByRole('button', { name: 'Project settings' }).count()).toBe(0);

    await page.goto(`${fx.s.base}/workspaces`);
    await page.getByRole('button', { name: 'Project settings' }).click();
    const dialog = page.getByRole('dialog', { name: 'Settings of demo' });
    await dialog.getByText(/^No overlay files: these are local files a workspace needs that git does not carry/).waitFor();
    expect(await overlay('demo')).toEqual([]);

    // Checked with the contracts' schema before anything is sent.
    const pathBox = dialog.getByLabel('Path in the checkout');
    const add = dialog.getByRole('button', { name: 'Add file' });
    await pathBox.fill('../secrets');
    await dialog.getByText('overlay path "../secrets" must not contain empty, "." or ".." segments').waitFor();
    expect(await add.isDisabled()).toBe(true);

    // A path overlay.files does not name: the server's 422, in its own words.
    await pathBox.fill('notes.txt');
    await dialog.getByLabel('Content').fill('hello');
    await add.click();
    await dialog.getByRole('alert').getByText(/notes\.txt is not an overlay file of project "demo": add it .* to overlay\.files in the project config first/).waitFor();
    expect(await overlay('demo')).toEqual([]);

    const content = 'API_URL=http://localhost:8080\nDEBUG=1\n';
    await pathBox.fill('.env');
    await dialog.getByLabel('Content').fill(content);
    await add.click();
    await dialog.getByRole('status').getByText(`Saved .env (${content.length} B).`).waitFor();
    const files = dialog.getByRole('list', { name: 'Overlay files' });
    const row = files.getByRole('listitem').filter({ hasText: '.env' });
    await row.getByText(`mounted read-only · ${content.length} B`).waitFor();
    // Stored: the API lists it and the host holds exactly that content; the form no longer does.
    expect(await overlay('demo')).toEqual([{ path: '.env', writable: false, size: content.length }]);
    expect(fs.readFileSync(path.join(fx.s.home, 'overlays', 'demo', '.env'), 'utf8')).toBe(content);
    expect(await dialog.getByLabel('Content').inputValue()).toBe('');
    await screenshotter(fx.s.home)(page, 'project-settings');

    // Replace takes the path over; the content is typed anew.
    await row.getByRole('button', { name: 'Replace .env' }).click();
    expect(await pathBox.inputValue()).toBe('.env');
    await page.keyboard.type('DEBUG=0\n');
    await dialog.getByRole('button', { name: 'Replace file' }).click();
    await row.getByText('mounted read-only · 8 B').waitFor();
    expect(fs.readFileSync(path.join(fx.s.home, 'overlays', 'demo', '.env'), 'utf8')).toBe('DEBUG=0\n');

    // Remove asks first; keeping it changes nothing.
    await row.getByRole('button', { name: 'Remove .env' }).click();
    const confirm = row.getByRole('group', { name: /^Remove \.env\? Workspaces forked or reopened from now on no longer get it/ });
    await confirm.getByRole('button', { name: 'Keep it' }).click();
    await row.getByRole('button', { name: 'Remove .env' }).click();
    await confirm.getByRole('button', { name: 'Yes, remove' }).click();
    await dialog.getByText(/^No overlay files:/).waitFor();
    expect(await overlay('demo')).toEqual([]);
    expect(fs.existsSync(path.join(fx.s.home, 'overlays', 'demo', '.env'))).toBe(false);

    // The picker reaches the other project; its .env was taken from its checkout when it was added.
    await dialog.getByLabel('Project', { exact: true }).selectOption('zeta');
    const zeta = page.getByRole('dialog', { name: 'Settings of zeta' });
    const zetaEnv = zeta.getByRole('list', { name: 'Overlay files' }).getByRole('listitem').filter({ hasText: '.env' });
    await zetaEnv.getByText('mounted read-only · 7 B').waitFor();
    await zeta.getByRole('button', { name: 'Close' }).click();
    await zeta.waitFor({ state: 'detached' });
    // So does the link next to its group's heading.
    await page.getByRole('button', { name: 'Settings of zeta' }).click();
    await zetaEnv.getByText('mounted read-only · 7 B').waitFor();
    await page.context().close();
  }, 120_000);

  it("sets the project's keepCheckoutOnClose, keeps the rest of its config, and the cards name the new setting", async () => {
    // Something else in the config that the dialog's PUT must send back unchanged.
    expect((await fx.s.api('PUT', '/api/projects/zeta/config', { git: { checkpointAfterTurn: false } })).status).toBe(200);
    const before = await config('zeta');
    expect(before.keepCheckoutOnClose).toBeUndefined();

    const page = await signedIn(browser, fx.s.base);
    await page.goto(`${fx.s.base}/workspaces`);
    const onCard = card(page, 'feat').getByLabel('When its pull request is merged or closed');
    await onCard.getByRole('option', { name: 'Project setting: clean up' }).waitFor({ state: 'attached' });

    await page.getByRole('button', { name: 'Settings of zeta' }).click();
    const dialog = page.getByRole('dialog', { name: 'Settings of zeta' });
    const keep = dialog.getByLabel(KEEP_LABEL);
    await keep.and(page.locator(':enabled')).waitFor();
    expect(await keep.inputValue()).toBe('clean');

    await keep.selectOption('keep');
    await waitFor('keepCheckoutOnClose true', async () => (await config('zeta')).keepCheckoutOnClose === true, 10_000);
    expect(await config('zeta')).toEqual({ ...before, keepCheckoutOnClose: true });
    // The card behind the dialog follows without a reload (a config change writes no event).
    await onCard.getByRole('option', { name: 'Project setting: keep the checkout' }).waitFor({ state: 'attached' });

    await keep.and(page.locator(':enabled')).waitFor();
    await keep.selectOption('clean');
    await waitFor('keepCheckoutOnClose false', async () => (await config('zeta')).keepCheckoutOnClose === false, 10_000);
    await onCard.getByRole('option', { name: 'Project setting: clean up' }).waitFor({ state: 'attached' });

    // After a reload the dialog shows what the server holds.
    await keep.and(page.locator(':enabled')).waitFor();
    await keep.selectOption('keep');
    await waitFor('keepCheckoutOnClose true again', async () => (await config('zeta')).keepCheckoutOnClose === true, 10_000);
    await page.reload();
    await page.getByRole('button', { name: 'Settings of zeta' }).click();
    const again = page.getByRole('dialog', { name: 'Settings of zeta' }).getByLabel(KEEP_LABEL);
    await again.and(page.locator(':enabled')).waitFor();
    expect(await again.inputValue()).toBe('keep');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog', { name: 'Settings of zeta' }).waitFor({ state: 'detached' });
    await page.context().close();

    // 390 px: the dialog's controls fit without horizontal scrolling.
    const phone = await signedIn(browser, fx.s.base, 390);
    await phone.goto(`${fx.s.base}/workspaces`);
    await phone.getByRole('button', { name: 'Project settings' }).click();
    const small = phone.getByRole('dialog', { name: 'Settings of demo' });
    await small.getByLabel(KEEP_LABEL).waitFor();
    for (const name of ['Add file', 'Close']) {
      const box = await small.getByRole('button', { name, exact: true }).boundingBox();
      expect(box, name).not.toBeNull();
      expect((box?.x ?? 0) + (box?.width ?? 0), name).toBeLessThanOrEqual(390);
    }
    // A string, evaluated in the page: the e2e tsconfig has no DOM types.
    expect(await phone.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await phone.context().close();
  }, 120_000);

  it("the default conversation's picker offers the projects' conversations in plain words, and opens one there", async () => {
    const page = await signedIn(browser, fx.s.base);
    await page.goto(`${fx.s.base}/`);
    await page.getByText('Your conversation with the project’s agent').waitFor();
    await page.keyboard.press('Control+k');
    const picker = page.getByRole('dialog', { name: 'Open a conversation' });
    await picker.getByRole('option', { name: /^demo/ }).waitFor();
    // Conversations only: zeta's feat is an engineer's workspace; zeta (added through the API) has not begun its
    // conversation, so it is offered as new, after the ones in use.
    expect(await picker.getByRole('option').allInnerTexts()).toEqual([expect.stringMatching(/^demo/), 'zeta\nNew\nNot started yet: your first message starts it.']);
    const words = (await picker.innerText()).toLowerCase();
    for (const word of ['branch', 'workspace', 'default', 'running', 'stopped']) expect(words, word).not.toContain(word);

    await picker.getByRole('option', { name: /^demo/ }).click();
    await page.waitForURL('**/?project=demo');
    await page.getByRole('heading', { level: 1, name: 'demo', exact: true }).waitFor();
    await page.getByLabel('Message').waitFor({ timeout: 60_000 });
    await page.context().close();
  }, 120_000);

  it('a project added through the API lands on its first message, which begins its conversation and is answered once', async () => {
    const page = await signedIn(browser, fx.s.base);
    await page.goto(`${fx.s.base}/`);
    await page.getByRole('heading', { level: 1, name: 'demo', exact: true }).waitFor();
    await page.keyboard.press('Control+k');
    await page.getByRole('dialog', { name: 'Open a conversation' }).getByRole('option', { name: /^zeta/ }).click();
    await page.waitForURL('**/?project=zeta');
    await page.getByRole('heading', { level: 1, name: 'zeta', exact: true }).waitFor();
    await page.getByRole('heading', { name: 'Start the conversation' }).waitFor();
    // Looking starts nothing: no sandbox until someone writes.
    expect((await fx.s.api('GET', '/api/workspaces/zeta')).status).toBe(404);
    const words = (await page.locator('main').innerText()).toLowerCase();
    for (const word of ['branch', 'workspace', 'sandbox', 'fork']) expect(words, word).not.toContain(word);

    const box = page.getByLabel('Write to start the conversation');
    await box.fill('hello zeta');
    await box.press('Enter');
    await page.getByLabel('Message').waitFor({ timeout: 60_000 });
    await page.getByText('You said: "hello zeta"').waitFor({ timeout: 30_000 });
    const zeta = (await fx.s.api<{ workspace: Workspace }>('GET', '/api/workspaces/zeta')).body.workspace;
    expect(zeta).toMatchObject({ isDefault: true, state: 'running', branch: 'grove/default' });
    const said = (await fx.s.api<{ messages: { who: string; text: string }[] }>('GET', '/api/workspaces/zeta/recent-messages')).body.messages;
    expect(said.filter((m) => m.who === 'user').map((m) => m.text)).toEqual(['hello zeta']);

    // Closed (its default torn down) while on screen: it can begin afresh, and the new one answers.
    expect((await fx.s.api('DELETE', '/api/workspaces/zeta')).status).toBe(200);
    await page.getByRole('heading', { name: 'This conversation was closed' }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Start a new conversation' }).click();
    await page.getByLabel('Write to start the conversation').fill('hello again');
    await page.getByLabel('Write to start the conversation').press('Enter');
    await page.getByText('You said: "hello again". (turn 1)').waitFor({ timeout: 60_000 });
    expect((await fx.s.api<{ workspace: Workspace }>('GET', '/api/workspaces/zeta')).body.workspace).toMatchObject({ isDefault: true, state: 'running' });

    // A link to a project that does not exist says so, instead of opening another project's conversation.
    await page.goto(`${fx.s.base}/?project=nope`);
    await page.getByRole('heading', { name: 'There is no project called “nope”' }).waitFor();
    expect(await page.getByLabel('Message').count()).toBe(0);
    await page.context().close();
  }, 120_000);
});
