// Lifecycle logic against real git repos, a real registry (a SQLite file, then the same tests on a throwaway
// PostgreSQL cluster) and real sockets, with an in-memory sandbox driver.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openPostgres, openSqlite, pgTables, workspaces } from '@grove/db';
import { eq } from 'drizzle-orm';
import type { GroveEvent } from '@grove/contracts';
import { workspaceSchema } from '@grove/contracts';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Grove } from './index.ts';
import { ensureWorktree, resolveCommit } from './git.ts';
import { useGroveFixture } from './test-support/grove-fixture.ts';
import { branches, git, gitInWorktree } from './test-support/repo.ts';

const fx = useGroveFixture({
  tmpPrefix: 'grove-core-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 3, gitLockTimeoutMs: 5_000 },
  postgresDatabase: 'core',
});
const { open, withProject, until } = fx;

function ls(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

async function eventTypes(g: Grove, slug: string): Promise<string[]> {
  return (await g.events({ slug, limit: 1000 })).map((e) => e.type);
}

type RowValues = { slug: string; project: string; name: string; branch: string; baseRef: string; state: 'creating' | 'tearing-down'; createdAt: string; updatedAt: string };

/** What a crash leaves in the registry, written by hand (the server is closed): rows added, a state changed. */
async function writeRegistry(edit: { insert?: RowValues[]; setState?: { slug: string; state: 'tearing-down' | 'stopped' } }): Promise<void> {
  if (fx.databaseUrl) {
    const h = await openPostgres({ url: fx.databaseUrl });
    try {
      const t = pgTables.workspaces;
      if (edit.setState) await h.db.update(t).set({ state: edit.setState.state }).where(eq(t.slug, edit.setState.slug));
      if (edit.insert?.length) await h.db.insert(t).values(edit.insert);
    } finally {
      await h.close();
    }
    return;
  }
  const { db, close } = openSqlite({ file: join(fx.home, 'grove.db') });
  try {
    if (edit.setState) db.update(workspaces).set({ state: edit.setState.state }).where(eq(workspaces.slug, edit.setState.slug)).run();
    if (edit.insert?.length) db.insert(workspaces).values(edit.insert).run();
  } finally {
    await close();
  }
}

describe.each(['sqlite', 'postgres'] as const)('registry on %s', (dialect) => {
  beforeEach(async () => {
    if (dialect === 'postgres') await fx.usePostgres();
  });

  it('keeps the registry where it is told: the SQLite file in the home, or only the PostgreSQL database', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'where' });
    expect(existsSync(join(fx.home, 'grove.db'))).toBe(dialect === 'sqlite');
    if (fx.databaseUrl) {
      const h = await openPostgres({ url: fx.databaseUrl });
      try {
        expect((await h.db.select().from(pgTables.workspaces)).map((r) => r.slug)).toEqual(['demo~where']);
      } finally {
        await h.close();
      }
    }
  });

  describe('addProject', () => {
    it('bare-clones, records the project and starts the default workspace; a second call changes nothing', async () => {
      const g = await open();
      await g.addProject({ name: 'demo', source: fx.source });
      expect(existsSync(join(fx.home, 'repos', 'demo', 'HEAD'))).toBe(true);
      expect(await g.listProjects()).toEqual([{ name: 'demo', defaultBranch: 'main', createdAt: expect.any(String) as string }]);
      const ws = await g.get('demo');
      expect(ws).toMatchObject({ slug: 'demo', name: 'default', isDefault: true, branch: 'grove/default', baseRef: 'main', state: 'running' });
      expect(existsSync(join(fx.home, 'worktrees', 'demo', 'default', 'README.md'))).toBe(true);

      const before = await g.events({ limit: 1000 });
      await g.addProject({ name: 'demo', source: fx.source });
      expect(await g.events({ limit: 1000 })).toEqual(before);
      expect((await g.list()).workspaces).toHaveLength(1);

      // A stopped default stays stopped.
      await g.stop('demo');
      await g.addProject({ name: 'demo', source: fx.source });
      expect((await g.get('demo')).state).toBe('stopped');
    });

    it('re-creates a torn-down default workspace on the kept grove/default branch', async () => {
      const g = await open();
      await g.addProject({ name: 'demo', source: fx.source });
      await g.teardown('demo');
      expect(branches(join(fx.home, 'repos', 'demo'))).toContain('grove/default');
      await g.addProject({ name: 'demo', source: fx.source });
      expect(await g.get('demo')).toMatchObject({ state: 'running', branch: 'grove/default', isDefault: true });
      const prepared = (await g.events({ slug: 'demo', limit: 100 })).filter((e) => e.type === 'workspace.prepared');
      expect(prepared.map((e) => e.data.branchCreated)).toEqual([true, false]);
      expect((await g.list({ includeGone: true })).workspaces.map((w) => w.state)).toEqual(['gone', 'running']);
    });

    it('rejects bad names and sources', async () => {
      const g = await open();
      await expect(g.addProject({ name: 'Demo', source: fx.source })).rejects.toMatchObject({ code: 'invalid_name', message: expect.stringContaining('lowercase') as string });
      await expect(g.addProject({ name: 'demo', source: '--upload-pack=x' })).rejects.toMatchObject({ code: 'invalid_input' });
      await expect(g.addProject({ name: 'demo', source: join(fx.tmp, 'missing') })).rejects.toMatchObject({
        code: 'invalid_input',
        message: expect.stringContaining('no git repository') as string,
      });
      await expect(g.addProject({ name: 'demo', source: 'ext::sh -c touch% /tmp/pwned' })).rejects.toMatchObject({ code: 'invalid_input' });
      expect(await g.listProjects()).toEqual([]);
    });
  });

  describe('fork', () => {
    it('reserves, prepares the worktree, starts the sandbox, waits for health and registers', async () => {
      const g = await withProject();
      const seen: GroveEvent[] = [];
      g.onEvent((e) => seen.push(e));
      const ws = await g.fork({ project: 'demo', name: 'fix-1' });
      expect(workspaceSchema.parse(ws)).toEqual(ws);
      expect(ws).toMatchObject({ slug: 'demo~fix-1', project: 'demo', name: 'fix-1', isDefault: false, branch: 'grove/fix-1', baseRef: 'main', state: 'running', failureReason: null });
      // No host path leaks into the API shape.
      expect(JSON.stringify(ws)).not.toContain(fx.home);

      expect(await eventTypes(g, 'demo~fix-1')).toEqual(['workspace.reserved', 'workspace.prepared', 'sandbox.started', 'workspace.registered']);
      expect(seen.map((e) => e.type)).toEqual(['workspace.reserved', 'workspace.prepared', 'sandbox.started', 'workspace.registered']);
      const [reserved, prepared, started, registered] = seen;
      expect(reserved?.data).toMatchObject({ branch: 'grove/fix-1', base: 'main', running: 0, creating: 1, cap: 3 });
      expect(prepared?.data).toMatchObject({ branch: 'grove/fix-1', branchCreated: true, baseCommit: expect.stringMatching(/^[0-9a-f]{40}$/) as string });
      expect(started?.data).toMatchObject({ containerId: 'fake-1', ms: expect.any(Number) as number });
      expect(registered?.data).toMatchObject({ ms: expect.any(Number) as number });

      const spec = fx.driver.containers.get('demo~fix-1')?.spec;
      expect(spec).toMatchObject({
        worktreePath: join(fx.home, 'worktrees', 'demo', 'fix-1'),
        gitCommonDir: join(fx.home, 'repos', 'demo'),
        sandboxGitDir: join(fx.home, 'sandbox-git', 'demo~fix-1'),
        runDir: join(fx.home, 'run', 'demo~fix-1'),
        threadDir: join(fx.home, 'threads', 'demo~fix-1'),
        stateDir: join(fx.home, 'state', 'demo~fix-1'),
        env: { GROVE_SLUG: 'demo~fix-1', GROVE_PROVIDER: 'scripted', GROVE_PROJECT: 'demo' },
        limits: { memoryBytes: 512 * 1024 * 1024, nanoCpus: 1e9, pids: 256 },
      });
      expect(await g.socketFor('demo~fix-1')).toBe(join(fx.home, 'run', 'demo~fix-1', 'backend.sock'));
      expect(branches(join(fx.home, 'repos', 'demo'))).toContain('grove/fix-1');
    });

    it('answers 422 naming the rule, 404 for an unknown project, 409 for a live slug', async () => {
      const g = await withProject();
      for (const [name, rule] of [
        ['../x', 'only a-z'],
        ['Up', 'lowercase'],
        ['default', 'reserved'],
        ['x'.repeat(40), 'at most 39'],
        ['kаt', 'ASCII'],
        ['a~b', 'only a-z'],
      ] as const) {
        await expect(g.fork({ project: 'demo', name })).rejects.toMatchObject({ code: 'invalid_name', status: 422, message: expect.stringContaining(rule) as string });
      }
      await expect(g.fork({ project: 'demo', name: 'ok', from: '--help' })).rejects.toMatchObject({ code: 'invalid_input' });
      await expect(g.fork({ project: 'nope', name: 'ok' })).rejects.toMatchObject({ code: 'project_not_found', status: 404 });
      await g.fork({ project: 'demo', name: 'dup' });
      await expect(g.fork({ project: 'demo', name: 'dup' })).rejects.toMatchObject({ code: 'workspace_exists', status: 409 });
      const { workspaces: rows } = await g.list({ includeGone: true });
      expect(rows.map((w) => w.slug)).toEqual(['demo~dup']);
    });

    it('refuses a slug whose backend socket path would exceed the Unix socket limit', async () => {
      const g = await open();
      const long = 'p'.repeat(39);
      await g.addProject({ name: long, source: fx.source, createDefault: false });
      const name = 'n'.repeat(39);
      expect(Buffer.byteLength(join(fx.home, 'run', `${long}~${name}`, 'backend.sock'))).toBeGreaterThan(107);
      await expect(g.fork({ project: long, name })).rejects.toMatchObject({ code: 'invalid_name', message: expect.stringContaining('107-byte limit') as string });
      expect((await g.list({ includeGone: true })).workspaces).toEqual([]);
      // A short name in the same project is fine.
      expect((await g.fork({ project: long, name: 'ok' })).state).toBe('running');
    });

    it('forks from another base', async () => {
      const g = await withProject();
      const ws = await g.fork({ project: 'demo', name: 'feat', from: 'feature' });
      expect(ws.baseRef).toBe('feature');
      expect(existsSync(join(fx.home, 'worktrees', 'demo', 'feat', 'feature.txt'))).toBe(true);
    });

    it('caps running + creating: concurrent forks beyond the cap get 429 and leave nothing behind', async () => {
      const g = await withProject({ maxRunning: 2 });
      const results = await Promise.allSettled(['a', 'b', 'c', 'd', 'e'].map((name) => g.fork({ project: 'demo', name })));
      const ok = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(ok).toHaveLength(2);
      expect(refused).toHaveLength(3);
      for (const r of refused) expect(r.reason).toMatchObject({ code: 'capacity_reached', status: 429, details: { running: expect.any(Number) as number, cap: 2 } });
      expect(await g.capacity()).toEqual({ running: 2, creating: 0, cap: 2, queued: 0 });
      expect((await g.list({ includeGone: true })).workspaces).toHaveLength(2);
      expect(ls(join(fx.home, 'worktrees', 'demo'))).toHaveLength(2);
      expect(fx.driver.containers.size).toBe(2);

      // Stop frees a slot; start needs one again.
      const [first] = (await g.list()).workspaces;
      await g.stop(first?.slug ?? '');
      expect(await g.capacity()).toEqual({ running: 1, creating: 0, cap: 2, queued: 0 });
      await g.fork({ project: 'demo', name: 'f' });
      await expect(g.start(first?.slug ?? '')).rejects.toMatchObject({ code: 'capacity_reached', details: { running: 2, cap: 2 } });
      expect((await g.get(first?.slug ?? '')).state).toBe('stopped');
    });

    it('bad base ref: spawn_failed at the worktree step, row failed, nothing left', async () => {
      const g = await withProject();
      const err = await g.fork({ project: 'demo', name: 'x', from: 'no-such-branch' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'spawn_failed', status: 500, message: expect.stringContaining('"no-such-branch" is not a branch') as string, details: { step: 'worktree' } });
      expect(await g.get('demo~x')).toMatchObject({ state: 'failed', failureReason: expect.stringContaining('no-such-branch') as string });
      const events = await g.events({ slug: 'demo~x' });
      expect(events.map((e) => e.type)).toEqual(['workspace.reserved', 'spawn_failed']);
      expect(events[1]?.data).toMatchObject({ step: 'worktree', op: 'fork' });
      expect(ls(join(fx.home, 'worktrees', 'demo'))).toEqual([]);
      expect(branches(join(fx.home, 'repos', 'demo'))).not.toContain('grove/x');
      expect(fx.driver.containers.size).toBe(0);
      expect(await g.capacity()).toMatchObject({ running: 0, creating: 0 });
    });

    it('missing image: spawn_failed at the image step with a hint, everything undone (branch deleted: no commits)', async () => {
      const g = await withProject({ image: 'grove-sandbox:missing' });
      await expect(g.fork({ project: 'demo', name: 'x' })).rejects.toMatchObject({ code: 'spawn_failed', details: { step: 'image' }, message: expect.stringContaining('setup.sh') as string });
      expect(ls(join(fx.home, 'worktrees', 'demo'))).toEqual([]);
      expect(ls(join(fx.home, 'repos', 'demo', 'worktrees'))).toEqual([]);
      expect(branches(join(fx.home, 'repos', 'demo'))).not.toContain('grove/x');
      expect(ls(join(fx.home, 'run'))).toEqual([]);
      expect(ls(join(fx.home, 'threads'))).toEqual([]);
      expect(ls(join(fx.home, 'state'))).toEqual([]);
      // The slug is free again: a retry with a working image succeeds on the plain branch name.
      fx.driver.behave.images.add('grove-sandbox:missing');
      expect((await g.fork({ project: 'demo', name: 'x' })).branch).toBe('grove/x');
      expect((await g.list({ includeGone: true })).workspaces.map((w) => w.state)).toEqual(['failed', 'running']);
      expect((await g.list()).workspaces.map((w) => w.state)).toEqual(['running']);
    });

    it('a backend that exits fails fast with its exit code and last output', async () => {
      const g = await withProject({ healthTimeoutMs: 20_000 });
      fx.driver.behave.crashWith = 3;
      const t0 = Date.now();
      const err = await g.fork({ project: 'demo', name: 'x' }).catch((e: unknown) => e);
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(err).toMatchObject({ code: 'spawn_failed', details: { step: 'health' } });
      expect((err as Error).message).toMatch(/exited with code 3/);
      expect((err as Error).message).toContain('GROVE_PROVIDER is not valid');
      expect(fx.driver.containers.size).toBe(0);
      expect(ls(join(fx.home, 'worktrees', 'demo'))).toEqual([]);
    });

    it('a backend that never answers times out after healthTimeoutMs and is undone', async () => {
      const g = await withProject({ healthTimeoutMs: 400 });
      fx.driver.behave.listen = false;
      const err = await g.fork({ project: 'demo', name: 'x' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'spawn_failed', details: { step: 'health' } });
      expect((err as Error).message).toMatch(/did not answer \/health within 400 ms/);
      expect(fx.driver.containers.size).toBe(0);
      const spawnFailed = (await g.events({ slug: 'demo~x' })).find((e) => e.type === 'spawn_failed');
      expect(spawnFailed?.data).toMatchObject({ step: 'health', reason: expect.stringContaining('400 ms') as string });
    });

    it('a fork that fails keeps its branch when it already holds commits', async () => {
      const g = await withProject({ healthTimeoutMs: 1_500 });
      fx.driver.behave.listen = false;
      // Commit on the new branch from "inside" while the fork waits for health.
      const pending = g.fork({ project: 'demo', name: 'x' }).catch((e: unknown) => e);
      const wt = join(fx.home, 'worktrees', 'demo', 'x');
      await until(async () => (await eventTypes(g, 'demo~x')).includes('sandbox.started'));
      writeFileSync(join(wt, 'work.txt'), 'work');
      gitInWorktree(wt, 'add', '.');
      gitInWorktree(wt, 'commit', '-q', '-m', 'work');
      expect(await pending).toMatchObject({ code: 'spawn_failed' });
      expect(branches(join(fx.home, 'repos', 'demo'))).toContain('grove/x');
      expect(existsSync(wt)).toBe(false);
    });

    it('docker down: 503 docker_unavailable and nothing reserved', async () => {
      const g = await withProject();
      fx.driver.behave.down = true;
      await expect(g.fork({ project: 'demo', name: 'x' })).rejects.toMatchObject({ code: 'docker_unavailable', status: 503 });
      expect((await g.list({ includeGone: true })).workspaces).toEqual([]);
      expect(await g.capacity()).toMatchObject({ running: 0, creating: 0 });
      expect(await g.events({ slug: 'demo~x' })).toEqual([]);
    });

    it('wait=false returns the reservation and finishes in the background', async () => {
      const g = await withProject();
      fx.driver.behave.listenDelayMs = 300;
      const ws = await g.fork({ project: 'demo', name: 'bg' }, { wait: false });
      expect(ws.state).toBe('creating');
      expect(await g.capacity()).toMatchObject({ creating: 1 });
      await expect(g.socketFor('demo~bg')).rejects.toMatchObject({ code: 'workspace_stopped', details: { state: 'creating' } });
      await until(async () => (await g.get('demo~bg')).state === 'running');
      expect(await g.capacity()).toMatchObject({ running: 1, creating: 0 });
    });

    it('wait=false failures land in the row and the events', async () => {
      const g = await withProject();
      const ws = await g.fork({ project: 'demo', name: 'bg', from: 'nope' }, { wait: false });
      expect(ws.state).toBe('creating');
      // The row turns failed before spawn_failed is stored: wait for the event, the last of the two.
      await until(async () => (await eventTypes(g, 'demo~bg')).includes('spawn_failed'));
      expect(await g.get('demo~bg')).toMatchObject({ state: 'failed', failureReason: expect.stringContaining('nope') as string });
    });
  });

  describe('stop / start / teardown', () => {
    it('stop keeps everything and frees the slot; start reopens the same worktree, thread and session', async () => {
      const g = await withProject();
      await g.fork({ project: 'demo', name: 'w' });
      const wt = join(fx.home, 'worktrees', 'demo', 'w');
      writeFileSync(join(wt, 'scratch.txt'), 'keep me');
      writeFileSync(join(fx.home, 'threads', 'demo~w', 'thread.jsonl'), '{"seq":0}\n');
      fx.driver.behave.agentSessionId = 'sess-123';

      const stopped = await g.stop('demo~w');
      expect(stopped).toMatchObject({ state: 'stopped', agentSessionId: 'sess-123' });
      expect(fx.driver.containers.get('demo~w')?.running).toBe(false);
      expect(await g.capacity()).toMatchObject({ running: 0 });
      const err = await g.socketFor('demo~w').catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'workspace_stopped', status: 409, details: { slug: 'demo~w', state: 'stopped' } });
      expect((err as Error).message).toContain('POST /api/workspaces/demo~w/start');
      expect((err as Error).message).toContain('grove start demo~w');
      expect(await g.stop('demo~w')).toMatchObject({ state: 'stopped' }); // idempotent

      const started = await g.start('demo~w');
      expect(started).toMatchObject({ state: 'running', agentSessionId: 'sess-123', branch: 'grove/w' });
      expect(fx.driver.containers.get('demo~w')?.id).toBe('fake-1'); // same container, restarted
      expect(existsSync(join(wt, 'scratch.txt'))).toBe(true);
      expect(existsSync(join(fx.home, 'threads', 'demo~w', 'thread.jsonl'))).toBe(true);
      expect(await eventTypes(g, 'demo~w')).toEqual([
        'workspace.reserved',
        'workspace.prepared',
        'sandbox.started',
        'workspace.registered',
        'workspace.stopped',
        'workspace.reserved',
        'sandbox.started',
        'workspace.started',
      ]);
      expect(await g.start('demo~w')).toMatchObject({ state: 'running' }); // idempotent
    });

    it('a failed start leaves the workspace stopped with the reason', async () => {
      const g = await withProject({ healthTimeoutMs: 300 });
      await g.fork({ project: 'demo', name: 'w' });
      await g.stop('demo~w');
      fx.driver.behave.listen = false;
      await expect(g.start('demo~w')).rejects.toMatchObject({ code: 'spawn_failed', details: { step: 'health' } });
      expect(await g.get('demo~w')).toMatchObject({ state: 'stopped', failureReason: expect.stringContaining('/health') as string });
      expect(existsSync(join(fx.home, 'worktrees', 'demo', 'w'))).toBe(true);
      expect(await g.capacity()).toMatchObject({ running: 0, creating: 0 });
      fx.driver.behave.listen = true;
      expect(await g.start('demo~w')).toMatchObject({ state: 'running', failureReason: null });
    });

    it('teardown removes container and worktree, archives thread and state, keeps the branch; idempotent', async () => {
      const g = await withProject();
      await g.fork({ project: 'demo', name: 'w' });
      writeFileSync(join(fx.home, 'threads', 'demo~w', 'thread.jsonl'), '{"seq":0}\n');
      writeFileSync(join(fx.home, 'state', 'demo~w', 'session'), 'x');
      const gone = await g.teardown('demo~w');
      expect(gone.state).toBe('gone');
      expect(fx.driver.containers.has('demo~w')).toBe(false);
      expect(existsSync(join(fx.home, 'worktrees', 'demo', 'w'))).toBe(false);
      expect(ls(join(fx.home, 'repos', 'demo', 'worktrees'))).toEqual([]);
      expect(existsSync(join(fx.home, 'run', 'demo~w'))).toBe(false);
      expect(existsSync(join(fx.home, 'threads', 'demo~w'))).toBe(false);
      const archives = ls(join(fx.home, 'archive'));
      expect(archives).toHaveLength(1);
      expect(archives[0]).toMatch(/^demo~w-\d{8}T\d{9}Z$/);
      expect(existsSync(join(fx.home, 'archive', archives[0] ?? '', 'thread', 'thread.jsonl'))).toBe(true);
      expect(existsSync(join(fx.home, 'archive', archives[0] ?? '', 'state', 'session'))).toBe(true);
      expect(branches(join(fx.home, 'repos', 'demo'))).toContain('grove/w');
      const cleaned = (await g.events({ slug: 'demo~w' })).find((e) => e.type === 'workspace.cleaned');
      expect(cleaned?.data).toMatchObject({ branch: 'grove/w', archive: archives[0] });

      expect(await g.teardown('demo~w')).toMatchObject({ state: 'gone' });
      await expect(g.socketFor('demo~w')).rejects.toMatchObject({ code: 'workspace_not_found', status: 404 });
      expect((await g.list()).workspaces).toEqual([]);
      expect((await g.list({ includeGone: true })).workspaces.map((w) => w.state)).toEqual(['gone']);

      // The kept branch means a new fork of the same name gets a nonce.
      const again = await g.fork({ project: 'demo', name: 'w' });
      expect(again.branch).toMatch(/^grove\/w-[0-9a-f]{4}$/);
    });

    it('teardown of a stopped and of a failed workspace', async () => {
      const g = await withProject();
      await g.fork({ project: 'demo', name: 's' });
      await g.stop('demo~s');
      expect((await g.teardown('demo~s')).state).toBe('gone');
      await g.fork({ project: 'demo', name: 'f', from: 'nope' }).catch(() => undefined);
      expect((await g.teardown('demo~f')).state).toBe('gone');
      expect((await g.list()).workspaces).toEqual([]);
      await expect(g.teardown('demo~never')).rejects.toMatchObject({ code: 'workspace_not_found' });
    });

    it('teardown while a fork is still creating cancels it and ends gone with nothing left', async () => {
      const g = await withProject({ healthTimeoutMs: 10_000 });
      fx.driver.behave.listen = false;
      await g.fork({ project: 'demo', name: 'half' }, { wait: false });
      await until(async () => (await eventTypes(g, 'demo~half')).includes('sandbox.started'));
      const t0 = Date.now();
      expect((await g.teardown('demo~half')).state).toBe('gone');
      expect(Date.now() - t0).toBeLessThan(3_000);
      expect(fx.driver.containers.size).toBe(0);
      expect(ls(join(fx.home, 'worktrees', 'demo'))).toEqual([]);
      const types = await eventTypes(g, 'demo~half');
      expect(types).toContain('spawn_failed');
      expect(types.at(-1)).toBe('workspace.cleaned');
      expect(await g.capacity()).toMatchObject({ running: 0, creating: 0 });
    });

    it('stop and start refuse a workspace in the wrong state', async () => {
      const g = await withProject();
      fx.driver.behave.listenDelayMs = 500;
      await g.fork({ project: 'demo', name: 'c' }, { wait: false });
      await expect(g.stop('demo~c')).rejects.toMatchObject({ code: 'invalid_state' });
      await expect(g.start('demo~c')).rejects.toMatchObject({ code: 'invalid_state' });
      await expect(g.stop('demo~none')).rejects.toMatchObject({ code: 'workspace_not_found' });
      await until(async () => (await g.get('demo~c')).state === 'running');
    });

    it('socketFor marks activity at most once per few seconds', async () => {
      const g = await withProject();
      await g.fork({ project: 'demo', name: 'a' });
      const first = (await g.get('demo~a')).lastActivityAt;
      await new Promise((r) => setTimeout(r, 5));
      await g.socketFor('demo~a');
      // The activity write is not awaited by the request (by design), so wait for it to land.
      await until(async () => (await g.get('demo~a')).lastActivityAt !== first);
      const touched = (await g.get('demo~a')).lastActivityAt;
      await new Promise((r) => setTimeout(r, 5));
      for (let i = 0; i < 50; i++) await g.socketFor('demo~a');
      // Any write these calls had started would have landed by now (see the wait above).
      await new Promise((r) => setTimeout(r, 100));
      expect((await g.get('demo~a')).lastActivityAt).toBe(touched);
    });
  });

  describe('a sandbox that dies on its own', () => {
    it('is marked stopped with the reason at once, frees its slot, and reopens', async () => {
      const g = await withProject({ maxRunning: 1 });
      await g.reconcile(); // starts following sandbox events
      await g.fork({ project: 'demo', name: 'a' });
      await fx.driver.kill('demo~a', 137);
      // The row turns stopped before sandbox.died is stored: wait for the event, the last of the two.
      await until(async () => (await eventTypes(g, 'demo~a')).includes('sandbox.died'));
      expect(await g.get('demo~a')).toMatchObject({ state: 'stopped', failureReason: 'the sandbox stopped unexpectedly: it exited with code 137' });
      expect((await g.list()).capacity).toMatchObject({ running: 0, cap: 1 });
      await g.start('demo~a');
      expect(await g.get('demo~a')).toMatchObject({ state: 'running', failureReason: null });
    });

    it('leaves a workspace Grove stopped itself alone', async () => {
      const g = await withProject();
      await g.reconcile();
      await g.fork({ project: 'demo', name: 'b' });
      await g.stop('demo~b');
      await fx.driver.kill('demo~b', 0); // a late death notice for the stop
      await new Promise((r) => setTimeout(r, 50));
      expect(await g.get('demo~b')).toMatchObject({ state: 'stopped', failureReason: null });
      expect(await eventTypes(g, 'demo~b')).not.toContain('sandbox.died');
    });
  });

  describe('reconcile', () => {
    it('repairs rows, containers, worktrees and locks after a crash', async () => {
      const g1 = await withProject({ maxRunning: 8 });
      await g1.fork({ project: 'demo', name: 'alive' });
      await g1.fork({ project: 'demo', name: 'vanished' });
      await g1.fork({ project: 'demo', name: 'dead' });
      await g1.fork({ project: 'demo', name: 'halfgone' });
      await g1.close();
      fx.groves.splice(0);

      // What a crash leaves behind, written by hand:
      const repo = join(fx.home, 'repos', 'demo');
      const now = new Date().toISOString();
      // - a teardown interrupted mid-way, and a fork interrupted mid-way: row creating, worktree added, container up
      await writeRegistry({
        setState: { slug: 'demo~halfgone', state: 'tearing-down' },
        insert: [{ slug: 'demo~crashed', project: 'demo', name: 'crashed', branch: 'grove/crashed', baseRef: 'main', state: 'creating', createdAt: now, updatedAt: now }],
      });
      const base = (await resolveCommit(repo, 'main')) ?? '';
      await ensureWorktree(repo, { path: join(fx.home, 'worktrees', 'demo', 'crashed'), branch: 'grove/crashed', base });
      mkdirSync(join(fx.home, 'run', 'demo~crashed'), { recursive: true });
      await fx.driver.ensure({ ...(fx.driver.containers.get('demo~alive')?.spec ?? ({} as never)), slug: 'demo~crashed', runDir: join(fx.home, 'run', 'demo~crashed'), sandboxGitDir: join(fx.home, 'sandbox-git', 'demo~crashed') });
      // - a container whose workspace the registry no longer knows
      mkdirSync(join(fx.tmp, 'orphan-run'));
      await fx.driver.ensure({ ...(fx.driver.containers.get('demo~alive')?.spec ?? ({} as never)), slug: 'demo~orphan', runDir: join(fx.tmp, 'orphan-run') });
      // - containers that died or disappeared while we were down
      await fx.driver.kill('demo~dead', 137);
      await fx.driver.remove('demo~vanished');
      // - a worktree no row owns, and a lock held by a dead process
      await ensureWorktree(repo, { path: join(fx.home, 'worktrees', 'demo', 'stray'), branch: 'grove/stray', base });
      const { spawn } = await import('node:child_process');
      const c = spawn(process.execPath, ['-e', '']);
      await new Promise((r) => c.on('exit', r));
      writeFileSync(join(fx.home, 'locks', 'demo.lock'), JSON.stringify({ pid: c.pid, at: now }));

      const g2 = await open({ gitLockTimeoutMs: 500, maxRunning: 8 });
      await g2.reconcile();

      expect(existsSync(join(fx.home, 'locks', 'demo.lock'))).toBe(false);
      const states = Object.fromEntries((await g2.list({ includeGone: true })).workspaces.map((w) => [w.slug, w.state]));
      expect(states).toEqual({ 'demo~alive': 'running', 'demo~vanished': 'stopped', 'demo~dead': 'stopped', 'demo~halfgone': 'gone', 'demo~crashed': 'failed' });
      expect(await g2.get('demo~crashed')).toMatchObject({ failureReason: 'interrupted by a server restart' });
      // What the cards say about the two that stopped while Grove was down.
      expect(await g2.get('demo~vanished')).toMatchObject({ failureReason: 'the sandbox was gone when Grove started (Docker or the machine restarted, or it was removed)' });
      expect(await g2.get('demo~dead')).toMatchObject({ failureReason: 'the sandbox had stopped when Grove started: it exited with code 137' });
      expect([...fx.driver.containers.keys()].sort()).toEqual(['demo~alive', 'demo~dead']);
      expect(ls(join(fx.home, 'worktrees', 'demo')).sort()).toEqual(['alive', 'dead', 'vanished']);
      expect(branches(repo)).not.toContain('grove/crashed');
      expect(branches(repo)).toContain('grove/stray'); // worktree removed, branch (maybe work) kept
      expect(existsSync(join(fx.home, 'run', 'demo~crashed'))).toBe(false);
      const reconciled = (await g2.events({ limit: 1000 })).filter((e) => e.type === 'workspace.reconciled');
      expect(reconciled.map((e) => `${e.slug}:${String(e.data.action ?? e.data.to)}`).sort()).toEqual([
        'demo~crashed:failed',
        'demo~dead:stopped',
        'demo~halfgone:gone',
        'demo~orphan:removed-orphan-container',
        'demo~stray:removed-orphan-worktree',
        'demo~vanished:stopped',
      ]);
      // Reconciling again finds nothing to do.
      const count = (await g2.events({ limit: 1000 })).length;
      await g2.reconcile();
      expect((await g2.events({ limit: 1000 })).length).toBe(count);
      // The crashed slug is free again.
      expect((await g2.fork({ project: 'demo', name: 'crashed' })).state).toBe('running');
    });
  });

  describe('reconcile of stopped workspaces', () => {
    it('finishes a stop cut short (row stopped, sandbox running) and leaves the other stopped ones alone', async () => {
      const g1 = await withProject({ maxRunning: 8 });
      await g1.fork({ project: 'demo', name: 'cut' });
      await g1.fork({ project: 'demo', name: 'quiet' });
      await g1.stop('demo~quiet');
      await g1.close();
      fx.groves.splice(0);
      // What a stop killed between marking the row and stopping the sandbox leaves behind.
      await writeRegistry({ setState: { slug: 'demo~cut', state: 'stopped' } });
      expect(fx.driver.containers.get('demo~cut')?.running).toBe(true);

      const g2 = await open({ maxRunning: 8 });
      await g2.reconcile();
      expect(fx.driver.containers.get('demo~cut')?.running).toBe(false);
      const reconciled = (await g2.events({ limit: 1000 })).filter((e) => e.type === 'workspace.reconciled');
      expect(reconciled.map((e) => `${e.slug}: ${String(e.data.reason)}`)).toEqual(['demo~cut: container was still running']);
      expect(await g2.get('demo~cut')).toMatchObject({ state: 'stopped' });
      expect(await g2.get('demo~quiet')).toMatchObject({ state: 'stopped' });
      expect((await g2.start('demo~cut')).state).toBe('running');
    });
  });

  describe('saved work (teardown never loses work)', () => {
    const repo = (): string => join(fx.home, 'repos', 'demo');
    /** A workspace's private object store (saved work, snapshots). */
    const store = (slug: string): string => join(fx.home, 'objects', `${slug}.git`);

    /** Modified, staged, untracked, ignored and deleted files in a worktree; returns what must come back. */
    function dirty(wt: string): Record<string, Buffer | null> {
      writeFileSync(join(wt, 'README.md'), '# edited\n');
      writeFileSync(join(wt, 'staged.txt'), 'staged\n');
      gitInWorktree(wt, 'add', 'staged.txt');
      mkdirSync(join(wt, 'src'), { recursive: true });
      writeFileSync(join(wt, 'src', 'new.bin'), Buffer.from([0, 159, 146, 150, 255]));
      writeFileSync(join(wt, '.gitignore'), 'build/\n');
      mkdirSync(join(wt, 'build'));
      writeFileSync(join(wt, 'build', 'out.js'), 'ignored');
      rmSync(join(wt, 'app.txt'));
      return {
        'README.md': Buffer.from('# edited\n'),
        'staged.txt': Buffer.from('staged\n'),
        'src/new.bin': Buffer.from([0, 159, 146, 150, 255]),
        '.gitignore': Buffer.from('build/\n'),
        'build/out.js': null,
        'app.txt': null,
      };
    }

    function expectFiles(wt: string, files: Record<string, Buffer | null>): void {
      for (const [f, content] of Object.entries(files)) {
        if (content === null) expect(existsSync(join(wt, f)), f).toBe(false);
        else expect(readFileSync(join(wt, f)).equals(content), f).toBe(true);
      }
    }

    it('teardown saves uncommitted, staged and untracked files to a recovery ref; restore brings them back byte for byte', async () => {
      const g = await withProject();
      const ws = await g.fork({ project: 'demo', name: 'w' });
      const tip = git(repo(), 'rev-parse', 'refs/heads/grove/w');
      const files = dirty(join(fx.home, 'worktrees', 'demo', 'w'));
      await g.teardown('demo~w');

      const events = await g.events({ slug: 'demo~w' });
      const saved = events.find((e) => e.type === 'workspace.saved');
      expect(saved?.data).toMatchObject({ reason: 'teardown', ref: 'refs/grove/demo+w/teardown/1', reused: false });
      expect(events.find((e) => e.type === 'workspace.cleaned')?.data.recoveryRef).toBe('refs/grove/demo+w/teardown/1');
      // Saved before the worktree was removed; the branch did not move.
      expect(events.findIndex((e) => e.type === 'workspace.saved')).toBeLessThan(events.findIndex((e) => e.type === 'workspace.cleaned'));
      expect(git(repo(), 'rev-parse', 'refs/heads/grove/w')).toBe(tip);
      expect(ws.branch).toBe('grove/w');
      expect(await g.savedWork('demo~w')).toEqual([{ ref: 'refs/grove/demo+w/teardown/1', n: 1, commit: saved?.data.commit }]);

      const back = await g.restore('demo~w', { name: 'w-back' });
      // The saved commit is copied from the workspace's private store into the primary, where the new branch starts.
      expect(back).toMatchObject({ slug: 'demo~w-back', state: 'running', baseRef: 'refs/grove-restore/demo/w/1', branch: 'grove/w-back' });
      expect(git(repo(), 'rev-parse', 'refs/grove-restore/demo/w/1')).toBe(saved?.data.commit);
      expectFiles(join(fx.home, 'worktrees', 'demo', 'w-back'), files);
      // The new branch starts at the saved commit, whose parent is the old branch's tip: history is kept.
      expect(git(repo(), 'rev-parse', 'refs/heads/grove/w-back^')).toBe(tip);
    });

    it('a clean teardown saves nothing; restore explains what is missing', async () => {
      const g = await withProject();
      await g.fork({ project: 'demo', name: 'clean' });
      await g.teardown('demo~clean');
      const types = await eventTypes(g, 'demo~clean');
      expect(types).not.toContain('workspace.saved');
      expect((await g.events({ slug: 'demo~clean' })).find((e) => e.type === 'workspace.cleaned')?.data.recoveryRef).toBeNull();
      await expect(g.restore('demo~clean', { name: 'x' })).rejects.toMatchObject({ code: 'not_found', status: 404 });
      await expect(g.restore('demo~clean', { name: 'Bad' })).rejects.toMatchObject({ code: 'invalid_name' });
      await expect(g.restore('nope~clean', { name: 'x' })).rejects.toMatchObject({ code: 'project_not_found' });
    });

    it('a crash between saving and removing loses nothing: reconcile finishes the teardown and reuses the same ref', async () => {
      const g1 = await withProject();
      await g1.fork({ project: 'demo', name: 'crash' });
      const wt = join(fx.home, 'worktrees', 'demo', 'crash');
      const files = dirty(wt);
      const realRemove = fx.driver.remove.bind(fx.driver);
      fx.driver.remove = async () => {
        throw new Error('killed right after the work was saved');
      };
      await expect(g1.teardown('demo~crash')).rejects.toThrow(/killed/);
      fx.driver.remove = realRemove;
      expect((await g1.get('demo~crash')).state).toBe('tearing-down');
      expect(existsSync(wt)).toBe(true);
      expect(git(store('demo~crash'), 'for-each-ref', '--format=%(refname)', 'refs/grove/')).toBe('refs/grove/demo+crash/teardown/1');
      await g1.close();
      fx.groves.splice(0);

      const g2 = await open();
      await g2.reconcile();
      expect((await g2.get('demo~crash')).state).toBe('gone');
      expect(existsSync(wt)).toBe(false);
      expect(git(store('demo~crash'), 'for-each-ref', '--format=%(refname)', 'refs/grove/')).toBe('refs/grove/demo+crash/teardown/1');
      const saves = (await g2.events({ slug: 'demo~crash' })).filter((e) => e.type === 'workspace.saved');
      expect(saves.map((e) => e.data.reused)).toEqual([false, true]);
      await g2.restore('demo~crash', { name: 'crash-back' });
      expectFiles(join(fx.home, 'worktrees', 'demo', 'crash-back'), files);
    });

    it('reconcile saves the work of an orphan worktree before removing it', async () => {
      const g1 = await withProject();
      await g1.close();
      fx.groves.splice(0);
      const base = (await resolveCommit(repo(), 'main')) ?? '';
      const wt = join(fx.home, 'worktrees', 'demo', 'stray');
      await ensureWorktree(repo(), { path: wt, branch: 'grove/stray', base });
      writeFileSync(join(wt, 'left.txt'), 'left behind');
      const g2 = await open();
      await g2.reconcile();
      expect(existsSync(wt)).toBe(false);
      expect(git(store('demo~stray'), 'show', 'refs/grove/demo+stray/teardown/1:left.txt')).toBe('left behind');
      expect(git(store('demo~stray'), 'rev-parse', 'refs/grove/demo+stray/teardown/1^')).toBe(base);
    });

    it('an interrupted fork rolls back its branch only when it holds no commits beyond its base', async () => {
      const g1 = await withProject({ maxRunning: 8 });
      await g1.close();
      fx.groves.splice(0);
      const base = (await resolveCommit(repo(), 'main')) ?? '';
      const now = new Date().toISOString();
      await writeRegistry({
        insert: ['empty', 'worked'].map((name) => ({ slug: `demo~${name}`, project: 'demo', name, branch: `grove/${name}`, baseRef: 'main', state: 'creating' as const, createdAt: now, updatedAt: now })),
      });
      await ensureWorktree(repo(), { path: join(fx.home, 'worktrees', 'demo', 'empty'), branch: 'grove/empty', base });
      const worked = join(fx.home, 'worktrees', 'demo', 'worked');
      await ensureWorktree(repo(), { path: worked, branch: 'grove/worked', base });
      writeFileSync(join(worked, 'commit.txt'), 'committed');
      git(worked, 'add', '.');
      git(worked, 'commit', '-q', '-m', 'unpushed work');
      const g2 = await open({ maxRunning: 8 });
      await g2.reconcile();
      expect(branches(repo())).not.toContain('grove/empty');
      expect(branches(repo())).toContain('grove/worked');
      expect(git(repo(), 'show', 'grove/worked:commit.txt')).toBe('committed');
    });
  });
});

describe('project config', () => {
  it('PATCH changes only the keys given, null removes one, and defaults are never written to the file', async () => {
    const g = await withProject();
    const file = join(fx.home, 'config', 'demo.json');
    const stored = () => JSON.parse(readFileSync(file, 'utf8')) as unknown;
    await g.setProjectConfig('demo', { git: { authorName: 'Ada' }, allowedPaths: ['src/**'] });
    expect(stored()).toEqual({ git: { authorName: 'Ada' }, allowedPaths: ['src/**'] });

    const patched = await g.patchProjectConfig('demo', { keepCheckoutOnClose: true, allowedPaths: null });
    // Read back with the defaults applied…
    expect(patched).toMatchObject({ keepCheckoutOnClose: true, git: { authorName: 'Ada', checkpointAfterTurn: true } });
    expect(patched.allowedPaths).toBeUndefined();
    // …but stored as chosen.
    expect(stored()).toEqual({ git: { authorName: 'Ada' }, keepCheckoutOnClose: true });

    // Two changes of different keys at once: both land (read and written under the project's lock).
    await Promise.all([g.patchProjectConfig('demo', { keepCheckoutOnClose: false }), g.patchProjectConfig('demo', { allowedPaths: ['docs/**'] })]);
    expect(stored()).toEqual({ git: { authorName: 'Ada' }, keepCheckoutOnClose: false, allowedPaths: ['docs/**'] });

    // Refused changes leave the file as it was.
    await expect(g.patchProjectConfig('demo', { nope: 1 } as never)).rejects.toMatchObject({ code: 'invalid_input' });
    await expect(g.patchProjectConfig('demo', { allowedPaths: [] })).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/allowedPaths needs at least one glob/) as string });
    await expect(g.patchProjectConfig('ghost', { keepCheckoutOnClose: true })).rejects.toMatchObject({ code: 'project_not_found' });
    expect(stored()).toEqual({ git: { authorName: 'Ada' }, keepCheckoutOnClose: false, allowedPaths: ['docs/**'] });
  });
});
