// The Terminal view in real Chromium against the real server and sandbox: open a terminal in the workspace tab, type a
// command, read its output in the page, reload and see it again (the scrollback replays); stopped, it offers Reopen;
// screenshot workbench-terminal.
import { describe, expect, it } from 'vitest';
import type { TerminalListResponse } from '@grove/contracts';
import { useWebServer } from './support/web.ts';

const web = useWebServer('web-terminal');

describe('Terminal view', () => {
  it('opens a shell in the sandbox, shows its output, and shows it again after a reload', async () => {
    const { s, shot } = web;
    const page = await web.signedIn(1280);
    await page.goto(`${s.base}/p/demo/w/default`);
    await page.getByRole('tab', { name: 'Terminal', exact: true }).click();
    await page.getByRole('button', { name: '+ New terminal' }).click();
    await page.locator('.terminal-host .xterm').waitFor();
    await page.getByText('press Escape then Tab').waitFor();
    // The new terminal takes the keyboard: what is typed reaches its shell without a click, even before its socket
    // has opened (the keys wait for it).
    await page.keyboard.type('echo "answer=$((6*7))"; id -un');
    await page.keyboard.press('Enter');
    // xterm's DOM renderer puts each row in .xterm-rows; the echo of the typed line holds no "answer=42".
    const rows = page.locator('.terminal-screen:not([hidden]) .xterm-rows');
    await expect.poll(() => rows.innerText(), { timeout: 20_000 }).toMatch(/answer=42\s+grove/);
    await shot(page, 'workbench-terminal');

    const listed = await s.api<TerminalListResponse>('GET', '/w/demo/terminals');
    expect(listed.body.terminals).toHaveLength(1);
    await page.reload();
    await page.getByRole('tab', { name: 'Terminal', exact: true }).click();
    await expect.poll(() => page.locator('.terminal-screen:not([hidden]) .xterm-rows').innerText(), { timeout: 20_000 }).toMatch(/answer=42\s+grove/);
    // The same terminal, reattached: no second one was opened.
    expect((await s.api<TerminalListResponse>('GET', '/w/demo/terminals')).body.terminals.map((t) => t.id)).toEqual(listed.body.terminals.map((t) => t.id));

    // Stopped (here from the API, as from another tab): the view says why there is no shell, and Reopen starts it.
    expect((await s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
    await page.getByText('The workspace is stopped; terminals run in its sandbox.').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Reopen', exact: true }).click();
    await page.getByRole('button', { name: '+ New terminal' }).waitFor({ timeout: 60_000 });
    await page.context().close();
  });
});
