// GET /turns and /turns/:n/diff through createGrove: the real after-turn hook on host.sock, real git, a real
// SQLite file (the revert events), an in-memory sandbox driver; read back after the workspace stopped.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { FakeDriver } from './test-support/fake-driver.ts';
import { makeSourceRepo } from './test-support/repo.ts';

let tmp: string;
let driver: FakeDriver;
let grove: Grove | undefined;

beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-turns-api-'));
  driver = new FakeDriver();
});
afterEach(async () => {
  await grove?.close();
  await driver.closeAll();
  rmSync(tmp, { recursive: true, force: true });
});

/** What the sandbox's backend does when a turn's agent is done. */
function turnEnded(home: string, slug: string, turn: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: join(home, 'run', slug, 'host.sock'), path: '/turn-ended', method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ turn, status: 'completed' }));
  });
}

describe('turns through the registry', () => {
  it('lists files and reverted paths of this workspace and answers diffs while it is stopped', async () => {
    const home = join(tmp, 'home');
    grove = await createTestGrove({ home, driver, image: 'grove-sandbox:test', maxRunning: 3, logger: pino({ level: 'silent' }), healthTimeoutMs: 1_500, gitLockTimeoutMs: 5_000 });
    await grove.addProject({ name: 'demo', source: makeSourceRepo(join(tmp, 'src')), createDefault: false, config: { allowedPaths: ['notes/**', 'app.txt'] } });
    const { slug } = await grove.fork({ project: 'demo', name: 'w' });
    const worktree = join(home, 'worktrees', 'demo', 'w');

    writeFileSync(join(worktree, 'app.txt'), 'v1\nv2\n');
    writeFileSync(join(worktree, 'outside.txt'), 'not allowed\n');
    expect((await turnEnded(home, slug, 'turn-1')).status).toBe(200);
    expect(existsSync(join(worktree, 'outside.txt'))).toBe(false);
    writeFileSync(join(worktree, 'outside.txt'), 'again\n');
    expect((await turnEnded(home, slug, 'turn-2')).status).toBe(200);

    await grove.stop(slug);
    expect(driver.containers.get(slug)?.running).toBe(false);
    const turns = await grove.turns(slug);
    expect(turns.map((t) => ({ n: t.n, recorded: t.recorded, undoNext: t.undoNext, files: t.files, reverted: t.reverted }))).toEqual([
      { n: 2, recorded: false, undoNext: false, files: [], reverted: [{ path: 'outside.txt', action: 'removed' }] },
      { n: 1, recorded: true, undoNext: true, files: [{ path: 'app.txt', status: 'modified', added: 1, removed: 0 }], reverted: [{ path: 'outside.txt', action: 'removed' }] },
    ]);
    expect(turns[0]?.allowedPaths).toEqual(['notes/**', 'app.txt']);
    const diff = await grove.turnDiff(slug, 1);
    expect(diff.diff).toContain('+v2');
    await expect(grove.turnDiff(slug, 2)).rejects.toMatchObject({ code: 'not_found', status: 404 });
    await expect(grove.turns('demo~nope')).rejects.toMatchObject({ code: 'workspace_not_found' });

    // A new workspace under the same slug starts with no turns: neither the old snapshots nor the old reverts.
    await grove.teardown(slug);
    await grove.fork({ project: 'demo', name: 'w' });
    expect(await grove.turns(slug)).toEqual([]);
  });
});
