// The Review view in real Chromium against the real server, a real sandbox, a project cloned from a file:// bare
// repository and the test Gitea on loopback: every change on one page with a file list to jump from, uncommitted work
// called out, Publish, the pull request's checks as the test forge reports them after Refresh, and the merged state
// with what the cleanup did (docs/git-flow.md, Dashboard). Screenshot workbench-review at 1280 px.
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { containerOf, dockerExec, git, waitFor } from './harness.ts';
import { useForgeWeb } from './support/forge.ts';

const web = useForgeWeb('web-review', {
  token: 'e2e-web-review-token-8c41d0aa',
  files: { 'README.md': '# app\n', 'old.txt': 'to be removed\n' },
  // The watcher runs every second: once the pull request is merged it cleans up by itself.
  env: { GROVE_WATCH_INTERVAL_MS: '1000' },
  configureForge: true,
});

const pane = (page: Page) => page.getByRole('region', { name: 'Workspace feat' });
const review = (page: Page) => pane(page).getByRole('region', { name: 'Review', exact: true });

describe('the Review view', () => {
  it('shows every change with a file list, publishes, shows the checks after Refresh, then the merge and its cleanup', async () => {
    const { s, forge, upstream } = web;
    const page = await web.signedIn(1280);
    await page.goto(`${s.base}/p/app/w/feat`);

    // Two files written by the agent, one per turn (each checkpointed after it), then work not checkpointed: a deletion.
    const repo = path.join(s.home, 'repos', 'app');
    for (const [i, text] of ['write notes/plan.md first step', 'write hello.txt hello from the agent'].entries()) {
      await pane(page).getByLabel('Message').fill(text);
      await pane(page).getByRole('button', { name: 'Send', exact: true }).click();
      await waitFor(`the checkpoint after turn ${i + 1}`, async () => git(repo, 'rev-list', '--count', 'main..grove/feat') === String(i + 1), 120_000);
    }
    const rm = dockerExec(containerOf(s.instance, 'app~feat') ?? '', ['sh', '-c', 'rm /workspace/old.txt']);
    expect(rm.code, rm.out).toBe(0);

    await pane(page).getByRole('tab', { name: 'Review', exact: true }).click();
    const view = review(page);
    await view.getByText('3 files changed, +2 −1').waitFor();
    await view.getByText('2 commits ahead of main, 0 behind').waitFor();
    await view.getByRole('note').getByText(/^Uncommitted work: /).waitFor();
    await view.getByRole('region', { name: 'Pull request' }).getByText(/^Not published yet\./).waitFor();
    // Every file's diff on the one page, no click needed.
    await view.getByRole('region', { name: 'Changes in hello.txt' }).getByText('+hello from the agent').waitFor();
    await view.getByRole('region', { name: 'Changes in notes/plan.md' }).getByText('+first step').waitFor();
    await view.getByRole('region', { name: 'Changes in old.txt' }).getByText('-to be removed').waitFor();
    // Open file for what exists, not for the deleted file.
    const files = view.getByRole('navigation', { name: 'Changed files' });
    expect(await files.getByRole('button').allInnerTexts()).toEqual([expect.stringMatching(/added\s*hello\.txt/), expect.stringMatching(/added\s*notes\/plan\.md/), expect.stringMatching(/deleted\s*old\.txt/)]);
    await view.getByRole('button', { name: 'Open file hello.txt' }).waitFor();
    expect(await view.getByRole('button', { name: 'Open file old.txt' }).count()).toBe(0);

    // The file list by keyboard: Enter on a file moves the focus to that file's heading.
    await files.getByRole('button', { name: /old\.txt/ }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate('document.activeElement && document.activeElement.closest("article") && document.activeElement.closest("article").getAttribute("aria-label")')).toBe('old.txt');

    // Publish from the view: it checkpoints the deletion, pushes and opens the pull request, shown beside it.
    await view.getByRole('button', { name: 'Publish', exact: true }).click();
    const pub = page.getByRole('dialog', { name: 'Publish feat' });
    await pub.getByLabel('Title (optional)').fill('Plan and hello');
    await pub.getByRole('button', { name: 'Publish', exact: true }).click();
    await pub.getByRole('link', { name: /\/pulls\/1$/ }).waitFor({ timeout: 60_000 });
    await pub.getByRole('button', { name: 'Close' }).click();
    const prBox = view.getByRole('region', { name: 'Pull request' });
    await prBox.getByRole('link', { name: 'Pull request #1 (open)' }).waitFor();
    await prBox.getByText('Checks: no checks').waitFor();
    // The deletion was checkpointed by the publish: nothing is uncommitted any more.
    await view.getByText('3 commits ahead of main, 0 behind').waitFor();
    await expect.poll(() => view.getByRole('note').count()).toBe(0);
    expect(forge.pulls.map((p) => [p.head, p.base, p.title])).toEqual([['grove/feat', 'main', 'Plan and hello']]);

    // CI reports on the head commit: a failure, then a pass; the view reads them on Refresh (no timer).
    forge.setStatus(1, { context: 'ci/test', state: 'failure', target_url: 'https://ci.example/runs/7', description: '2 tests failed' });
    forge.setStatus(1, { context: 'ci/build', state: 'success' });
    await view.getByRole('button', { name: 'Refresh the review' }).click();
    await prBox.getByText('Checks: failing (1 failed, 1 passed)').waitFor();
    const checks = prBox.getByRole('list', { name: 'Checks' });
    expect(await checks.getByRole('link', { name: 'ci/test' }).getAttribute('href')).toBe('https://ci.example/runs/7');
    await checks.getByText('— 2 tests failed').waitFor();
    forge.setStatus(1, { context: 'ci/test', state: 'success', target_url: 'https://ci.example/runs/8' });
    await view.getByRole('button', { name: 'Refresh the review' }).click();
    await prBox.getByText('Checks: passing (2 passed)').waitFor();
    expect(await checks.getByRole('link', { name: 'ci/test' }).getAttribute('href')).toBe('https://ci.example/runs/8');
    await web.shot(page, 'workbench-review');

    // A forge that fails: the view says so in words and keeps the stored pull request; the next Refresh recovers.
    forge.failWith = 503;
    await view.getByRole('button', { name: 'Refresh the review' }).click();
    const alert = prBox.getByRole('alert');
    await alert.getByText('The forge could not say how the pull request stands; nothing was changed.').waitFor();
    await alert.getByText(/answered 503/).waitFor();
    await prBox.getByRole('link', { name: 'Pull request #1 (open)' }).waitFor();
    forge.failWith = null;
    await view.getByRole('button', { name: 'Refresh the review' }).click();
    await prBox.getByText('Checks: passing (2 passed)').waitFor();
    expect(await prBox.getByRole('alert').count()).toBe(0);

    // Open file hands the path to the workbench, which shows the Files view with that file open.
    await view.getByRole('button', { name: 'Open file hello.txt' }).click();
    await expect.poll(() => pane(page).getByRole('tab', { name: 'Files', exact: true }).getAttribute('aria-selected')).toBe('true');
    await pane(page).getByRole('region', { name: 'Content of hello.txt' }).waitFor();
    expect(await pane(page).getByRole('tab', { name: 'Review', exact: true }).getAttribute('aria-selected')).toBe('false');
    await pane(page).getByRole('tab', { name: 'Review', exact: true }).click();

    // Merged on the forge: the watcher sees it, cleans up (nothing would be lost) and the view says what it did.
    forge.merge(1);
    await prBox.getByText('The pull request was merged. Grove cleaned up: the sandbox and the checkout were removed; the branch grove/feat is kept.').waitFor({ timeout: 60_000 });
    await prBox.getByText('merged', { exact: true }).waitFor();
    expect((await s.api<{ workspace: Workspace }>('GET', '/api/workspaces/app~feat')).body.workspace.state).toBe('gone');
    expect(fs.existsSync(path.join(s.home, 'worktrees', 'app', 'feat'))).toBe(false);
    expect(git(repo, 'rev-parse', 'grove/feat')).toBe(git(upstream, 'rev-parse', 'main'));
    await page.context().close();
  }, 300_000);
});
