// Dark mode in real Chromium against the real server and sandbox (issue 17, item 6): the top bar's theme switch
// cycles System → Light → Dark, applies at once, is remembered, and a reload has the chosen theme on <html> before
// the body exists (the head script, not React, set it: no flash of the other theme); "System" follows
// prefers-color-scheme both ways; axe finds no serious or critical violation in dark mode (contrast included) on the
// conversation with a diff, the file viewer's highlighting, the review, the workspaces list and the fork dialog.
// Screenshot workspace-dark.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { containerOf, dockerExec } from './harness.ts';
import { expectAccessible } from './support/axe.ts';
import { useWebServer } from './support/web.ts';

const web = useWebServer('web-theme');

// The page background, as painted: the light and the dark --bg of globals.css.
const LIGHT_BG = 'rgb(246, 245, 241)';
const DARK_BG = 'rgb(20, 23, 20)';

/** Runs before any script of each document: records data-theme at the moment <body> first exists. */
const THEME_AT_BODY = `
  window.__themeAtBody = 'no body seen';
  new MutationObserver((_, obs) => {
    if (!document.body) return;
    window.__themeAtBody = document.documentElement.dataset.theme || 'unset';
    obs.disconnect();
  }).observe(document, { childList: true, subtree: true });
`;

const bg = (page: Page): Promise<string> => page.evaluate('getComputedStyle(document.body).backgroundColor') as Promise<string>;
const toggle = (page: Page) => page.getByRole('button', { name: /^Theme: / });

describe('theme', () => {
  it('cycles System, Light and Dark, applies at once, is remembered, and a reload paints the chosen theme first', async () => {
    const page = await web.signedIn(1280);
    await page.addInitScript(THEME_AT_BODY);
    await page.emulateMedia({ colorScheme: 'light' });
    await page.goto(`${web.s.base}/workspaces`);
    await expect.poll(() => toggle(page).getAttribute('aria-label')).toBe('Theme: System');
    expect(await bg(page)).toBe(LIGHT_BG);
    // System follows the browser's preference, live.
    await page.emulateMedia({ colorScheme: 'dark' });
    await expect.poll(() => bg(page)).toBe(DARK_BG);

    // Light wins over a dark preference; Dark over a light one.
    await toggle(page).click();
    await expect.poll(() => toggle(page).getAttribute('aria-label')).toBe('Theme: Light');
    await expect.poll(() => bg(page)).toBe(LIGHT_BG);
    await toggle(page).click();
    await expect.poll(() => toggle(page).getAttribute('aria-label')).toBe('Theme: Dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await expect.poll(() => bg(page)).toBe(DARK_BG);
    expect(await page.evaluate("getComputedStyle(document.documentElement).colorScheme")).toBe('dark');

    // Remembered: a reload (and another page) is dark, and was dark before the body was parsed.
    await page.reload();
    expect(await page.evaluate('window.__themeAtBody')).toBe('dark');
    await expect.poll(() => toggle(page).getAttribute('aria-label')).toBe('Theme: Dark');
    expect(await bg(page)).toBe(DARK_BG);
    await page.goto(`${web.s.base}/p/demo/w/default`);
    expect(await page.evaluate('window.__themeAtBody')).toBe('dark');

    // By keyboard: Enter on the focused switch goes on to System, which follows the (light) preference again.
    await toggle(page).focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => toggle(page).getAttribute('aria-label')).toBe('Theme: System');
    await expect.poll(() => bg(page)).toBe(LIGHT_BG);
    await page.reload();
    expect(await page.evaluate('window.__themeAtBody')).toBe('system');
    await page.context().close();
  });

  it('has no serious or critical accessibility violation in dark mode: conversation, files, review, list, fork dialog', { timeout: 180_000 }, async () => {
    const page = await web.signedIn(1280);
    await page.emulateMedia({ colorScheme: 'dark' });
    await expect.poll(() => bg(page)).toBe(DARK_BG);

    // A reply that wrote a file, its diff open, in the default workspace's cockpit (the engineer's view, with tabs).
    await page.goto(`${web.s.base}/p/demo/w/default`);
    const box = page.getByLabel('Message');
    await box.waitFor();
    await box.fill('write notes.txt Hello from the agent');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const changes = page.locator('.msg-changes').last();
    await changes.getByText('1 file changed').click();
    await changes.getByRole('button', { name: /notes\.txt/ }).click();
    await changes.getByRole('region', { name: 'Changes in notes.txt' }).waitFor();
    await web.shot(page, 'workspace-dark');
    await expectAccessible(page, { context: 'dark: the conversation with a reply and its diff' });

    // The file viewer's syntax colours, with a file changed outside any reply (its git status mark is coloured too).
    // Changed only now: before the reply it would have counted as that reply's change.
    const container = containerOf(web.s.instance, 'demo') ?? '';
    const w = dockerExec(container, ['sh', '-c', "cd /workspace && printf '// changed in the sandbox\\n' >> src/greet.js"]);
    expect(w.code, w.out).toBe(0);
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    const tree = page.getByRole('tree', { name: 'Files of the workspace' });
    const src = tree.getByRole('treeitem', { name: /^src/ });
    await src.focus();
    await page.keyboard.press('ArrowRight');
    await tree.getByRole('treeitem', { name: /greet\.js/ }).click();
    const viewer = page.getByRole('region', { name: 'Content of src/greet.js' });
    await viewer.locator('.hljs-keyword').first().waitFor();
    await expectAccessible(page, { context: 'dark: the file viewer with highlighted code' });

    await page.getByRole('tab', { name: 'Review', exact: true }).click();
    await page.getByRole('region', { name: 'Review', exact: true }).getByRole('region', { name: 'Changes in notes.txt' }).waitFor();
    await expectAccessible(page, { context: 'dark: the branch review' });

    await page.goto(`${web.s.base}/workspaces`);
    await page.locator('.card').first().waitFor();
    await expectAccessible(page, { context: 'dark: the workspaces list' });
    await page.getByRole('button', { name: 'New workspace' }).first().click();
    await page.locator('dialog[open]').waitFor();
    await expectAccessible(page, { context: 'dark: the fork dialog', include: 'dialog[open]' });
    await page.context().close();
  });
});
