// The registry contract, run against both dialects: SQLite (a temp file) and PostgreSQL (a throwaway cluster, a
// fresh database per test). The line for a slot (enqueue, positions, FIFO promotion under the cap, no jumping), and
// two registries sharing one database (two servers) never exceeding the cap nor creating one slug twice.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestPostgres } from '@grove/db';
import type { OpenDbOptions, TestPostgres } from '@grove/db';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { capacityError, isUniqueViolation, slotFree, toWorkspace } from './registry.ts';
import type { Registry } from './registry.ts';
import { openRegistry } from './store.ts';
import { ROUTE_CACHE_MS } from './route-cache.ts';

let cluster: TestPostgres | undefined;
beforeAll(async () => {
  cluster = await startTestPostgres();
});
afterAll(async () => {
  await cluster?.stop();
});

interface Dialect {
  name: 'sqlite' | 'postgres';
  /** Where a new, empty registry lives; every call of open() on it opens another connection (another server). */
  fresh(dir: string): Promise<OpenDbOptions>;
}

const dialects: Dialect[] = [
  { name: 'sqlite', fresh: async (dir) => ({ file: join(dir, 'grove.db') }) },
  {
    name: 'postgres',
    fresh: async () => {
      if (!cluster) throw new Error('the test PostgreSQL cluster did not start');
      return { url: await cluster.createDatabase('store') };
    },
  },
];

const values = (name: string) => ({ slug: `p~${name}`, project: 'p', name, isDefault: false, branch: `grove/${name}`, baseRef: 'main' });

describe.each(dialects)('registry on $name', ({ name: dialect, fresh }) => {
  let dir: string;
  let where: OpenDbOptions;
  let store: Registry;
  const opened: Registry[] = [];
  const open = async (): Promise<Registry> => {
    const r = await openRegistry(where);
    opened.push(r);
    return r;
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'grove-store-'));
    where = await fresh(dir);
    store = await open();
    await store.ensureProject({ name: 'p', source: '/src', defaultBranch: 'main', createdAt: new Date().toISOString() });
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((r) => r.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  const reserve = (name: string, cap: number, queue = false, on: Registry = store) => on.reserveNew(values(name), cap, { queue });
  const line = async () => {
    const out = [];
    for (const [id, pos] of await store.queuePositions()) out.push([(await store.byId(id))?.name, pos]);
    return out;
  };

  it('is the dialect asked for', () => {
    expect(store.dialect).toBe(dialect);
  });

  describe('the line', () => {
    it('queues only when no slot is free, at the end of the line, and only with queue', async () => {
      expect(await reserve('a', 1, true)).toMatchObject({ position: null, row: { state: 'creating', queueSeq: null } });
      await expect(reserve('b', 1)).rejects.toMatchObject({ code: 'capacity_reached' });
      expect(await reserve('b', 1, true)).toMatchObject({ position: 1, row: { state: 'queued' }, capacity: { running: 0, creating: 1, cap: 1, queued: 1 } });
      expect(await reserve('c', 1, true)).toMatchObject({ position: 2 });
      // A queued row holds its slug.
      await expect(reserve('c', 1, true)).rejects.toMatchObject({ code: 'workspace_exists' });
      expect(await line()).toEqual([
        ['b', 1],
        ['c', 2],
      ]);
    });

    it('promotes first in line first, never past the cap', async () => {
      const a = (await reserve('a', 1)).row;
      await reserve('b', 1, true);
      await reserve('c', 1, true);
      expect(await store.promoteNext(1)).toBeUndefined(); // a still holds the slot
      await store.update(a.id, { state: 'stopped' });
      expect(await store.promoteNext(1)).toMatchObject({ row: { name: 'b', state: 'creating', queueSeq: null }, capacity: { creating: 1, queued: 1 } });
      expect(await store.promoteNext(1)).toBeUndefined();
      expect(await line()).toEqual([['c', 1]]);
      // With room for more than the line holds, each waiting row is promoted once.
      expect((await store.promoteNext(3))?.row.name).toBe('c');
      expect(await store.promoteNext(3)).toBeUndefined();
    });

    it('a slot is not free while others wait: no fork or reopen jumps the line', async () => {
      const a = (await reserve('a', 2)).row;
      await store.update(a.id, { state: 'running' });
      const b = (await reserve('b', 2)).row;
      await store.update(b.id, { state: 'running' });
      await reserve('c', 2, true);
      await store.update(b.id, { state: 'stopped' });
      const c = await store.capacity(2);
      expect(c).toEqual({ running: 1, creating: 0, cap: 2, queued: 1 });
      expect(slotFree(c)).toBe(false);
      await expect(reserve('d', 2)).rejects.toMatchObject({ code: 'capacity_reached', details: expect.objectContaining({ queued: 1 }) });
      await expect(store.reserveStart(b.id, 2)).rejects.toMatchObject({ code: 'capacity_reached' });
      expect(capacityError(c).message).toContain('1 workspace waits in line');
    });

    it('keeps the order when one leaves, and continues numbering after the last in line', async () => {
      await reserve('a', 1);
      const b = (await reserve('b', 1, true)).row;
      await reserve('c', 1, true);
      await store.update(b.id, { state: 'gone', queueSeq: null }, 'queued');
      expect(await line()).toEqual([['c', 1]]);
      expect((await reserve('d', 1, true)).position).toBe(2);
      expect(toWorkspace((await store.live('p~d')) ?? b, 2).queuePosition).toBe(2);
      expect(toWorkspace((await store.live('p~a')) ?? b, 2).queuePosition).toBeNull();
    });

    it('reopens and queues a stopped workspace only from stopped', async () => {
      const a = (await reserve('a', 1)).row;
      await expect(store.reserveStart(a.id, 1)).rejects.toMatchObject({ code: 'invalid_state' });
      await store.update(a.id, { state: 'stopped' });
      const b = (await reserve('b', 1)).row;
      expect(await store.queueStart(a.id, 1)).toMatchObject({ position: 1, row: { state: 'queued' } });
      await store.update(b.id, { state: 'stopped' });
      expect(await store.promoteNext(1)).toMatchObject({ row: { name: 'a', state: 'creating' } });
      expect(await store.queueStart(b.id, 2)).toBeUndefined(); // a slot is free: reopen it now instead
      expect(await store.reserveStart(b.id, 2)).toMatchObject({ row: { name: 'b', state: 'creating', failureReason: null }, capacity: { creating: 2 } });
    });
  });

  describe('rows and events', () => {
    it('reads rows, the listing and events back as written', async () => {
      const a = (await reserve('a', 2)).row;
      await reserve('b', 2);
      expect(await store.update(a.id, { state: 'running', egressPolicy: { rules: [{ host: 'x.example', ports: [443] }] }, keepCheckoutOnClose: true }, 'creating')).toMatchObject({
        state: 'running',
        egressPolicy: { rules: [{ host: 'x.example', ports: [443] }] },
        keepCheckoutOnClose: true,
        isDefault: false,
      });
      expect(await store.update(a.id, { state: 'stopped' }, 'creating')).toBeUndefined();
      await store.touch(a.id, '2030-01-01T00:00:00.000Z');
      expect((await store.byId(a.id))?.lastActivityAt).toBe('2030-01-01T00:00:00.000Z');
      expect((await store.route('p~a'))?.state).toBe('running');
      const listing = await store.listing({ project: 'p' }, 2);
      expect(listing.rows.map((r) => r.name)).toEqual(['a', 'b']);
      expect(listing.capacity).toEqual({ running: 1, creating: 1, cap: 2, queued: 0 });
      expect(await store.rows({ states: ['creating'] })).toHaveLength(1);
      expect((await store.latest('p~a'))?.id).toBe(a.id);

      const first = await store.addEvent('p~a', 'workspace.reserved', { workspaceId: a.id, n: 1 });
      // Fired together, stored in call order.
      const burst = await Promise.all([1, 2, 3, 4, 5].map((n) => store.addEvent('p~a', 'workspace.prepared', { workspaceId: n === 5 ? a.id : 99, n })));
      expect(burst.map((e) => e.id)).toEqual([...burst.map((e) => e.id)].sort((x, y) => x - y));
      expect(burst[0]?.id).toBeGreaterThan(first.id);
      expect((await store.events({ slug: 'p~a' })).map((e) => e.data.n)).toEqual([1, 1, 2, 3, 4, 5]);
      expect(await store.events({ slug: 'p~a', after: first.id, type: 'workspace.prepared', limit: 2 })).toHaveLength(2);
      expect((await store.recentEvents('p~a', ['workspace.prepared'], 2)).map((e) => e.data.n)).toEqual([5, 4]);
      expect((await store.lastEventFor('p~a', 'workspace.prepared', a.id))?.data).toEqual({ workspaceId: a.id, n: 5 });
      expect(await store.lastEventFor('p~a', 'workspace.registered', a.id)).toBeUndefined();
      expect((await store.projects()).map((p) => p.name)).toEqual(['p']);
      expect((await store.ensureProject({ name: 'p', source: '/other', defaultBranch: 'x', createdAt: 'y' })).source).toBe('/src');
    });
  });

  describe('route (the proxy reads it once per request)', () => {
    it("sees this process's own state changes at once", async () => {
      expect(await store.route('p~a')).toBeUndefined();
      const a = (await reserve('a', 2)).row;
      expect((await store.route('p~a'))?.state).toBe('creating');
      await store.update(a.id, { state: 'running' });
      expect((await store.route('p~a'))?.state).toBe('running');
      await store.update(a.id, { state: 'stopped' }, 'running');
      expect((await store.route('p~a'))?.state).toBe('stopped');
      await store.update(a.id, { state: 'gone' });
      expect(await store.route('p~a')).toBeUndefined();
    });

    it("sees another registry's change once the cache time has passed", async () => {
      const a = (await reserve('a', 2)).row;
      await store.update(a.id, { state: 'running' });
      expect((await store.route('p~a'))?.state).toBe('running');
      const other = await open();
      await other.update(a.id, { state: 'stopped' }, 'running');
      await new Promise((r) => setTimeout(r, ROUTE_CACHE_MS + 50));
      expect((await store.route('p~a'))?.state).toBe('stopped');
    });
  });

  // Two servers on one database: each its own connection (SQLite) or pool (PostgreSQL).
  describe('two registries sharing one database', () => {
    it('never take more than the cap between them', async () => {
      const other = await open();
      const cap = 5;
      const tries = Array.from({ length: 24 }, (_, i) => reserve(`w${i}`, cap, false, i % 2 ? other : store));
      const results = await Promise.allSettled(tries);
      const won = results.filter((r) => r.status === 'fulfilled');
      const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won).toHaveLength(cap);
      expect(refused.map((r) => (r.reason as { code?: string }).code)).toEqual(Array(24 - cap).fill('capacity_reached'));
      expect(await other.capacity(cap)).toEqual({ running: 0, creating: cap, cap, queued: 0 });
    });

    it('queue in one line between them and promote each waiting row once', async () => {
      const other = await open();
      const tries = Array.from({ length: 12 }, (_, i) => reserve(`w${i}`, 2, true, i % 2 ? other : store));
      const results = await Promise.all(tries);
      expect(results.filter((r) => r.position === null)).toHaveLength(2);
      expect(results.map((r) => r.position).filter((p) => p !== null).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      // Every slot frees; both servers promote at once: the cap still holds and nobody is promoted twice.
      for (const r of results.filter((x) => x.position === null)) await store.update(r.row.id, { state: 'gone' });
      const promoted = (await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? other : store).promoteNext(2)))).filter((p) => p !== undefined);
      expect(promoted).toHaveLength(2);
      expect(new Set(promoted.map((p) => p.row.id)).size).toBe(2);
      expect(await store.capacity(2)).toEqual({ running: 0, creating: 2, cap: 2, queued: 8 });
    });

    it('create one slug once: exactly one wins, the others get workspace_exists', async () => {
      const other = await open();
      const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => reserve('same', 8, true, i % 2 ? other : store)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'workspace_exists' });
      expect(await store.rows()).toHaveLength(1);
    });

    it('number events in the order they become visible: a reader following from its last id misses none', async () => {
      // Three registries (servers) writing at once, a fourth reading on as `grove logs -f` and `grove send` do: from
      // the newest id it saw. An id that became visible after a higher one would be skipped for good.
      const writers = [store, await open(), await open()];
      const reader = await open();
      let done = false;
      const written = Promise.all(writers.map((w, k) => Promise.all(Array.from({ length: 120 }, (_, i) => w.addEvent('p~x', 'test.tick', { k, i }))))).then(() => {
        done = true;
      });
      const seen: number[] = [];
      let cursor = 0;
      const follow = async () => {
        for (const e of await reader.events({ slug: 'p~x', after: cursor, limit: 1000 })) {
          seen.push(e.id);
          cursor = e.id;
        }
      };
      while (!done) await follow();
      await written;
      await follow();
      const all = (await reader.events({ slug: 'p~x', limit: 1000 })).map((e) => e.id);
      expect(all).toHaveLength(360);
      expect(seen).toEqual(all);
    });

    it('reopen one stopped workspace once', async () => {
      const other = await open();
      const a = (await reserve('a', 4)).row;
      await store.update(a.id, { state: 'stopped' });
      const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => (i % 2 ? other : store).reserveStart(a.id, 4)));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'invalid_state' });
    });
  });

  // Operation holds: what keeps one server's reconcile off a workspace another server is moving (grove.ts).
  describe('operation holds', () => {
    const settled = async (p: Promise<unknown>, ms = 150): Promise<boolean> =>
      Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
    // Holds mean different things per dialect: each pass registers only its own tests (none shows as skipped).
    const on = (d: typeof dialect) => (name: string, fn: () => Promise<void>): void => {
      if (dialect === d) it(name, fn);
    };

    on('postgres')('a hold keeps another registry from taking the slug until it is released', async () => {
      const other = await open();
      const release = await store.holdOperation('p~x');
      expect(await other.tryHoldForReconcile('p~x')).toBeNull();
      // In this process too: an operation of its own holds it.
      expect(await store.tryHoldForReconcile('p~x')).toBeNull();
      // Another slug is free.
      const y = await other.tryHoldForReconcile('p~y');
      expect(y).not.toBeNull();
      await y?.();
      await release();
      await release(); // twice is once
      const again = await other.tryHoldForReconcile('p~x');
      expect(again).not.toBeNull();
      // An operation waits for reconcile's hold, then gets the slug.
      const waiting = store.holdOperation('p~x');
      expect(await settled(waiting)).toBe(false);
      await again?.();
      const mine = await waiting;
      expect(await other.tryHoldForReconcile('p~x')).toBeNull();
      await mine();
      expect(await other.tryHoldForReconcile('p~x')).not.toBeNull();
    });

    on('postgres')('holds of one slug in one process share the lock; the last release frees it', async () => {
      const other = await open();
      const first = await store.holdOperation('p~x');
      // Does not wait for the first (one process never waits for itself).
      const second = store.holdOperation('p~x');
      expect(await settled(second)).toBe(true);
      await first();
      expect(await other.tryHoldForReconcile('p~x')).toBeNull();
      await (await second)();
      expect(await other.tryHoldForReconcile('p~x')).not.toBeNull();
    });

    on('postgres')('a hold ends with the connection of the registry that held it', async () => {
      const other = await open();
      await store.holdOperation('p~x');
      expect(await other.tryHoldForReconcile('p~x')).toBeNull();
      await store.close();
      // The server ends the session (and its locks) as it sees the connection close, a moment after close().
      const end = Date.now() + 5_000;
      let taken = await other.tryHoldForReconcile('p~x');
      while (!taken && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 20));
        taken = await other.tryHoldForReconcile('p~x');
      }
      expect(taken).not.toBeNull();
    });

    on('postgres')('a promoted row comes held; a row another process holds is passed over', async () => {
      const other = await open();
      const a = (await reserve('a', 1)).row;
      await reserve('b', 1, true);
      await reserve('c', 1, true);
      const b = await other.holdOperation('p~b');
      await store.update(a.id, { state: 'gone' });
      const promoted = await store.promoteNext(1);
      expect(promoted?.row).toMatchObject({ name: 'c', state: 'creating' });
      expect(await other.tryHoldForReconcile('p~c')).toBeNull();
      await promoted?.release();
      const c = await other.tryHoldForReconcile('p~c');
      expect(c).not.toBeNull();
      await c?.();
      await b();
      expect(await line()).toEqual([['b', 1]]);
    });

    on('sqlite')('are no-ops: one server owns a SQLite registry', async () => {
      const release = await store.holdOperation('p~x');
      const t = await store.tryHoldForReconcile('p~x');
      expect(t).not.toBeNull();
      await t?.();
      await release();
    });
  });
});

describe('isUniqueViolation', () => {
  it('knows both dialects, bare or wrapped by drizzle', () => {
    expect(isUniqueViolation({ code: 'SQLITE_CONSTRAINT_UNIQUE' })).toBe(true);
    expect(isUniqueViolation({ code: '23505' })).toBe(true);
    expect(isUniqueViolation(new Error('Failed query', { cause: { code: '23505' } }))).toBe(true);
    expect(isUniqueViolation({ code: '23503' })).toBe(false);
    expect(isUniqueViolation(null)).toBe(false);
  });
});
