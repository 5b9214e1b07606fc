// The teardown confirmation's facts: what a teardown would keep (branch, commits, the recovery ref of the
// uncommitted work) and remove, read on the host; and that the teardown then saves exactly that.
// Real git and SQLite; the in-memory sandbox driver stands in for Docker (lifecycle e2e tests use the real one).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isGroveError } from '@grove/contracts';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { FakeDriver } from './test-support/fake-driver.ts';
import { gitInWorktree, makeSourceRepo } from './test-support/repo.ts';

let tmp: string;
let driver: FakeDriver;
let g: Grove;

beforeEach(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'grove-core-tdp-'));
  driver = new FakeDriver();
  g = await createTestGrove({ home: join(tmp, 'home'), driver, image: 'grove-sandbox:test', maxRunning: 3, logger: pino({ level: 'silent' }), healthTimeoutMs: 1_500 });
  await g.addProject({ name: 'demo', source: makeSourceRepo(join(tmp, 'src')), createDefault: false });
});
afterEach(async () => {
  await g.close();
  await driver.closeAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe('teardown preview', () => {
  it('names the branch, its commits and the recovery ref the uncommitted work will go to; the teardown uses that ref', async () => {
    await g.fork({ project: 'demo', name: 'feat' });
    const wt = join(tmp, 'home', 'worktrees', 'demo', 'feat');
    const clean = await g.teardownPreview('demo~feat');
    expect(clean).toEqual({
      slug: 'demo~feat',
      branch: 'grove/feat',
      baseRef: 'main',
      commitsAhead: 0,
      uncommitted: { total: 0, files: [] },
      recoveryRef: null,
      removes: { sandbox: true, worktree: true },
    });

    writeFileSync(join(wt, 'committed.txt'), 'c');
    gitInWorktree(wt, 'add', 'committed.txt');
    gitInWorktree(wt, 'commit', '-q', '-m', 'work');
    writeFileSync(join(wt, 'README.md'), 'edited');
    writeFileSync(join(wt, 'scratch.txt'), 's');
    const dirty = await g.teardownPreview('demo~feat');
    expect(dirty).toMatchObject({
      commitsAhead: 1,
      uncommitted: { total: 2, files: [{ status: 'modified', path: 'README.md' }, { status: 'added', path: 'scratch.txt' }] },
      recoveryRef: 'refs/grove/demo+feat/teardown/1',
    });

    await g.teardown('demo~feat');
    const cleaned = (await g.events({ slug: 'demo~feat', limit: 1000 })).find((e) => e.type === 'workspace.cleaned');
    expect(cleaned?.data).toMatchObject({ branch: 'grove/feat', recoveryRef: dirty.recoveryRef });
    const gone = await g.teardownPreview('demo~feat').catch((e: unknown) => e);
    expect(isGroveError(gone) && gone.code).toBe('workspace_not_found');
    const bad = await g.teardownPreview('../x').catch((e: unknown) => e);
    expect(isGroveError(bad) && bad.code).toBe('invalid_name');
  });
});
