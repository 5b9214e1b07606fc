// The engineer's Changes panel, Checkpoint and Publish in a real browser (Debian Chromium) against the real server,
// a real sandbox, a project cloned from a file:// bare repository and the test Gitea on loopback (docs/git-flow.md).
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { startTestForge, type TestForge } from '../packages/core/src/test-support/test-forge.ts';
import { WEB_DIR, assertWebReady, launchBrowser, signedIn } from './browser.ts';
import { cleanup, containerOf, dockerExec, git, makeHome, startServer, type RunningServer } from './harness.ts';

const FORGE_TOKEN = 'e2e-web-forge-token-5d2b9e71';
const home = makeHome('web-git');
const upstream = path.join(home, 'upstream.git');
let s: RunningServer;
let forge: TestForge;
let browser: Browser;

const pane = (page: Page, name: string) => page.getByRole('region', { name: `Workspace ${name}` });
const changes = (page: Page, name: string) => pane(page, name).getByRole('region', { name: 'Changes', exact: true });
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });

beforeAll(async () => {
  assertWebReady();
  const src = path.join(home, 'src');
  fs.mkdirSync(src, { recursive: true });
  git(src, 'init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(src, 'README.md'), '# app\n');
  git(src, 'add', '.');
  git(src, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'first');
  git(home, 'clone', '-q', '--bare', src, upstream);
  forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'app', token: FORGE_TOKEN });
  s = await startServer({ home: path.join(home, 'grove'), env: { GROVE_DEMO: '0', GROVE_WEB_DIR: WEB_DIR, GROVE_FORGE_TOKEN: FORGE_TOKEN, GROVE_MAX_RUNNING: '2' } });
  expect((await s.api('POST', '/api/projects', { name: 'app', source: `file://${upstream}` })).status).toBe(201);
  const fork = await s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'app', name: 'feat' });
  expect(fork.status, JSON.stringify(fork.body)).toBe(201);
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await s?.stop();
  await forge?.close();
  cleanup(path.join(home, 'grove'));
  fs.rmSync(home, { recursive: true, force: true });
});

describe('the Changes panel', () => {
  it('shows a file written in the sandbox with its diff; Checkpoint saves it; Publish explains a missing forge, then opens the PR shown on the card', async () => {
    const page = await signedIn(browser, s.base);
    await page.goto(`${s.base}/p/app/w/feat`);
    const panel = changes(page, 'feat');
    await panel.getByText('No changes').waitFor();
    await panel.getByText('0 commits ahead of main, 0 behind').waitFor();

    // Written behind the dashboard's back (no turn, so no event says so): Refresh reads it.
    const container = containerOf(s.instance, 'app~feat') ?? '';
    const w = dockerExec(container, ['sh', '-c', "cd /workspace && printf 'hello from the sandbox\\n' > hello.txt"]);
    expect(w.code, w.out).toBe(0);
    await panel.getByRole('button', { name: 'Refresh the changes' }).click();
    await panel.getByText('1 file changed, +1 −0').waitFor();
    await panel.getByText('uncommitted work').waitFor();

    // Keyboard: open the panel, then the file, and read its diff.
    await panel.getByRole('button', { name: 'Changes', exact: true }).focus();
    await page.keyboard.press('Enter');
    const file = panel.getByRole('button', { name: /hello\.txt/ });
    await file.focus();
    await page.keyboard.press('Enter');
    await panel.getByRole('region', { name: 'Changes in hello.txt' }).getByText('+hello from the sandbox').waitFor();

    // Checkpoint with a message: the uncommitted work is gone, the branch is one commit ahead.
    await panel.getByRole('button', { name: 'Checkpoint', exact: true }).click();
    const cp = page.getByRole('dialog', { name: 'Checkpoint feat' });
    await cp.getByLabel('Message (optional)').fill('Say hello');
    await cp.getByRole('button', { name: 'Checkpoint', exact: true }).click();
    await panel.getByText(/^Checkpoint [0-9a-f]{10} saved on grove\/feat \(1 file\)\.$/).waitFor();
    await panel.getByText('everything checkpointed').waitFor();
    await panel.getByText('1 commit ahead of main, 0 behind').waitFor();
    expect(await panel.getByText('uncommitted work').count()).toBe(0);
    expect(git(path.join(s.home, 'repos', 'app'), 'log', '-1', '--format=%s', 'grove/feat')).toBe('Say hello');

    // A checkpoint from elsewhere (the API, as the CLI does) reaches the panel through its event, without Refresh.
    fs.writeFileSync(path.join(s.home, 'worktrees', 'app', 'feat', 'second.txt'), 'second\n');
    expect((await s.api('POST', '/api/workspaces/app~feat/checkpoint', { message: 'Second' })).status).toBe(200);
    await panel.getByText('2 commits ahead of main, 0 behind').waitFor();
    await panel.getByRole('button', { name: /second\.txt/ }).waitFor();

    // No forge in the project config yet: the refusal says what is missing and how to add it.
    await panel.getByRole('button', { name: 'Publish', exact: true }).click();
    const pub = page.getByRole('dialog', { name: 'Publish feat' });
    await pub.getByLabel('Title (optional)').fill('Say hello');
    await pub.getByRole('button', { name: 'Publish', exact: true }).click();
    const alert = pub.getByRole('alert');
    await alert.getByText('This project has no forge to open pull requests on.').waitFor();
    await alert.getByText(/PUT \/api\/projects\/app\/config with forge/).waitFor();
    expect(forge.pulls).toEqual([]);

    const cfg = await s.api('PUT', '/api/projects/app/config', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'app' } });
    expect(cfg.status).toBe(200);
    await pub.getByRole('button', { name: 'Publish again' }).click();
    const link = pub.getByRole('link', { name: /\/pulls\/1$/ });
    await link.waitFor();
    expect(forge.pulls.map((p) => [p.head, p.base, p.title])).toEqual([['grove/feat', 'main', 'Say hello']]);
    await pub.getByRole('button', { name: 'Close' }).click();
    await panel.getByRole('link', { name: 'Pull request #1 (open)' }).waitFor();

    // The card carries the link and the state.
    await page.goto(`${s.base}/workspaces`);
    await card(page, 'feat').getByRole('link', { name: 'Pull request #1 (open)' }).waitFor();
    expect(await card(page, 'feat').getByRole('link', { name: 'Pull request #1 (open)' }).getAttribute('href')).toMatch(/\/team\/app\/pulls\/1$/);
    await page.context().close();

    // 390 px: the panel's buttons are reachable and the bar fits without horizontal scrolling.
    const phone = await signedIn(browser, s.base, 390);
    await phone.goto(`${s.base}/p/app/w/feat`);
    const small = changes(phone, 'feat');
    await small.getByText('everything checkpointed').waitFor();
    for (const name of ['Refresh the changes', 'Checkpoint', 'Publish']) {
      const box = await small.getByRole('button', { name, exact: true }).boundingBox();
      expect(box, name).not.toBeNull();
      expect((box?.x ?? 0) + (box?.width ?? 0), name).toBeLessThanOrEqual(390);
    }
    // A string, evaluated in the page: the e2e tsconfig has no DOM types.
    expect(await phone.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await phone.context().close();
  }, 240_000);
});
