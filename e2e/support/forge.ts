// The set-up of the web e2e files that need a remote and a forge: a file:// bare repository with one commit, the
// test Gitea on loopback in front of it, the real server (no demo project) with the project `app` cloned from it and
// its workspace `feat` forked, and one Chromium; stopped and cleaned up in reverse after the file.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Workspace } from '@grove/contracts';
import { startTestForge, type TestForge } from '../../packages/core/src/test-support/test-forge.ts';
import { WEB_DIR, assertWebReady, launchBrowser, screenshotter, signedIn } from '../browser.ts';
import { cleanup, makeHome, makeUpstream, startServer, type RunningServer } from '../harness.ts';

export interface ForgeWebOptions {
  /** The forge's token, given to the server as GROVE_FORGE_TOKEN; unique per file, so a leak names the file. */
  token: string;
  /** The files of the upstream's first commit; README.md alone unless the file needs more. */
  files?: Record<string, string>;
  /** Added to the server's env (GROVE_DEMO=0, GROVE_WEB_DIR, the token and GROVE_MAX_RUNNING=2 are always set). */
  env?: Record<string, string>;
  /**
   * Whether the project's config names the forge before the tests (owner team, repo app); a file that shows what
   * happens without one sets it itself.
   */
  configureForge: boolean;
}

export interface ForgeWeb {
  /** The file's temp dir; the server's home is `<home>/grove`. */
  readonly home: string;
  /** The bare repository the project was cloned from and the forge serves. */
  readonly upstream: string;
  /** The following are there only inside tests and later hooks: they start in beforeAll. */
  readonly s: RunningServer;
  readonly forge: TestForge;
  readonly browser: Browser;
  /** screenshotter(home): docs/screenshots with GROVE_UPDATE_SCREENSHOTS=1, the run's home otherwise. */
  shot: (page: Page, name: string) => Promise<Buffer>;
  /** A fresh browser context signed in with the access link, on the home page. */
  signedIn(width?: number): Promise<Page>;
}

/** Registers the file's beforeAll/afterAll. */
export function useForgeWeb(name: string, opts: ForgeWebOptions): ForgeWeb {
  const home = makeHome(name);
  const upstream = path.join(home, 'upstream.git');
  let server: RunningServer | undefined;
  let testForge: TestForge | undefined;
  let chromium: Browser | undefined;

  beforeAll(async () => {
    // The server mounts the dashboard only when it is built; without it every page would be the fallback.
    assertWebReady();
    makeUpstream(home, opts.files ?? { 'README.md': '# app\n' });
    testForge = await startTestForge({ bare: upstream, owner: 'team', repo: 'app', token: opts.token });
    server = await startServer({
      home: path.join(home, 'grove'),
      env: { GROVE_DEMO: '0', GROVE_WEB_DIR: WEB_DIR, GROVE_FORGE_TOKEN: opts.token, GROVE_MAX_RUNNING: '2', ...opts.env },
    });
    expect((await server.api('POST', '/api/projects', { name: 'app', source: `file://${upstream}` })).status).toBe(201);
    if (opts.configureForge) {
      const forge = { kind: 'gitea', baseUrl: testForge.baseUrl, owner: 'team', repo: 'app' };
      expect((await server.api('PUT', '/api/projects/app/config', { forge })).status).toBe(200);
    }
    const fork = await server.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'app', name: 'feat' });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    chromium = await launchBrowser();
  });

  afterAll(async () => {
    await chromium?.close();
    await server?.stop();
    await testForge?.close();
    cleanup(path.join(home, 'grove'));
    fs.rmSync(home, { recursive: true, force: true });
  });

  const need = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`${what} not started yet: use it inside a test or a later hook`);
    return v;
  };
  return {
    home,
    upstream,
    get s() {
      return need(server, 'server');
    },
    get forge() {
      return need(testForge, 'forge');
    },
    get browser() {
      return need(chromium, 'browser');
    },
    shot: screenshotter(home),
    signedIn: (width = 1280) => signedIn(need(chromium, 'browser'), need(server, 'server').base, width),
  };
}
