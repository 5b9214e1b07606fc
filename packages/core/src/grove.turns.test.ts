// GET /turns and /turns/:n/diff through createGrove: the real after-turn hook on host.sock, real git, a real
// SQLite file (the revert events), an in-memory sandbox driver; read back after the workspace stopped.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useGroveFixture } from './test-support/grove-fixture.ts';
import { postTurnEnded } from './test-support/host-sock.ts';

const fx = useGroveFixture({
  tmpPrefix: 'grove-turns-api-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 3, gitLockTimeoutMs: 5_000 },
});

/** What the sandbox's backend does when a turn's agent is done. */
function turnEnded(home: string, slug: string, turn: string) {
  return postTurnEnded(home, slug, { turn, status: 'completed' });
}

describe('turns through the registry', () => {
  it('lists files and reverted paths of this workspace and answers diffs while it is stopped', async () => {
    const { home, driver } = fx;
    const grove = await fx.open();
    await grove.addProject({ name: 'demo', source: fx.source, createDefault: false, config: { allowedPaths: ['notes/**', 'app.txt'] } });
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
