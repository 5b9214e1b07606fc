// The dashboard's accessibility in real Chromium against the real server and sandbox (issue 17, item 8): axe-core's
// WCAG 2.x A/AA rules on every page and dialog there is (e2e/support/axe.ts fails on serious and critical findings),
// and the keyboard: every stop of the Tab order shows where the focus is, and Escape closes a dialog and gives the
// focus back to what opened it. A page or dialog added to the dashboard gets one `check` here.
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { waitRunning } from './harness.ts';
import { expectAccessible } from './support/axe.ts';
import { useWebServer } from './support/web.ts';

const web = useWebServer('web-a11y');

/**
 * Every check of one test runs and the test fails at its end with all their findings, so one run lists every page's
 * violations instead of the first one only.
 */
function checker(page: Page): { check(context: string, include?: string): Promise<void>; done(): void } {
  const failures: string[] = [];
  return {
    async check(context, include) {
      try {
        await expectAccessible(page, { context, include });
      } catch (e) {
        failures.push(e instanceof Error ? e.message : String(e));
      }
    },
    done() {
      expect(failures.join('\n\n')).toBe('');
    },
  };
}

const OPEN_DIALOG = 'dialog[open]';
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });

/** A fork of the demo project, running, for the list's second card and the teardown confirmation (made once). */
async function forked(name: string): Promise<Workspace> {
  const slug = `demo~${name}`;
  if ((await web.s.api('GET', `/api/workspaces/${slug}`)).status !== 200) {
    const r = await web.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  return waitRunning(web.s, slug);
}

/** What a focused element draws: an outline or a box shadow, on itself or on a pseudo-element (the card's link). */
interface FocusState {
  label: string;
  visible: boolean;
  focusVisible: boolean;
  inDialog: boolean;
}

/**
 * The focused element and whether it shows its focus, evaluated in the page (a string: the e2e tsconfig has no DOM
 * types); null when nothing in the document has the focus.
 */
const FOCUS_STATE = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body || !(el instanceof HTMLElement)) return null;
  const draws = (s) => (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || (s.boxShadow !== 'none' && s.boxShadow !== '');
  const visible = draws(getComputedStyle(el)) || draws(getComputedStyle(el, '::after')) || draws(getComputedStyle(el, '::before'));
  // Roughly its accessible name: aria-label, else its <label>, else its text.
  const labelled = 'labels' in el && el.labels && el.labels[0] ? el.labels[0].textContent : null;
  const name = (el.getAttribute('aria-label') ?? labelled ?? el.textContent ?? '').trim().slice(0, 40);
  const cls = typeof el.className === 'string' && el.className ? '.' + el.className.split(' ').join('.') : '';
  return {
    label: '<' + el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + cls + '> "' + name + '"',
    visible,
    focusVisible: el.matches(':focus-visible'),
    inDialog: el.closest('dialog[open]') !== null,
  };
})()`;

const focusState = (page: Page): Promise<FocusState | null> => page.evaluate<FocusState | null>(FOCUS_STATE);
/** Whether the locator's element has the focus. */
const hasFocus = (l: Locator): Promise<boolean> =>
  // Runs in the page; the cast stands in for the DOM types this tsconfig does not have.
  l.evaluate((el) => (el as unknown as { ownerDocument: { activeElement: unknown } }).ownerDocument.activeElement === el);

/**
 * Presses Tab up to `max` times and returns each stop (nothing when the focus left the document, into the browser's
 * own controls). The caller says which stops it expects and checks that each is visible.
 */
async function tabThrough(page: Page, max: number): Promise<FocusState[]> {
  const stops: FocusState[] = [];
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const s = await focusState(page);
    if (!s) continue;
    if (stops.some((x) => x.label === s.label)) break;
    stops.push(s);
  }
  return stops;
}

const invisible = (stops: FocusState[]) => stops.filter((s) => !s.visible || !s.focusVisible).map((s) => s.label);

/** Escape closes the open dialog and the focus goes back to `opener`. */
async function escapeReturnsFocus(page: Page, opener: Locator): Promise<void> {
  await page.keyboard.press('Escape');
  await page.locator(OPEN_DIALOG).waitFor({ state: 'detached' });
  await expect.poll(() => hasFocus(opener)).toBe(true);
}

describe('accessibility (axe-core, WCAG 2.x A/AA)', () => {
  it('the pages a browser without the access link sees, and an unknown address', async () => {
    const ctx = await web.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    const { check, done } = checker(page);
    await page.goto(web.s.base);
    await page.getByText('Open Grove with your access link').waitFor();
    await check('/ without the access link');
    await page.goto(`${web.s.base}/workspaces`);
    await page.getByText('Open Grove with your access link').waitFor();
    await check('/workspaces without the access link');
    await ctx.close();

    const signed = await web.signedIn();
    const c2 = checker(signed);
    await signed.goto(`${web.s.base}/no/such/page`);
    await signed.getByText('There is nothing at this address').waitFor();
    await c2.check('the not-found page');
    await signed.goto(`${web.s.base}/p/demo/w/Not_A_Name`);
    await signed.getByText('This address does not name a workspace').waitFor();
    await c2.check('a cockpit address that names no workspace');
    await signed.context().close();
    done();
    c2.done();
  });

  it('the default conversation: empty, streaming, with a reply and with a reply that changed a file', async () => {
    const page = await web.signedIn();
    const { check, done } = checker(page);
    const box = page.getByLabel('Message');
    await box.waitFor();
    await check('/ (the default conversation, empty)');

    await box.fill('sleep 1500');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.getByRole('button', { name: 'Stop the reply' }).waitFor();
    await check('/ while a reply streams');
    await page.locator('.msg-assistant:not(.msg-streaming)', { hasText: 'Slept for 1500 ms' }).waitFor({ timeout: 30_000 });
    await check('/ with a reply');

    await box.fill('write notes.txt hello');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const changes = page.locator('.msg-changes').last();
    await changes.getByText('1 file changed').click();
    await changes.getByRole('button', { name: /notes\.txt/ }).click();
    await changes.getByRole('region', { name: 'Changes in notes.txt' }).waitFor();
    await check('/ with a reply that changed a file, its diff open');
    await changes.getByRole('button', { name: 'Undo these changes' }).click();
    await changes.getByRole('button', { name: 'Yes, undo' }).waitFor();
    await check('/ asking to undo a reply');

    // A phone: the same screen, narrower.
    const phone = await web.signedIn(390);
    const c2 = checker(phone);
    await phone.getByLabel('Message').waitFor();
    await phone.locator('.msg-changes').last().waitFor();
    await c2.check('/ at 390 px');
    await phone.context().close();
    await page.context().close();
    done();
    c2.done();
  });

  it('the workspaces list and its dialogs: new workspace, project settings, teardown', { timeout: 180_000 }, async () => {
    await forked('alpha');
    const page = await web.signedIn();
    const { check, done } = checker(page);
    await page.goto(`${web.s.base}/workspaces`);
    await card(page, 'alpha').getByText('Running', { exact: true }).waitFor({ timeout: 30_000 });
    await check('/workspaces (the list with two cards)');

    await page.getByRole('button', { name: 'New workspace' }).first().click();
    const fork = page.getByRole('dialog', { name: 'New workspace' });
    await fork.getByLabel('Name').fill('Bad_Name');
    await fork.getByText('name must be lowercase').waitFor();
    await check('the fork dialog, with a refused name', OPEN_DIALOG);
    await fork.getByText('More options').click();
    await check('the fork dialog, more options open', OPEN_DIALOG);
    await page.keyboard.press('Escape');
    await fork.waitFor({ state: 'detached' });

    await page.getByRole('button', { name: 'Project settings' }).click();
    const settings = page.getByRole('dialog', { name: 'Settings of demo' });
    await settings.getByLabel('Path in the checkout').fill('../x');
    await settings.getByText(/must not contain empty/).waitFor();
    await check('project settings, with a refused path', OPEN_DIALOG);
    await page.keyboard.press('Escape');
    await settings.waitFor({ state: 'detached' });

    await card(page, 'alpha').getByRole('button', { name: 'Tear down' }).click();
    const teardown = page.getByRole('dialog');
    await teardown.getByText('is kept').waitFor();
    await check('the teardown confirmation', OPEN_DIALOG);
    await page.keyboard.press('Escape');
    await teardown.waitFor({ state: 'detached' });
    await page.context().close();
    done();
  });

  it('the workspace tab with each of its views, the Changes panel and its dialogs', { timeout: 180_000 }, async () => {
    const page = await web.signedIn();
    const { check, done } = checker(page);
    await page.goto(`${web.s.base}/p/demo/w/default`);
    const pane = page.getByRole('region', { name: 'Workspace demo' });
    await pane.getByLabel('Message').waitFor();
    await check('the workspace tab, Conversation view');

    await pane.getByRole('button', { name: /Changes/ }).first().click();
    await pane.getByRole('button', { name: 'Checkpoint' }).waitFor();
    await check('the workspace tab, Changes panel open');
    await pane.getByRole('button', { name: 'Checkpoint' }).click();
    await page.locator(OPEN_DIALOG).waitFor();
    await check('the checkpoint dialog', OPEN_DIALOG);
    await page.keyboard.press('Escape');
    await pane.getByRole('button', { name: 'Publish' }).click();
    await page.locator(OPEN_DIALOG).waitFor();
    await check('the publish dialog', OPEN_DIALOG);
    await page.keyboard.press('Escape');
    await page.locator(OPEN_DIALOG).waitFor({ state: 'detached' });

    // Every view in the switcher (WorkspacePane's VIEWS), whatever is registered there.
    const tabs = pane.getByRole('tablist').getByRole('tab');
    const names = await tabs.allInnerTexts();
    expect(names).toContain('Terminal');
    for (const name of names) {
      const tab = pane.getByRole('tab', { name, exact: true });
      await tab.click();
      await expect.poll(() => tab.getAttribute('aria-selected')).toBe('true');
      const panelId = await tab.getAttribute('aria-controls');
      await page.locator(`[id="${panelId}"]`).waitFor();
      await check(`the workspace tab, ${name} view`);
    }

    await pane.getByRole('tab', { name: 'Terminal', exact: true }).click();
    await pane.getByRole('button', { name: '+ New terminal' }).click();
    await pane.locator('.terminal-host .xterm').waitFor();
    await check('the workspace tab, Terminal view with a shell');
    await page.context().close();
    done();
  });

  it('the resume picker (Ctrl+K) and the /resume page', async () => {
    const page = await web.signedIn();
    const { check, done } = checker(page);
    await page.goto(`${web.s.base}/workspaces`);
    await page.locator('.card').first().waitFor();
    await page.keyboard.press('Control+K');
    const picker = page.getByRole('dialog', { name: 'Resume a workspace' });
    await picker.getByRole('option').first().waitFor();
    await check('the resume picker', OPEN_DIALOG);
    await picker.getByRole('combobox', { name: 'Find a workspace' }).fill('no such workspace');
    await picker.getByText(/Nothing matches/).waitFor();
    await check('the resume picker, nothing matching', OPEN_DIALOG);
    await page.keyboard.press('Escape');

    await page.goto(`${web.s.base}/resume`);
    await picker.getByRole('option').first().waitFor();
    await check('/resume with its picker open');
    await page.keyboard.press('Escape');
    await page.getByRole('button', { name: 'Choose a workspace' }).waitFor();
    await check('/resume after the picker was closed');
    await page.context().close();
    done();
  });
});

describe('keyboard', () => {
  it('every stop in the workspace tab shows its focus, and the tab views switch with the arrows', async () => {
    const page = await web.signedIn();
    await page.goto(`${web.s.base}/p/demo/w/default`);
    const pane = page.getByRole('region', { name: 'Workspace demo' });
    // A draft, so that Send is enabled and is a stop too.
    await pane.getByLabel('Message').fill('a draft');
    // From the top of the document: the skip link first, then the page in order.
    await page.locator('body').focus();
    const stops = await tabThrough(page, 60);
    const labels = stops.map((s) => s.label).join('\n');
    for (const expected of ['Skip to content', 'Grove home', 'Resume', 'All workspaces', 'Close tab demo', '"Conversation"', 'Message', 'Send']) {
      expect(labels, `a Tab stop for ${expected}`).toContain(expected);
    }
    expect(invisible(stops), 'Tab stops that show no focus').toEqual([]);

    const conversation = pane.getByRole('tab', { name: 'Conversation', exact: true });
    await conversation.focus();
    await page.keyboard.press('ArrowRight');
    const terminal = pane.getByRole('tab', { name: 'Terminal', exact: true });
    await expect.poll(() => terminal.getAttribute('aria-selected')).toBe('true');
    expect(await hasFocus(terminal)).toBe(true);
    expect((await focusState(page))?.focusVisible).toBe(true);
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => conversation.getAttribute('aria-selected')).toBe('true');
    await page.context().close();
  });

  it('the fork dialog opens from the keyboard, keeps the focus inside, shows it, and Escape gives it back', async () => {
    const page = await web.signedIn();
    await page.goto(`${web.s.base}/workspaces`);
    await page.locator('.card').first().waitFor();
    const opener = page.getByRole('button', { name: 'New workspace' }).first();
    await opener.focus();
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'New workspace' });
    await dialog.waitFor();
    // The first field has the focus as soon as the dialog opens.
    await expect.poll(async () => (await focusState(page))?.label).toContain('Name');
    // A valid name, so that the submit button is enabled and is a stop too.
    await page.keyboard.type('kbd-check');
    const stops = await tabThrough(page, 30);
    expect(stops.map((s) => s.label).join('\n')).toMatch(/Create workspace|Wait in line/);
    expect(stops.filter((s) => !s.inDialog).map((s) => s.label), 'Tab stops outside the open dialog').toEqual([]);
    expect(invisible(stops), 'Tab stops that show no focus').toEqual([]);
    await escapeReturnsFocus(page, opener);

    // A dialog closed by its own Cancel button gives the focus back too (the element is removed, not closed).
    await page.keyboard.press('Enter');
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    await expect.poll(() => hasFocus(opener)).toBe(true);
    await page.context().close();
  });

  it('Escape closes the resume picker, project settings and the teardown confirmation, back to their openers', { timeout: 120_000 }, async () => {
    const page = await web.signedIn();
    await page.goto(`${web.s.base}/workspaces`);
    await page.locator('.card').first().waitFor();

    const resume = page.getByRole('button', { name: /^Resume/ });
    await resume.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'Resume a workspace' }).getByRole('option').first().waitFor();
    await escapeReturnsFocus(page, resume);

    const settings = page.getByRole('button', { name: 'Project settings' });
    await settings.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'Settings of demo' }).waitFor();
    await escapeReturnsFocus(page, settings);

    await forked('alpha');
    const teardown = card(page, 'alpha').getByRole('button', { name: 'Tear down' });
    await teardown.focus();
    await page.keyboard.press('Enter');
    await page.locator(OPEN_DIALOG).waitFor();
    await escapeReturnsFocus(page, teardown);
    await page.context().close();
  });
});
