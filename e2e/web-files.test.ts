// The Files view in real Chromium against the real server and sandbox: open it in the workspace tab, expand a directory
// from the keyboard, see a modified file's mark, open it and see highlighted text; then "Open file" on the Changes
// panel's diff shows that file in the Files view. Screenshot workbench-files.
import { describe, expect, it } from 'vitest';
import { containerOf, dockerExec } from './harness.ts';
import { useWebServer } from './support/web.ts';

const web = useWebServer('web-files');

describe('Files view', () => {
  it('shows the tree with marks, opens a file with highlighting, and opens a file from the diff', async () => {
    const container = containerOf(web.s.instance, 'demo') ?? '';
    const w = dockerExec(container, ['sh', '-c', "cd /workspace && printf '// changed in the sandbox\\n' >> src/greet.js && printf 'notes\\n' > notes.txt"]);
    expect(w.code, w.out).toBe(0);

    const page = await web.signedIn(1280);
    await page.goto(`${web.s.base}/p/demo/w/default`);
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    const tree = page.getByRole('tree', { name: 'Files of the workspace' });
    const src = tree.getByRole('treeitem', { name: /^src/ });
    await src.waitFor();
    await expect.poll(() => src.getAttribute('aria-expanded')).toBe('false');
    await tree.getByRole('treeitem', { name: /notes\.txt.*untracked/ }).waitFor();

    // Keyboard: focus the directory, expand it, step down to its file and open it.
    await src.focus();
    await page.keyboard.press('ArrowRight');
    await expect.poll(() => src.getAttribute('aria-expanded')).toBe('true');
    const greet = tree.getByRole('treeitem', { name: /greet\.js.*modified/ });
    await greet.waitFor();
    expect(await greet.locator('.files-mark').innerText()).toBe('M');
    await page.keyboard.press('ArrowDown');
    await expect.poll(() => page.locator(':focus').getAttribute('data-path')).toBe('src/greet.js');
    await page.keyboard.press('Enter');
    const viewer = page.getByRole('region', { name: 'Content of src/greet.js' });
    await viewer.getByText('// changed in the sandbox').waitFor();
    // Highlighted: highlight.js wrapped the keywords and the comment in its own spans.
    await viewer.locator('.hljs-comment', { hasText: 'changed in the sandbox' }).waitFor();
    expect(await viewer.locator('.hljs-keyword').count()).toBeGreaterThan(0);
    expect(await viewer.locator('.files-lines').innerText()).toMatch(/^1\n2/);
    await web.shot(page, 'workbench-files');

    // From the Changes panel: "Open file" on the file shows it in the Files view.
    await page.getByRole('tab', { name: 'Conversation', exact: true }).click();
    const panel = page.getByRole('region', { name: 'Changes', exact: true });
    await panel.getByRole('button', { name: 'Refresh the changes' }).click();
    await panel.getByRole('button', { name: 'Changes', exact: true }).click();
    await panel.getByRole('listitem').filter({ hasText: 'notes.txt' }).getByRole('button', { name: 'Open file', exact: true }).click();
    await expect.poll(() => page.getByRole('tab', { name: 'Files', exact: true }).getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => page.getByRole('region', { name: 'Content of notes.txt' }).locator('.files-text').textContent()).toBe('notes\n');
    await expect.poll(() => tree.getByRole('treeitem', { name: /notes\.txt/ }).getAttribute('aria-selected')).toBe('true');

    // Stopped: the view says where the files come from and offers Reopen.
    expect((await web.s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
    await page.getByText('The workspace is stopped; its files are read from its sandbox.').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Reopen', exact: true }).waitFor();
    await page.context().close();
  });
});
