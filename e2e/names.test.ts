// Bad names are refused with 422 before any path is built; nothing outside GROVE_HOME is touched.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanup, makeHome, startServer, waitRunning, type RunningServer } from './harness.ts';

const home = makeHome('names');
let s: RunningServer;

beforeAll(async () => {
  s = await startServer({ home, env: { GROVE_DEMO: 'true' } });
  // The default workspace starts in the background; let it settle so the listings below are stable.
  await waitRunning(s, 'demo');
});

afterAll(async () => {
  await s?.stop();
  cleanup(home);
});

const listing = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []);

describe('name guard', () => {
  it('refuses traversal, separators, case, length, look-alikes and ~ with 422', async () => {
    const parent = path.dirname(home);
    const before = { worktrees: listing(path.join(home, 'worktrees', 'demo')), run: listing(path.join(home, 'run')) };
    const bad = ['../x', '..', 'a/b', 'A', 'Feature', 'x'.repeat(40), '', 'dеmo', 'ｆｕｌｌ', 'a~b', '-lead', 'a b', 'a.b', '%2e%2e', 'default'];
    for (const name of bad) {
      const r = await s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name });
      expect(r.status, name).toBe(422);
      expect(r.body.code).toBe('invalid_name');
      expect(r.body.message).toMatch(/name/);
    }
    for (const project of ['../etc', 'Demo', '']) {
      const r = await s.api<{ code: string }>('POST', '/api/workspaces', { project, name: 'ok' });
      expect(r.status).toBe(422);
    }
    for (const slug of ['..%2F..%2Fetc', 'demo~..', 'DEMO']) {
      expect((await s.api('POST', `/api/workspaces/${slug}/stop`)).status).toBe(422);
    }
    // Where a traversal would have landed, had any name reached a path.
    for (const escaped of [path.join(parent, 'x'), path.join(home, 'x'), path.join(home, 'worktrees', 'x'), path.join(home, 'run', 'x'), path.join(home, 'threads', 'x')]) {
      expect(fs.existsSync(escaped), escaped).toBe(false);
    }
    expect(listing(path.join(home, 'worktrees', 'demo'))).toEqual(before.worktrees);
    expect(listing(path.join(home, 'run'))).toEqual(before.run);
  });
});
