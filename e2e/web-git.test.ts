// The engineer's Changes panel, Checkpoint and Publish in a real browser (Debian Chromium) against the real server,
// a real sandbox, a project cloned from a file:// bare repository and the test Gitea on loopback (docs/git-flow.md).
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { containerOf, dockerExec, git, waitFor } from './harness.ts';
import { useForgeWeb } from './support/forge.ts';

// No forge in the project's config at first: the first test shows the refusal, then names it.
const web = useForgeWeb('web-git', { token: 'e2e-web-forge-token-5d2b9e71', configureForge: false });

const pane = (page: Page, name: string) => page.getByRole('region', { name: `Workspace ${name}` });
const changes = (page: Page, name: string) => pane(page, name).getByRole('region', { name: 'Changes', exact: true });
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });

describe('the Changes panel', () => {
  it('shows a file written in the sandbox with its diff; Checkpoint saves it; Publish explains a missing forge, then opens the PR shown on the card', async () => {
    const { s, forge } = web;
    const page = await web.signedIn();
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
    const phone = await web.signedIn(390);
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

describe('forking from a pull request, and keeping the checkout', () => {
  const get = async (slug: string) => (await web.s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${slug}`)).body.workspace;

  it('a pull request the remote does not have: the fork starts at main and the dialog, card and tab say why; keep-checkout set in the dialog, then changed on the card', async () => {
    const { s, upstream } = web;
    const page = await web.signedIn();
    await page.goto(`${s.base}/workspaces`);
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    const dialog = page.getByRole('dialog', { name: 'New workspace' });
    // Leaving the empty name to look at the options is no mistake; pressing Create with it is.
    await dialog.getByRole('radio', { name: 'A pull request' }).check();
    expect(await dialog.getByText('name must not be empty').count()).toBe(0);
    await dialog.getByRole('button', { name: 'Create workspace' }).click();
    await dialog.getByText('name must not be empty').waitFor();
    await dialog.getByLabel('Name').fill('review');

    // Checked with the contracts schema before anything is sent: nothing is created.
    const number = dialog.getByLabel('Pull request number');
    const create = dialog.getByRole('button', { name: 'Create workspace' });
    await number.fill('0');
    await dialog.getByText('pull request numbers start at 1').waitFor();
    expect(await create.isDisabled()).toBe(true);
    await number.fill('seven');
    await dialog.getByText('pull request must be a number, like 42').waitFor();
    expect(await create.isDisabled()).toBe(true);
    expect((await s.api('GET', '/api/workspaces/app~review')).status).toBe(404);

    await number.fill('#7');
    await dialog.getByText('More options').click();
    await dialog.getByLabel('Keep the checkout when its pull request is merged or closed').check();
    await create.click();

    // The upstream has no refs/pull/7/head: the progress says where it started instead, and why.
    const progress = page.getByRole('dialog', { name: 'Starting review' });
    await progress.getByText(/^Started at main instead of pull request #7: pull request #7's head could not be fetched: .+/).waitFor({ timeout: 60_000 });
    // Ready opens the new workspace's tab by itself.
    await page.waitForURL('**/p/app/w/review', { timeout: 90_000 });
    const ws = await get('app~review');
    expect(ws).toMatchObject({ state: 'running', baseRef: 'main', keepCheckoutOnClose: true });
    const repo = path.join(s.home, 'repos', 'app');
    expect(git(repo, 'rev-parse', 'grove/review')).toBe(git(repo, 'rev-parse', 'main'));
    const fallback = await s.api<{ events: { data: { wanted?: string; base?: string } }[] }>('GET', '/api/events?slug=app~review&type=workspace.base_fallback');
    expect(fallback.body.events.map((e) => [e.data.wanted, e.data.base])).toEqual([['pull request #7', 'main']]);
    await page.getByRole('link', { name: 'All workspaces' }).click();

    // The card keeps saying it, and shows the choice made in the dialog.
    const c = card(page, 'review');
    await c.getByText(/^Started at main instead of pull request #7: /).waitFor();
    const keep = c.getByLabel('When its pull request is merged or closed');
    expect(await keep.inputValue()).toBe('keep');

    // Back to the project's setting (null), keep again, clean up (false), back again: each one stored by PATCH.
    for (const [choice, stored] of [
      ['project', null],
      ['keep', true],
      ['clean', false],
      ['project', null],
    ] as const) {
      await keep.selectOption(choice);
      await waitFor(`keepCheckoutOnClose ${String(stored)}`, async () => ((await get('app~review')).keepCheckoutOnClose ?? null) === stored, 10_000);
    }
    // The choice stayed on the card while it was changed. Read again with no pull request and no choice of its
    // own, the card leaves the setting out (feat's card, with a pull request, has it).
    await page.reload();
    await card(page, 'review').getByText(/^Started at main instead of pull request #7: /).waitFor();
    await card(page, 'feat').getByLabel('When its pull request is merged or closed').waitFor();
    expect(await card(page, 'review').getByLabel('When its pull request is merged or closed').count()).toBe(0);

    // The tab's Changes panel: the same note, and the setting always inside it; the project's own setting is named.
    await page.goto(`${s.base}/p/app/w/review`);
    const panel = changes(page, 'review');
    await panel.getByText(/^Started at main instead of pull request #7: /).waitFor();
    await panel.getByRole('button', { name: 'Changes', exact: true }).click();
    const inPanel = panel.getByLabel('When its pull request is merged or closed');
    await inPanel.getByRole('option', { name: 'Project setting: clean up' }).waitFor({ state: 'attached' });
    expect(await inPanel.inputValue()).toBe('project');
    await inPanel.selectOption('keep');
    await waitFor('keepCheckoutOnClose true', async () => (await get('app~review')).keepCheckoutOnClose === true, 10_000);

    // Its own choice now: the card shows it again, and what it shows is what the server holds.
    await page.goto(`${s.base}/workspaces`);
    const onCard = card(page, 'review').getByLabel('When its pull request is merged or closed');
    await onCard.waitFor();
    expect(await onCard.inputValue()).toBe('keep');
    await onCard.selectOption('project');
    await waitFor('keepCheckoutOnClose null', async () => ((await get('app~review')).keepCheckoutOnClose ?? null) === null, 10_000);

    // A workspace forked from the default branch, as asked, has no such note.
    await card(page, 'review').getByText(/^Started at main instead/).waitFor();
    expect(await card(page, 'feat').getByText(/^Started at/).count()).toBe(0);

    // A pull request the remote has (feat's, published above; refs/pull/<n>/head as GitHub and Gitea serve it):
    // the fork starts at its head and says so. review is stopped first: both sandbox slots are taken.
    expect((await s.api('POST', '/api/workspaces/app~review/stop')).status).toBe(200);
    git(upstream, 'update-ref', 'refs/pull/1/head', 'refs/heads/grove/feat');
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    const second = page.getByRole('dialog', { name: 'New workspace' });
    await second.getByLabel('Name').fill('pr-one');
    await second.getByRole('radio', { name: 'A pull request' }).check();
    await second.getByLabel('Pull request number').fill('1');
    await second.getByRole('button', { name: 'Create workspace' }).click();
    const started = page.getByRole('dialog', { name: 'Starting pr-one' });
    await started.getByText('Started at the head of pull request #1.').waitFor({ timeout: 60_000 });
    // Checked while the dialog is still up: ready opens the tab and the dialog goes with it.
    expect(await started.getByText(/^Started at main instead/).count()).toBe(0);
    await page.waitForURL('**/p/app/w/pr-one', { timeout: 90_000 });
    expect((await get('app~pr-one')).baseRef).toBe('refs/grove-pr/1/head');
    expect(git(path.join(s.home, 'repos', 'app'), 'rev-parse', 'grove/pr-one')).toBe(git(upstream, 'rev-parse', 'grove/feat'));
    await page.getByRole('link', { name: 'All workspaces' }).click();
    const prCard = card(page, 'pr-one');
    await prCard.getByText('pull request #1', { exact: true }).waitFor();
    expect(await prCard.getByText(/^Started at/).count()).toBe(0);
    await page.context().close();
  }, 300_000);
});
