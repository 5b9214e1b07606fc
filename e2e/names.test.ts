// Bad names are refused with 422 before any path is built; nothing outside GROVE_HOME is touched.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useServer } from './harness.ts';

const fx = useServer('names');

const listing = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []);

describe('name guard', () => {
  it('refuses traversal, separators, case, length, look-alikes and ~ with 422', async () => {
    const parent = path.dirname(fx.home);
    const landings = [path.join(parent, 'x'), path.join(parent, 'etc'), path.join(fx.home, 'x'), path.join(fx.home, 'worktrees', 'x'), path.join(fx.home, 'run', 'x'), path.join(fx.home, 'threads', 'x')];
    const existedBefore = landings.map((p) => fs.existsSync(p));
    const before = { worktrees: listing(path.join(fx.home, 'worktrees', 'demo')), run: listing(path.join(fx.home, 'run')) };
    const bad = ['../x', '..', 'a/b', 'A', 'Feature', 'x'.repeat(40), '', 'dеmo', 'ｆｕｌｌ', 'a~b', '-lead', 'a b', 'a.b', '%2e%2e', 'default'];
    for (const name of bad) {
      const r = await fx.s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name });
      expect(r.status, name).toBe(422);
      expect(r.body.code).toBe('invalid_name');
      expect(r.body.message).toMatch(/name/);
    }
    for (const project of ['../etc', 'Demo', '']) {
      const r = await fx.s.api<{ code: string }>('POST', '/api/workspaces', { project, name: 'ok' });
      expect(r.status).toBe(422);
    }
    for (const slug of ['..%2F..%2Fetc', 'demo~..', 'DEMO']) {
      expect((await fx.s.api('POST', `/api/workspaces/${slug}/stop`)).status).toBe(422);
    }
    // Where a traversal would have landed, had any name reached a path.
    expect(landings.map((p) => fs.existsSync(p))).toEqual(existedBefore);
    expect(listing(path.join(fx.home, 'worktrees', 'demo'))).toEqual(before.worktrees);
    expect(listing(path.join(fx.home, 'run'))).toEqual(before.run);
  });
});
