// The browser side of the web e2e tests: Debian Chromium via playwright-core, signed in with the access link,
// against a server that mounts this checkout's built dashboard.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { TOKEN, type RunningServer } from './harness.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Pass as GROVE_WEB_DIR so the server mounts the dashboard (it serves a fallback page without it). */
export const WEB_DIR = path.join(root, 'apps/web');
export const CHROMIUM = '/usr/bin/chromium';

/** Fails with what to do when the dashboard is not built or Chromium is missing. */
export function assertWebReady(): void {
  if (!fs.existsSync(path.join(WEB_DIR, '.next', 'BUILD_ID'))) {
    throw new Error('apps/web is not built: run `npm run build -w @grove/web` (or scripts/setup.sh) before the web e2e tests');
  }
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium`);
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A fresh context signed in through /login?token= (which sets the cookie and lands on the home page). */
export async function signedIn(browser: Browser, base: string, width = 1280): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width, height: width < 600 ? 844 : 800 } });
  const page = await ctx.newPage();
  await page.goto(`${base}/login?token=${TOKEN}`);
  return page;
}

/**
 * A screenshot by name: into docs/screenshots (for the README) only with GROVE_UPDATE_SCREENSHOTS=1, so a test run
 * leaves the tree clean; otherwise into `<home>/screenshots` of the run.
 */
export function screenshotter(home: string): (page: Page, name: string) => Promise<Buffer> {
  const dir = process.env.GROVE_UPDATE_SCREENSHOTS === '1' ? path.join(root, 'docs/screenshots') : path.join(home, 'screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return (page, name) => page.screenshot({ path: path.join(dir, `${name}.png`) });
}

/**
 * After a failed browser test: what each open page shows and the server's last log lines, printed with the failure,
 * so a run on CI (where nothing else is kept) says whether a message went out, what the reply said, what failed.
 * Every context the failed test left open is closed, so the file's next test starts clean.
 */
export async function reportFailure(browser: Browser | undefined, server: RunningServer | undefined): Promise<void> {
  const parts: string[] = [];
  for (const ctx of browser?.contexts() ?? []) {
    for (const page of ctx.pages()) {
      const text = await page
        .locator('body')
        .innerText({ timeout: 2_000 })
        .catch((e: unknown) => `(could not read the page: ${e instanceof Error ? e.message : String(e)})`);
      parts.push(`--- page ${page.url()}, its text's last 3000 characters:\n${text.slice(-3_000)}`);
    }
    await ctx.close().catch(() => undefined);
  }
  parts.push(`--- the server's last 80 log lines:\n${(server?.logs ?? []).slice(-80).join('\n')}`);
  console.log(`[browser failure report]\n${parts.join('\n')}`);
}
