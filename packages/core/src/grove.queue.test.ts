// The line for a sandbox slot and idle auto-stop: real git repos, a real registry (SQLite, and the line again on
// PostgreSQL, where two servers share it) and real sockets, with the in-memory sandbox driver (the same flow against
// real Docker and a real server: e2e/queue.test.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { forkRequestSchema, workspaceSchema } from '@grove/contracts';
import type { GroveEvent, Workspace } from '@grove/contracts';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Grove } from './index.ts';
import { useGroveFixture } from './test-support/grove-fixture.ts';

/** Opens the fake engine's gate (hold) when a test failed with an operation waiting on it: close() would wait for it. */
let ungate: (() => void) | undefined;

// until() waits 10 s here, not 5: the conditions follow promotions and idle sweeps that run in the background.
const fx = useGroveFixture({
  tmpPrefix: 'grove-queue-',
  logLevel: process.env.GROVE_TEST_LOG,
  defaults: { maxRunning: 1, gitLockTimeoutMs: 5_000 },
  postgresDatabase: 'queue',
  untilMs: 10_000,
  beforeClose: () => {
    ungate?.();
    ungate = undefined;
  },
});
const { open, withProject, usePostgres, until } = fx;

/**
 * Make the fake engine's ensure (a fork held before its container) or stop (a stop or teardown held before the
 * container stops) wait until the returned function is called.
 */
function hold(step: 'ensureGate' | 'stopGate'): () => void {
  let go!: () => void;
  fx.driver.behave[step] = new Promise<void>((r) => (go = r));
  ungate = () => {
    fx.driver.behave[step] = undefined;
    go();
  };
  return ungate;
}

const queue = (name: string) => forkRequestSchema.parse({ project: 'demo', name, queue: true });
const state = async (g: Grove, slug: string): Promise<Workspace['state']> => (await g.get(slug)).state;
const positions = async (g: Grove): Promise<Record<string, number | null>> =>
  Object.fromEntries((await g.list()).workspaces.filter((w) => w.state === 'queued').map((w) => [w.name, w.queuePosition]));

describe.each(['sqlite', 'postgres'] as const)('queue (%s registry)', (dialect) => {
  beforeEach(async () => {
    if (dialect === 'postgres') await usePostgres();
  });

  it('cap 1: queued forks start one after another in order as slots free; a cancelled one never starts', async () => {
    const g = await withProject();
    const seen: GroveEvent[] = [];
    g.onEvent((e) => seen.push(e));
    await g.fork({ project: 'demo', name: 'a' });

    const queued = [await g.fork(queue('b')), await g.fork(queue('c')), await g.fork(queue('d'))];
    for (const w of queued) expect(workspaceSchema.parse(w)).toEqual(w);
    expect(queued.map((w) => [w.name, w.state, w.queuePosition])).toEqual([
      ['b', 'queued', 1],
      ['c', 'queued', 2],
      ['d', 'queued', 3],
    ]);
    expect(await g.capacity()).toEqual({ running: 1, creating: 0, cap: 1, queued: 3 });
    expect(seen.filter((e) => e.type === 'workspace.queued').map((e) => [e.slug, e.data.position])).toEqual([
      ['demo~b', 1],
      ['demo~c', 2],
      ['demo~d', 3],
    ]);
    // Nothing is made for a workspace in line.
    expect([...fx.driver.containers.keys()]).toEqual(['demo~a']);
    // A queued workspace holds its name; without queue the cap still answers 429, and says who waits.
    await expect(g.fork(queue('c'))).rejects.toMatchObject({ code: 'workspace_exists' });
    await expect(g.fork({ project: 'demo', name: 'e' })).rejects.toMatchObject({ code: 'capacity_reached', status: 429, details: { queued: 3, cap: 1 } });
    // Stop and proxy refuse with the reason.
    await expect(g.stop('demo~b')).rejects.toMatchObject({ code: 'invalid_state' });
    await expect(g.socketFor('demo~b')).rejects.toMatchObject({ code: 'workspace_stopped', message: expect.stringContaining('#1') as string });

    // Cancel c: it leaves the line, the others keep their order.
    expect(await g.teardown('demo~c')).toMatchObject({ state: 'gone', queuePosition: null });
    expect(await positions(g)).toEqual({ b: 1, d: 2 });

    await g.stop('demo~a');
    await until(async () => (await state(g, 'demo~b')) === 'running');
    expect(await positions(g)).toEqual({ d: 1 });
    expect(await state(g, 'demo~d')).toBe('queued');

    await g.teardown('demo~b');
    await until(async () => (await state(g, 'demo~d')) === 'running');
    expect(await g.capacity()).toEqual({ running: 1, creating: 0, cap: 1, queued: 0 });
    // The row turns running before its workspace.registered event is stored and handed to listeners.
    await until(async () => seen.some((e) => e.type === 'workspace.registered' && e.slug === 'demo~d'));

    const starts = seen.filter((e) => e.type === 'workspace.promoted' || e.type === 'workspace.registered').map((e) => `${e.type} ${e.slug}`);
    expect(starts).toEqual(['workspace.registered demo~a', 'workspace.promoted demo~b', 'workspace.registered demo~b', 'workspace.promoted demo~d', 'workspace.registered demo~d']);
    const c = (await g.events({ slug: 'demo~c' })).map((e) => e.type);
    expect(c).toEqual(['workspace.queued', 'workspace.cleaned']);
    expect(fx.driver.calls.filter((x) => x.includes('demo~c'))).toEqual([]);
  });

  it('never exceeds the cap nor starts one twice when slots free at the same time', async () => {
    const g = await withProject({ maxRunning: 2 });
    let most = 0;
    g.onEvent(() => {
      void g.capacity().then((c) => (most = Math.max(most, c.running + c.creating)));
    });
    await g.fork({ project: 'demo', name: 'a' });
    await g.fork({ project: 'demo', name: 'b' });
    for (const n of ['c', 'd', 'e']) await g.fork(queue(n));
    await Promise.all([g.stop('demo~a'), g.stop('demo~b')]);
    await until(async () => (await state(g, 'demo~c')) === 'running' && (await state(g, 'demo~d')) === 'running');
    expect(await state(g, 'demo~e')).toBe('queued');
    expect(most).toBe(2);
    const promoted = (await g.events({ limit: 1000 })).filter((e) => e.type === 'workspace.promoted').map((e) => e.slug);
    expect(promoted).toEqual(['demo~c', 'demo~d']);
  });

  it('a queued fork runs with the project config as it stands when promoted, not as it was when it joined the line', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'a' });
    await g.fork(queue('b'));
    expect(fx.driver.containers.get('demo~a')?.spec.env.GROVE_PROVIDER).toBe('scripted');
    await g.setProjectConfig('demo', { agent: { provider: 'claude' } });
    await g.stop('demo~a');
    await until(async () => (await state(g, 'demo~b')) === 'running');
    expect(fx.driver.containers.get('demo~b')?.spec.env.GROVE_PROVIDER).toBe('claude');
  });

  it('a stopped workspace can wait in line to reopen; stop leaves the line, teardown removes it as usual', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'a' });
    await g.stop('demo~a');
    await g.fork({ project: 'demo', name: 'b' });
    await expect(g.start('demo~a')).rejects.toMatchObject({ code: 'capacity_reached' });
    expect(await g.start('demo~a', { queue: true })).toMatchObject({ state: 'queued', queuePosition: 1 });
    await g.fork(queue('c'));
    expect(await positions(g)).toEqual({ a: 1, c: 2 });

    await g.stop('demo~b');
    await until(async () => (await state(g, 'demo~a')) === 'running');
    expect(await positions(g)).toEqual({ c: 1 });
    // The row turns running before workspace.started is stored.
    await until(async () => (await g.events({ slug: 'demo~a' })).some((e) => e.type === 'workspace.started'));
    const types = (await g.events({ slug: 'demo~a' })).map((e) => e.type);
    expect(types.slice(types.indexOf('workspace.queued'))).toEqual(['workspace.queued', 'workspace.promoted', 'workspace.reserved', 'sandbox.started', 'workspace.started']);

    // b waits to reopen, then is stopped again: it leaves the line and stays stopped.
    expect(await g.start('demo~b', { queue: true })).toMatchObject({ state: 'queued', queuePosition: 2 });
    expect(await g.stop('demo~b')).toMatchObject({ state: 'stopped', queuePosition: null });
    expect(await positions(g)).toEqual({ c: 1 });
    // A queued reopen torn down goes like any stopped workspace: its worktree is removed, its branch kept.
    await g.start('demo~b', { queue: true });
    expect(await g.teardown('demo~b')).toMatchObject({ state: 'gone' });
    expect(existsSync(join(fx.home, 'worktrees', 'demo', 'b'))).toBe(false);
    expect(await positions(g)).toEqual({ c: 1 });
    expect(await state(g, 'demo~c')).toBe('queued');
  });

  it('a fork with queue: true takes a free slot at once when nobody waits', async () => {
    const g = await withProject({ maxRunning: 2 });
    expect(await g.fork(queue('a'))).toMatchObject({ state: 'running', queuePosition: null });
  });

  it("a project's default is begun on first ask, in line at the cap, once however many ask at the same time", async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'a' });
    // Two first messages at once (two tabs): one default, both told about it.
    const asked = await Promise.all([g.ensureDefault('demo'), g.ensureDefault('demo')]);
    expect(asked.map((a) => a.created).sort()).toEqual([false, true]);
    expect(asked.map((a) => [a.workspace.slug, a.workspace.isDefault, a.workspace.state, a.workspace.queuePosition])).toEqual([
      ['demo', true, 'queued', 1],
      ['demo', true, 'queued', 1],
    ]);
    expect((await g.list()).workspaces.filter((w) => w.isDefault)).toHaveLength(1);
    await g.stop('demo~a');
    await until(async () => (await state(g, 'demo')) === 'running');
    expect(await g.get('demo')).toMatchObject({ branch: 'grove/default', baseRef: 'main' });
    // Asked again: the live one as it is, stopped included (reopening is the caller's: it may wait in line).
    expect(await g.ensureDefault('demo')).toMatchObject({ created: false, workspace: { slug: 'demo', state: 'running' } });
    await g.stop('demo');
    expect(await g.ensureDefault('demo')).toMatchObject({ created: false, workspace: { state: 'stopped' } });
    // Torn down, a default is begun afresh on the same branch; a free slot starts it at once.
    await g.teardown('demo');
    expect(await g.ensureDefault('demo')).toMatchObject({ created: true, workspace: { slug: 'demo', state: 'creating' } });
    await until(async () => (await state(g, 'demo')) === 'running');
    // Asked while it is being torn down ("Start a new conversation" pressed during the close): not the closing one,
    // a new one once the teardown is done.
    const letStop = hold('stopGate');
    const stops = () => fx.driver.calls.filter((c) => c === 'stop demo').length;
    const stopsBefore = stops();
    const closing = g.teardown('demo');
    await until(async () => stops() > stopsBefore && (await state(g, 'demo')) === 'tearing-down');
    const again = g.ensureDefault('demo');
    letStop();
    expect((await closing).state).toBe('gone');
    expect(await again).toMatchObject({ created: true, workspace: { slug: 'demo', state: 'creating' } });
    await until(async () => (await state(g, 'demo')) === 'running');
    await expect(g.ensureDefault('nope')).rejects.toMatchObject({ code: 'project_not_found', status: 404 });
    await expect(g.ensureDefault('../demo')).rejects.toMatchObject({ code: 'invalid_name', status: 422 });
  });

  it('keeps the line and its order across a restart; reconcile gives freed slots to it', async () => {
    const g1 = await withProject();
    await g1.fork({ project: 'demo', name: 'a' });
    for (const n of ['b', 'c', 'd']) await g1.fork(queue(n));
    await g1.teardown('demo~c');
    await g1.close();

    // Back with one more slot: reconcile promotes the first in line only.
    const g2 = await open({ maxRunning: 2 });
    await g2.reconcile();
    await until(async () => (await state(g2, 'demo~b')) === 'running');
    expect(await positions(g2)).toEqual({ d: 1 });
    await g2.stop('demo~a');
    await until(async () => (await state(g2, 'demo~d')) === 'running');
    expect(await state(g2, 'demo~c')).toBe('gone');
  });

  it('the line waits while Docker is down and moves once reconcile sees it back', async () => {
    const g = await withProject();
    await g.fork({ project: 'demo', name: 'a' });
    await g.fork(queue('b'));
    // The engine goes away right after the stop, before the freed slot would go to b.
    g.onEvent((e) => {
      if (e.type === 'workspace.stopped') fx.driver.behave.down = true;
    });
    await g.stop('demo~a');
    expect(await g.get('demo~b')).toMatchObject({ state: 'queued', queuePosition: 1 });
    expect((await g.events({ slug: 'demo~b' })).map((e) => e.type)).toEqual(['workspace.queued']);
    fx.driver.behave.down = false;
    await g.reconcile();
    await until(async () => (await state(g, 'demo~b')) === 'running');
  });
});

describe('two servers on one PostgreSQL registry', () => {
  beforeEach(usePostgres);

  it('never exceed the cap between them and create one name once', async () => {
    const a = await withProject({ maxRunning: 3 });
    // The second server shares the home, the engine and the database (two processes on one host).
    const b = await open({ maxRunning: 3 });
    await b.addProject({ name: 'demo', source: fx.source, createDefault: false });
    const forks = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'].map((name, i) => (i % 2 ? b : a).fork({ project: 'demo', name }));
    const results = await Promise.allSettled(forks);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'capacity_reached' });
    expect(await b.capacity()).toMatchObject({ running: 3, creating: 0, queued: 0 });

    // One name asked of both at once, in line: one of them gets it.
    const same = await Promise.allSettled([a.fork(queue('same')), b.fork(queue('same'))]);
    expect(same.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(same.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'workspace_exists' } });
    expect((await a.list()).workspaces.filter((w) => w.name === 'same')).toMatchObject([{ state: 'queued', queuePosition: 1 }]);
  });
});

describe('two servers on one PostgreSQL registry: reconcile leaves the other server\'s operations alone', () => {
  beforeEach(usePostgres);

  it('a server starting while another is in the middle of a fork does not roll the fork back', async () => {
    const a = await withProject({ maxRunning: 2 });
    const go = hold('ensureGate');
    const fork = a.fork({ project: 'demo', name: 'w' });
    await until(async () => fx.driver.calls.includes('ensure demo~w'));
    expect(fx.driver.containers.has('demo~w')).toBe(false);

    // The second server shares the home, the engine and the database, and reconciles as it starts.
    const b = await open({ maxRunning: 2 });
    await b.reconcile();
    expect(await state(b, 'demo~w')).toBe('creating');
    const types = (await b.events({ slug: 'demo~w' })).map((e) => e.type);
    expect(types).not.toContain('spawn_failed');
    expect(types).not.toContain('workspace.reconciled');
    expect(existsSync(join(fx.home, 'worktrees', 'demo', 'w'))).toBe(true);

    go();
    expect(await fork).toMatchObject({ state: 'running' });
    expect(await state(b, 'demo~w')).toBe('running');
    // Once the fork is done the row is the second server's to reconcile too: nothing to change.
    await b.reconcile();
    expect(await state(b, 'demo~w')).toBe('running');
  });

  it('nor a fork the line promoted', async () => {
    const a = await withProject();
    await a.fork({ project: 'demo', name: 'x' });
    await a.fork(queue('y'));
    const go = hold('ensureGate');
    await a.stop('demo~x');
    await until(async () => fx.driver.calls.includes('ensure demo~y'));

    const b = await open();
    await b.reconcile();
    expect(await state(b, 'demo~y')).toBe('creating');
    expect((await b.events({ slug: 'demo~y' })).map((e) => e.type)).not.toContain('spawn_failed');

    go();
    await until(async () => (await state(a, 'demo~y')) === 'running');
  });
});

describe('idle auto-stop', () => {
  it('stops a running workspace without activity (reason idle) and gives its slot to the line', async () => {
    const g = await withProject({ idleStopMs: 300 });
    await g.fork({ project: 'demo', name: 'a' });
    await g.fork(queue('b'));
    // The row turns stopped before workspace.stopped is stored: wait for the event.
    const stopped = await until(async () => (await g.events({ slug: 'demo~a' })).find((e) => e.type === 'workspace.stopped'));
    expect(stopped.data).toMatchObject({ reason: 'idle' });
    expect(await state(g, 'demo~a')).toBe('stopped');
    await until(async () => (await g.events({ slug: 'demo~b' })).some((e) => e.type === 'workspace.registered'));
  });

  it('leaves a workspace whose backend is in a turn running, and counts the turn as activity', async () => {
    const g = await withProject({ idleStopMs: 200 });
    fx.driver.behave.busy = true;
    const a = await g.fork({ project: 'demo', name: 'a' });
    // The sweep saw it idle and busy: it marks it active instead of stopping it.
    await until(async () => (await g.get('demo~a')).lastActivityAt !== a.lastActivityAt);
    expect(await state(g, 'demo~a')).toBe('running');
    fx.driver.behave.busy = false;
    await until(async () => (await state(g, 'demo~a')) === 'stopped');
  });

});
