// The empty thread, the composer during a reply and the tab strip in real Chromium against the real server, sandbox and
// scripted agent: the empty thread offers the agent's commands (AGENT_GUIDES) and a click puts one in the composer;
// Enter during a reply queues the message (visible, cancellable) and it goes out when the reply ends; side by side
// the head, Ports and Changes rows are compact; the tab strip never scrolls up and down. Screenshot workspace-fresh-390.
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { AGENT_GUIDES, type Workspace } from '@grove/contracts';
import { waitRunning } from './harness.ts';
import { expectAccessible } from './support/axe.ts';
import { useWebServer } from './support/web.ts';

// The default workspace and the two forks below, all running.
const web = useWebServer('web-compose', { env: { GROVE_MAX_RUNNING: '3' } });

const pane = (page: Page, name: string) => page.getByRole('region', { name: `Workspace ${name}`, includeHidden: true });
const reply = (scope: Page | Locator, text: string) => scope.locator('.msg-assistant:not(.msg-streaming)', { hasText: text });

async function forked(name: string): Promise<void> {
  const r = await web.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitRunning(web.s, `demo~${name}`);
}

/** [scrollHeight, clientHeight] of the tab strip (a string: the e2e tsconfig has no DOM types). */
const stripHeights = (page: Page) =>
  page.evaluate<[number, number]>(`(() => { const el = document.querySelector('nav[aria-label="Open workspaces"]'); return [el.scrollHeight, el.clientHeight]; })()`);

describe('empty thread and composer', () => {
  it('offers the scripted agent’s commands, fills the composer from one, and queues a message written during a reply, across a reload', { timeout: 120_000 }, async () => {
    const page = await web.signedIn();
    const examples = page.getByRole('list', { name: 'Things to try' });
    await examples.waitFor();
    await page.getByText(AGENT_GUIDES.scripted.summary).waitFor();
    expect(await examples.getByRole('button').allInnerTexts()).toEqual(AGENT_GUIDES.scripted.examples.map((e) => e.message));
    await expectAccessible(page, { context: 'the empty default conversation with its examples' });

    // A click fills the composer (and focuses it); nothing is sent until Enter.
    const box = page.getByLabel('Message');
    await examples.getByRole('button', { name: 'sleep 3000' }).click();
    await expect.poll(() => box.inputValue()).toBe('sleep 3000');
    await box.fill('sleep 9000');
    await box.press('Enter');
    await page.getByRole('button', { name: 'Stop the reply' }).waitFor();
    await page.getByText('Enter queues it until the reply ends.').waitFor();

    // During the reply, Enter queues: the message shows as queued, not as sent.
    await box.fill('after the nap');
    await box.press('Enter');
    const queue = page.getByRole('list', { name: 'Waiting to be sent' });
    await queue.getByText('after the nap').waitFor();
    await box.fill('never mind');
    await box.press('Enter');
    await queue.getByText('never mind').waitFor();
    expect(await page.locator('.msg-user', { hasText: 'after the nap' }).count()).toBe(0);
    await expectAccessible(page, { context: 'the composer with two queued messages during a reply' });

    // Cancel takes one out of the queue and back into the composer.
    await queue.getByRole('button', { name: 'Cancel “never mind”' }).click();
    await expect.poll(() => queue.getByRole('listitem').count()).toBe(1);
    await expect.poll(() => box.inputValue()).toBe('never mind');
    await box.fill('');

    // A reload keeps the queue (this tab's sessionStorage) and still holds it while the reply runs.
    await page.reload();
    await page.getByRole('button', { name: 'Stop the reply' }).waitFor();
    await queue.getByText('after the nap').waitFor();
    expect(await queue.getByRole('listitem').count()).toBe(1);
    expect(await page.locator('.msg-user', { hasText: 'after the nap' }).count()).toBe(0);

    // The reply ends, then the queued message goes out by itself and gets its own reply.
    await reply(page, 'Slept for 9000 ms').waitFor({ timeout: 30_000 });
    await reply(page, 'You said: "after the nap"').waitFor({ timeout: 30_000 });
    await expect.poll(() => queue.count()).toBe(0);
    expect(await page.locator('.msg-user').allInnerTexts()).toEqual([expect.stringContaining('sleep 9000'), expect.stringContaining('after the nap')]);
    expect(await page.locator('.msg-user', { hasText: 'never mind' }).count()).toBe(0);
    await page.context().close();
  });
});

describe('tabs', () => {
  it('a fresh workspace at 390 px; side by side the head, Ports and Changes are compact; the tab strip never scrolls vertically', { timeout: 240_000 }, async () => {
    await forked('alpha');
    await forked('beta');

    // A fresh workspace on a phone: the README's screenshot.
    const phone = await web.signedIn(390);
    await phone.goto(`${web.s.base}/p/demo/w/alpha`);
    await pane(phone, 'alpha').getByRole('list', { name: 'Things to try' }).waitFor();
    const phonePane = pane(phone, 'alpha');
    await expect.poll(() => phonePane.getByRole('region', { name: 'Changes', exact: true }).innerText()).toContain('No changes');
    await web.shot(phone, 'workspace-fresh-390');
    // The top bar keeps the page's title whole on a phone (its buttons go to icons, their names stay).
    const title = phone.locator('.topbar-title h1');
    const fits = (h: unknown) => {
      const e = h as { textContent: string | null; scrollWidth: number; clientWidth: number };
      return [e.textContent, e.scrollWidth <= e.clientWidth];
    };
    expect(await title.evaluate(fits)).toEqual(['Workspaces', true]);
    await phone.getByRole('link', { name: 'Conversation' }).waitFor();
    // On a phone Ports is one line and the conversation starts in the upper half of the screen; the title keeps its room.
    expect((await phonePane.getByRole('region', { name: 'Listening ports' }).boundingBox())?.height ?? 99).toBeLessThan(40);
    expect((await phonePane.locator('.thread-scroll').boundingBox())?.y ?? 999).toBeLessThan(phone.viewportSize()!.height / 2);
    expect((await phone.locator('.topbar-title h1').boundingBox())?.width ?? 0).toBeGreaterThan(60);

    const page = await web.signedIn(1280);
    for (const name of ['default', 'alpha', 'beta']) {
      await page.goto(`${web.s.base}/p/demo/w/${name}`);
      await pane(page, name === 'default' ? 'demo' : name).getByLabel('Message').waitFor();
    }
    // Several tabs open (the list, three workspaces): no vertical scrollbar at either width.
    const [sh, ch] = await stripHeights(page);
    expect(sh).toBeLessThanOrEqual(ch);
    for (const name of ['default', 'alpha', 'beta']) {
      await phone.goto(`${web.s.base}/p/demo/w/${name}`);
      await pane(phone, name === 'default' ? 'demo' : name).getByLabel('Message').waitFor();
    }
    const [psh, pch] = await stripHeights(phone);
    expect(psh).toBeLessThanOrEqual(pch);
    await phone.context().close();

    // Alone, beta's head, Ports and Changes rows stack above the conversation.
    const beta = pane(page, 'beta');
    await beta.getByRole('region', { name: 'Changes', exact: true }).waitFor();
    const above = async () => {
      const top = (await beta.boundingBox())?.y ?? 0;
      return ((await beta.locator('.thread-scroll').boundingBox())?.y ?? 0) - top;
    };
    const alone = await above();
    const rowOf = async (l: Locator) => (await l.boundingBox())?.y ?? -1;
    expect(await rowOf(beta.getByRole('region', { name: 'Listening ports' }))).toBeLessThan(await rowOf(beta.getByRole('region', { name: 'Changes', exact: true })));

    // Side by side: Ports and Changes are one line each and the conversation starts no lower than alone.
    await beta.getByRole('button', { name: 'Side by side' }).click();
    await page.goto(`${web.s.base}/p/demo/w/alpha`);
    await pane(page, 'alpha').getByLabel('Message').waitFor();
    await beta.getByLabel('Message').waitFor();
    const heightOf = async (l: Locator) => (await l.boundingBox())?.height ?? 999;
    for (const name of ['alpha', 'beta']) {
      const p = pane(page, name);
      await expect.poll(() => heightOf(p.getByRole('region', { name: 'Changes', exact: true }))).toBeLessThan(44);
      expect(await heightOf(p.getByRole('region', { name: 'Listening ports' }))).toBeLessThan(44);
      // The workspace's name is whole (it was cut to "alp…" when the buttons kept their long labels).
      const title = p.locator('.pane-head h2');
      expect(await title.evaluate((h: { scrollWidth: number; clientWidth: number }) => h.scrollWidth <= h.clientWidth)).toBe(true);
      // Its Close tab gave way to the tab's own ×.
      expect(await p.getByRole('button', { name: 'Close tab', exact: true }).count()).toBe(0);
      expect(await page.getByRole('button', { name: `Close tab ${name}` }).isVisible()).toBe(true);
    }
    const beside = await above();
    // Each half is 640 px: stacked and wrapped, head, Ports and Changes took ~250 px; compact, about what one full-width pane takes.
    expect(beside).toBeLessThanOrEqual(alone + 20);
    // The head is one row: title, badge and buttons side by side.
    expect((await beta.locator('.pane-head').boundingBox())?.height ?? 0).toBeLessThan(48);
    // The whole page, the pressed "Side by side" button included (its text is --info-text, AA on --info-soft).
    await expectAccessible(page, { context: 'two tabs side by side, compact Ports and Changes rows' });
    await page.context().close();
  });
});
