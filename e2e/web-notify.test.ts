// Turn-end notices in real Chromium against the real server and sandboxes: two tabs open, a turn ends in the one not
// shown, and its tab gets a badge, its card an entry, and (opted in) a browser notification whose click opens the tab;
// showing the tab clears them. A failed turn gives the failed badge with its error; a turn cut by a stop is recorded
// as such and does not leave the tab replying; a turn that ends on screen gives nothing. Screenshot notify-badges.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { turnEndedDataSchema, type GroveEvent, type TurnEndedData } from '@grove/contracts';
import { TOKEN } from './harness.ts';
import { useWebServer } from './support/web.ts';

const web = useWebServer('web-notify', { forks: ['other'] });

/** Every `new Notification(...)` the page makes, kept in window.__notes; the last one's onclick is callable. */
const CAPTURE = `(() => {
  const Real = window.Notification;
  window.__notes = [];
  class Captured {
    constructor(title, options = {}) {
      window.__notes.push({ title, body: options.body ?? '', tag: options.tag ?? '' });
      window.__lastNote = this;
      this.onclick = null;
    }
    close() {}
    static get permission() { return Real.permission; }
    static requestPermission(cb) { return Real.requestPermission(cb); }
  }
  window.Notification = Captured;
})();`;

interface Note {
  title: string;
  body: string;
  tag: string;
}
// Evaluated as strings: this package is compiled without the DOM's types.
const notes = (page: Page) => page.evaluate('window.__notes') as Promise<Note[]>;
const storedChoice = (page: Page) => page.evaluate("window.localStorage.getItem('grove.notify')");

const strip = (page: Page) => page.getByRole('navigation', { name: 'Open workspaces' });
const tabLink = (page: Page, name: string) => strip(page).getByRole('link', { name: new RegExp(`^${name} \\(`) });
const badge = (page: Page, name: string) => tabLink(page, name).locator('.tab-badge');
const pane = (page: Page, name: string) => page.getByRole('region', { name: `Workspace ${name}`, includeHidden: true });
const card = (page: Page, name: string) => page.locator('.card', { has: page.getByRole('link', { name, exact: true }) });
/** The default workspace's card: its link reads "demo default". */
const demoCard = (page: Page) => page.locator('.card', { has: page.locator('.card-tag', { hasText: 'default' }) });
const reply = (page: Page, name: string, text: string) => pane(page, name).locator('.msg-assistant:not(.msg-streaming)', { hasText: text });

async function send(page: Page, name: string, text: string): Promise<void> {
  await pane(page, name).getByLabel('Message').fill(text);
  await pane(page, name).getByRole('button', { name: 'Send', exact: true }).click();
}

async function turnEnds(slug: string): Promise<TurnEndedData[]> {
  const r = await web.s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(slug)}&type=turn.ended`);
  return r.body.events.map((e) => turnEndedDataSchema.parse(e.data));
}

describe('turn-end notices', () => {
  it('badges the background tab, lists the entry, notifies when opted in, and clears when the tab is shown', async () => {
    const ctx = await web.browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.grantPermissions(['notifications'], { origin: web.s.base });
    await ctx.addInitScript(CAPTURE);
    const page = await ctx.newPage();
    await page.goto(`${web.s.base}/login?token=${TOKEN}`);

    // Two tabs: demo (the default workspace) and other; demo on screen.
    await page.goto(`${web.s.base}/p/demo/w/other`);
    await pane(page, 'other').getByLabel('Message').waitFor({ timeout: 60_000 });
    await tabLink(page, 'other').waitFor();
    await page.goto(`${web.s.base}/p/demo/w/default`);
    await pane(page, 'demo').getByLabel('Message').waitFor({ timeout: 60_000 });
    await tabLink(page, 'other').waitFor();

    // Opt in: the permission is granted in this context, so the toggle turns on and is remembered.
    const toggle = page.getByRole('button', { name: 'Notify me' });
    expect(await toggle.getAttribute('aria-pressed')).toBe('false');
    await toggle.click();
    await page.getByRole('button', { name: 'Notifying' }).waitFor();
    expect(await page.getByRole('button', { name: 'Notifying' }).getAttribute('aria-pressed')).toBe('true');
    expect(await storedChoice(page)).toBe('on');

    // A turn that ends in the tab on screen: no badge, no notification.
    await send(page, 'demo', 'hello there');
    await reply(page, 'demo', 'You said: "hello there"').waitFor({ timeout: 30_000 });
    await expect.poll(async () => (await turnEnds('demo')).length, { timeout: 15_000 }).toBe(1);

    // demo's turn runs while the user looks at other.
    await send(page, 'demo', 'sleep 1500');
    await pane(page, 'demo').locator('.msg-streaming').waitFor();
    await tabLink(page, 'other').click();
    await page.waitForURL('**/p/demo/w/other');
    const done = strip(page).getByRole('img', { name: 'Turn finished, waiting for you' });
    await done.waitFor({ timeout: 30_000 });
    expect(await badge(page, 'demo').innerText()).toBe('✓');
    expect(await badge(page, 'other').count()).toBe(0);
    // Events arrive in order: this notification is demo's second turn; the first one, on screen, made none.
    await expect.poll(() => notes(page), { timeout: 10_000 }).toEqual([{ title: 'demo: turn finished', body: 'The agent finished its turn and waits for you.', tag: 'grove-turn-demo' }]);
    expect((await turnEnds('demo')).at(-1)).toEqual({ turn: 'turn-2', outcome: 'completed', error: null, waitingForUser: true, shutdown: false });

    // The list, which shows no workspace, has the same as an entry on demo's card.
    await strip(page).getByRole('link', { name: 'All workspaces' }).click();
    await page.waitForURL('**/workspaces');
    await demoCard(page).locator('.card-turn').getByText(/^Finished (just now|.+ ago), waiting for you$/).waitFor();
    expect(await card(page, 'other').locator('.card-turn').count()).toBe(0);

    // Clicking the notification opens demo's tab, which clears the badge and the entry.
    await page.evaluate('window.__lastNote.onclick()');
    await page.waitForURL('**/p/demo/w/default');
    await badge(page, 'demo').waitFor({ state: 'detached' });
    expect(await page.locator('.card-turn').count()).toBe(0);

    // A failing turn in the background (sent from elsewhere, here the API: it fails at once, before a click could
    // switch tabs): the failed badge with the error, and its entry.
    await tabLink(page, 'other').click();
    await page.waitForURL('**/p/demo/w/other');
    expect((await web.s.api('POST', '/w/demo/messages', { text: 'fail' })).status).toBe(202);
    const failed = strip(page).getByRole('img', { name: /^Turn failed: Scripted failure, as requested\. \(turn 3\)$/ });
    await failed.waitFor({ timeout: 30_000 });
    expect(await badge(page, 'demo').innerText()).toBe('!');
    await expect.poll(async () => (await notes(page)).at(-1), { timeout: 10_000 }).toEqual({ title: 'demo: turn failed', body: 'The turn failed: Scripted failure, as requested. (turn 3)', tag: 'grove-turn-demo' });
    await strip(page).getByRole('link', { name: 'All workspaces' }).click();
    await demoCard(page).locator('.card-turn-failed').getByText(/^Failed (just now|.+ ago): Scripted failure, as requested\. \(turn 3\)$/).waitFor();
    await web.shot(page, 'notify-badges');
    expect((await turnEnds('demo')).at(-1)).toEqual({ turn: 'turn-3', outcome: 'failed', error: 'Scripted failure, as requested. (turn 3)', waitingForUser: false, shutdown: false });
    await tabLink(page, 'demo').click();
    await failed.waitFor({ state: 'detached' });

    // Turned off: the next background turn end still badges the tab but makes no notification.
    await page.getByRole('button', { name: 'Notifying' }).click();
    await page.getByRole('button', { name: 'Notify me' }).waitFor();
    expect(await storedChoice(page)).toBe('off');
    const before = (await notes(page)).length;
    await send(page, 'demo', 'sleep 1500');
    await pane(page, 'demo').locator('.msg-streaming').waitFor();
    await tabLink(page, 'other').click();
    await done.waitFor({ timeout: 30_000 });
    expect((await notes(page)).length).toBe(before);
    await ctx.close();
  });

  it('records a turn cut by a stop as such, and the tab does not stay replying', async () => {
    const ctx = await web.browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await ctx.newPage();
    await page.goto(`${web.s.base}/login?token=${TOKEN}`);
    await page.goto(`${web.s.base}/p/demo/w/default`);
    // Its tab is remembered (localStorage) once it is in the strip.
    await tabLink(page, 'demo').waitFor();
    await page.goto(`${web.s.base}/p/demo/w/other`);
    await pane(page, 'other').getByLabel('Message').waitFor({ timeout: 60_000 });
    await tabLink(page, 'demo').waitFor();
    await send(page, 'other', 'sleep 30000');
    await pane(page, 'other').locator('.msg-streaming').waitFor();
    await tabLink(page, 'demo').click();
    await tabLink(page, 'other').locator('.tab-replying').waitFor();

    // Stopped from the API, as from another browser: the backend reports the cut turn before it goes.
    expect((await web.s.api('POST', '/api/workspaces/demo~other/stop')).status).toBe(200);
    await expect.poll(async () => (await turnEnds('demo~other')).at(-1), { timeout: 15_000 }).toEqual({ turn: 'turn-1', outcome: 'cancelled', error: null, waitingForUser: false, shutdown: true });
    await strip(page).getByRole('img', { name: 'Turn stopped' }).waitFor({ timeout: 30_000 });
    await tabLink(page, 'other').locator('.tab-replying').waitFor({ state: 'detached', timeout: 30_000 });
    await expect.poll(() => tabLink(page, 'other').getAttribute('title'), { timeout: 30_000 }).toBe('other: stopped');
    await ctx.close();
  });
});
