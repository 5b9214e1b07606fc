// The set-up every web e2e file repeats: the dashboard built, the real server mounting it with the demo project's
// default workspace running, and one Chromium for the file; stopped and cleaned up in reverse after it.
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { WEB_DIR, assertWebReady, launchBrowser, reportFailure, screenshotter, signedIn } from '../browser.ts';
import { cleanup, makeHome, startServer, waitRunning, type RunningServer } from '../harness.ts';

export interface WebServer {
  readonly home: string;
  /** The running server (only inside tests and later hooks: it starts in beforeAll). */
  readonly s: RunningServer;
  readonly browser: Browser;
  /** screenshotter(home): docs/screenshots with GROVE_UPDATE_SCREENSHOTS=1, the run's home otherwise. */
  shot: (page: Page, name: string) => Promise<Buffer>;
  /** A fresh browser context signed in with the access link, on the home page. */
  signedIn(width?: number): Promise<Page>;
}

/**
 * Registers the file's beforeAll/afterAll; `env` is added to the server's (GROVE_WEB_DIR is always set); `forks` are
 * workspaces of demo forked through the API, running before the browser starts.
 */
export function useWebServer(name: string, opts: { env?: Record<string, string>; forks?: readonly string[] } = {}): WebServer {
  const home = makeHome(name);
  let server: RunningServer | undefined;
  let chromium: Browser | undefined;
  beforeAll(async () => {
    // The server mounts the dashboard only when it is built; without it every page would be the fallback.
    assertWebReady();
    server = await startServer({ home, env: { GROVE_WEB_DIR: WEB_DIR, ...opts.env } });
    await waitRunning(server, 'demo');
    for (const fork of opts.forks ?? []) {
      const r = await server.api('POST', '/api/workspaces', { project: 'demo', name: fork });
      if (r.status !== 201) throw new Error(`forking demo~${fork}: ${r.status} ${JSON.stringify(r.body)}`);
      await waitRunning(server, `demo~${fork}`);
    }
    chromium = await launchBrowser();
  });
  afterEach(async (ctx) => {
    if (ctx.task.result?.state === 'fail') await reportFailure(chromium, server);
  });
  afterAll(async () => {
    await chromium?.close();
    await server?.stop();
    cleanup(home);
  });
  const need = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`${what} not started yet: use it inside a test or a later hook`);
    return v;
  };
  return {
    home,
    get s() {
      return need(server, 'server');
    },
    get browser() {
      return need(chromium, 'browser');
    },
    shot: screenshotter(home),
    signedIn: (width = 1280) => signedIn(need(chromium, 'browser'), need(server, 'server').base, width),
  };
}
