/**
 * The registry over PostgreSQL (DATABASE_URL), for several Grove servers sharing one database. The operations that
 * take or give a sandbox slot run in one transaction that first takes a transaction-scoped advisory lock, so the
 * capacity check and the write it allows are atomic across processes (two servers never exceed the cap between
 * them); a reopen also locks its row (FOR UPDATE) so a concurrent teardown cannot slip between check and write.
 * The live-slug unique index decides a race for a name; its violation (23505) is the same workspace_exists as in SQLite.
 * Operation holds (holdOperation) are session-level advisory locks on connections of their own, so another server's
 * reconcile can see that a workspace is being moved by a live process, and a dead process's holds end with it.
 */
import type { Capacity, GroveEvent } from '@grove/contracts';
import { pgTables } from '@grove/db';
import type { PgDb, PgHandle, PgSession, ProjectRow, WorkspaceRow, WorkspaceStateValue } from '@grove/db';
import { and, asc, count, desc, eq, gt, inArray, max, sql } from 'drizzle-orm';
import {
  COUNTED_STATES,
  LIVE_STATES,
  capacityError,
  capacityOf,
  existsError,
  isUniqueViolation,
  notStopped,
  nowIso,
  slotFree,
  toEvent,
} from './registry.ts';
import type { EventQuery, NewWorkspace, Registry, Release, WorkspacePatch } from './registry.ts';
import { RouteCache } from './route-cache.ts';

const { events, projects, workspaces } = pgTables;

type Tx = Parameters<Parameters<PgDb['transaction']>[0]>[0];
type Q = PgDb | Tx;

/** pg_advisory_xact_lock key of the slot ledger ("grovecap"): every transaction that takes or queues for a slot holds it. */
const SLOT_LOCK = sql`SELECT pg_advisory_xact_lock(${'7454127839443657072'}::bigint)`;
/**
 * pg_advisory_xact_lock key of the event log ("groveevt"), held by every event insert: an id is drawn and committed
 * before the next is drawn, so ids become visible in order across servers, and a reader that follows from the newest
 * id it saw (`grove logs -f`, `grove send`, the event stream) never passes one that commits later.
 */
const EVENT_LOCK = sql`SELECT pg_advisory_xact_lock(${'7454142887549564532'}::bigint)`;
/**
 * Namespace of operation holds ("grop"), the first key of pg_advisory_lock(int4, int4); the second is holdKey(slug).
 * PostgreSQL keeps two-key and one-key advisory locks apart, so these never meet SLOT_LOCK or the migration lock.
 */
const HOLD_NS = 0x67726f70;

/**
 * A slug's hold key: 32-bit FNV-1a of its bytes, as a signed int4. Slugs are keys rather than row ids because a
 * fork is held before its row exists. Two slugs that collide only wait for (or are skipped as held by) each other.
 */
function holdKey(slug: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(slug, 'utf8')) {
    h ^= b;
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

const lockSql = (slug: string) => sql`SELECT pg_advisory_lock(${HOLD_NS}::int4, ${holdKey(slug)}::int4)`;
const tryLockSql = (slug: string) => sql`SELECT pg_try_advisory_lock(${HOLD_NS}::int4, ${holdKey(slug)}::int4) AS ok`;
const unlockSql = (slug: string) => sql`SELECT pg_advisory_unlock(${HOLD_NS}::int4, ${holdKey(slug)}::int4)`;

/** This process's hold of one slug: one session lock shared by its operations (n), so they never wait for each other. */
interface Held {
  n: number;
  /** Resolves once the lock is taken (it may wait for another process). */
  ready: Promise<PgSession>;
  held: boolean;
}

export class PgStore implements Registry {
  readonly dialect = 'postgres';
  private readonly db: PgDb;
  private readonly routes = new RouteCache();
  /** addEvent's inserts, one after the other: a pool would otherwise number concurrent events out of call order. */
  private eventChain: Promise<unknown> = Promise.resolve();
  private readonly holds = new Map<string, Held>();
  /** Every session out of the session pool (holds, reconcile's tries), so close() can end them and their locks. */
  private readonly sessions = new Set<PgSession>();

  constructor(private readonly handle: PgHandle) {
    this.db = handle.db;
  }

  /** Every write of this process drops the proxy's cached routes (cheap; writes are rare next to requests). */
  private wrote<T>(v: T): T {
    this.routes.clear();
    return v;
  }

  private async slotTx<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    try {
      return await this.db.transaction(async (tx) => {
        await tx.execute(SLOT_LOCK);
        return fn(tx);
      });
    } finally {
      this.routes.clear();
    }
  }

  async project(name: string): Promise<ProjectRow | undefined> {
    const [p] = await this.db.select().from(projects).where(eq(projects.name, name));
    return p;
  }

  async projects(): Promise<ProjectRow[]> {
    return this.db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name));
  }

  async ensureProject(row: ProjectRow): Promise<ProjectRow> {
    await this.db.insert(projects).values(row).onConflictDoNothing();
    return (await this.project(row.name)) ?? row;
  }

  async live(slug: string): Promise<WorkspaceRow | undefined> {
    return this.liveIn(this.db, slug);
  }

  private async liveIn(q: Q, slug: string): Promise<WorkspaceRow | undefined> {
    const [r] = await q
      .select()
      .from(workspaces)
      .where(and(eq(workspaces.slug, slug), inArray(workspaces.state, [...LIVE_STATES])));
    return r;
  }

  async route(slug: string): Promise<WorkspaceRow | undefined> {
    return this.routes.get(slug, () => this.live(slug));
  }

  async latest(slug: string): Promise<WorkspaceRow | undefined> {
    const [r] = await this.db.select().from(workspaces).where(eq(workspaces.slug, slug)).orderBy(desc(workspaces.id)).limit(1);
    return r;
  }

  async byId(id: number): Promise<WorkspaceRow | undefined> {
    const [r] = await this.db.select().from(workspaces).where(eq(workspaces.id, id));
    return r;
  }

  async rows(filter: { project?: string; states?: readonly WorkspaceStateValue[] } = {}): Promise<WorkspaceRow[]> {
    return this.rowsOf(this.db, filter);
  }

  private async rowsOf(q: Q, filter: { project?: string; states?: readonly WorkspaceStateValue[] }): Promise<WorkspaceRow[]> {
    const conds = [];
    if (filter.project) conds.push(eq(workspaces.project, filter.project));
    if (filter.states) conds.push(inArray(workspaces.state, [...filter.states]));
    return q
      .select()
      .from(workspaces)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(workspaces.id));
  }

  async listing(filter: { project?: string }, cap: number): Promise<{ rows: WorkspaceRow[]; positions: Map<number, number>; capacity: Capacity }> {
    // One snapshot for the three reads: the list and its capacity line agree even while other servers write.
    return this.db.transaction(
      async (tx) => ({ rows: await this.rowsOf(tx, filter), positions: await this.positionsOf(tx), capacity: await this.capacityIn(tx, cap) }),
      { isolationLevel: 'repeatable read', accessMode: 'read only' },
    );
  }

  async capacity(cap: number): Promise<Capacity> {
    return this.capacityIn(this.db, cap);
  }

  private async capacityIn(q: Q, cap: number): Promise<Capacity> {
    const rows = await q
      .select({ state: workspaces.state, n: count() })
      .from(workspaces)
      .where(inArray(workspaces.state, [...COUNTED_STATES]))
      .groupBy(workspaces.state);
    return capacityOf(rows, cap);
  }

  private async queueOf(q: Q): Promise<WorkspaceRow[]> {
    return q.select().from(workspaces).where(eq(workspaces.state, 'queued')).orderBy(asc(workspaces.queueSeq), asc(workspaces.id));
  }

  private async positionsOf(q: Q): Promise<Map<number, number>> {
    return new Map((await this.queueOf(q)).map((r, i) => [r.id, i + 1]));
  }

  async queuePositions(): Promise<Map<number, number>> {
    return this.positionsOf(this.db);
  }

  private async nextSeq(tx: Tx): Promise<number> {
    const [last] = await tx.select({ seq: max(workspaces.queueSeq) }).from(workspaces).where(eq(workspaces.state, 'queued'));
    return (last?.seq ?? 0) + 1;
  }

  /** The stopped row, locked for this transaction (a teardown or start elsewhere waits for us); invalid_state otherwise. */
  private async stoppedRow(tx: Tx, id: number): Promise<WorkspaceRow> {
    const [cur] = await tx.select().from(workspaces).where(eq(workspaces.id, id)).for('update');
    if (!cur || cur.state !== 'stopped') throw notStopped(cur);
    return cur;
  }

  async promoteNext(cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; release: Release } | undefined> {
    // The transaction runs on a session of its own: the promoted row's hold is taken in it, before the commit that
    // makes the row creating for everyone, and it outlives the commit (session-level), so no reconcile elsewhere
    // ever sees this row creating and unheld while we live.
    const s = await this.session();
    let shared: Release | undefined;
    let out: { row: WorkspaceRow; capacity: Capacity } | undefined;
    try {
      out = await s.db.transaction(async (tx) => {
        await tx.execute(SLOT_LOCK);
        const c = await this.capacityIn(tx, cap);
        if (c.running + c.creating >= cap || c.queued === 0) return undefined;
        for (const cand of await this.queueOf(tx)) {
          const mine = this.holds.get(cand.slug);
          // Being taken here and waiting for another process: that process is working on this row.
          if (mine && !mine.held) continue;
          if (mine) {
            mine.n++;
            shared = this.releaser(cand.slug, mine);
          } else {
            const [r] = (await tx.execute<{ ok: boolean }>(tryLockSql(cand.slug))).rows;
            if (r?.ok !== true) continue;
          }
          const [row] = await tx
            .update(workspaces)
            .set({ state: 'creating', queueSeq: null, updatedAt: nowIso() })
            .where(and(eq(workspaces.id, cand.id), eq(workspaces.state, 'queued')))
            .returning();
          if (row) return { row, capacity: { ...c, creating: c.creating + 1, queued: c.queued - 1 } };
          // Left the line meanwhile (a cancel does not take the slot lock): let it go and look further.
          if (shared) await shared();
          else await tx.execute(unlockSql(cand.slug));
          shared = undefined;
        }
        return undefined;
      });
    } catch (e) {
      // A session lock taken in a transaction survives its rollback: closing the session ends it.
      this.endSession(s, true);
      if (shared) await shared();
      throw e;
    } finally {
      this.routes.clear();
    }
    if (!out || shared) {
      this.endSession(s, false);
      return out && shared ? { ...out, release: shared } : undefined;
    }
    const slug = out.row.slug;
    if (this.holds.has(slug)) {
      // An operation here started waiting for the slug after our lock was taken; it waits for this release.
      let done = false;
      return {
        ...out,
        release: async () => {
          if (done) return;
          done = true;
          await this.unlock(s, slug);
        },
      };
    }
    const held: Held = { n: 1, ready: Promise.resolve(s), held: true };
    this.holds.set(slug, held);
    return { ...out, release: this.releaser(slug, held) };
  }

  async holdOperation(slug: string): Promise<Release> {
    let h = this.holds.get(slug);
    if (!h) {
      const entry: Held = { n: 0, ready: this.lockWaiting(slug), held: false };
      this.holds.set(slug, entry);
      entry.ready.then(
        () => (entry.held = true),
        () => {
          if (this.holds.get(slug) === entry) this.holds.delete(slug);
        },
      );
      h = entry;
    }
    h.n++;
    try {
      await h.ready;
    } catch (e) {
      h.n--;
      throw e;
    }
    return this.releaser(slug, h);
  }

  async tryHoldForReconcile(slug: string): Promise<Release | null> {
    // An operation of this process holds it, or is waiting for it.
    if (this.holds.has(slug)) return null;
    const s = await this.session();
    let ok: boolean;
    try {
      const [r] = (await s.db.execute<{ ok: boolean }>(tryLockSql(slug))).rows;
      ok = r?.ok === true;
    } catch (e) {
      this.endSession(s, true);
      throw e;
    }
    if (!ok) {
      this.endSession(s, false);
      return null;
    }
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      await this.unlock(s, slug);
    };
  }

  private async session(): Promise<PgSession> {
    const s = await this.handle.session();
    this.sessions.add(s);
    return s;
  }

  /** Give a session back (or close it: its locks end with it); once, whoever comes first (a release or close()). */
  private endSession(s: PgSession, destroy: boolean): void {
    if (!this.sessions.delete(s)) return;
    s.release(destroy);
  }

  private async lockWaiting(slug: string): Promise<PgSession> {
    const s = await this.session();
    try {
      await s.db.execute(lockSql(slug));
      return s;
    } catch (e) {
      this.endSession(s, true);
      throw e;
    }
  }

  private async unlock(s: PgSession, slug: string): Promise<void> {
    try {
      await s.db.execute(unlockSql(slug));
      this.endSession(s, false);
    } catch {
      // The connection is in doubt: closing it ends the session and with it the lock.
      this.endSession(s, true);
    }
  }

  /** One holder's release of a shared hold: the last one unlocks. */
  private releaser(slug: string, h: Held): Release {
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      if (--h.n > 0) return;
      if (this.holds.get(slug) === h) this.holds.delete(slug);
      await this.unlock(await h.ready, slug);
    };
  }

  async reserveNew(values: NewWorkspace, cap: number, opts: { queue?: boolean } = {}): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number | null }> {
    try {
      return await this.slotTx(async (tx) => {
        if (await this.liveIn(tx, values.slug)) throw existsError(values.slug);
        const c = await this.capacityIn(tx, cap);
        const at = nowIso();
        if (!slotFree(c)) {
          if (!opts.queue) throw capacityError(c);
          const [row] = await tx
            .insert(workspaces)
            .values({ ...values, state: 'queued', queueSeq: await this.nextSeq(tx), createdAt: at, updatedAt: at })
            .returning();
          if (!row) throw new Error('insert returned no row');
          return { row, capacity: { ...c, queued: c.queued + 1 }, position: c.queued + 1 };
        }
        const [row] = await tx
          .insert(workspaces)
          .values({ ...values, state: 'creating', createdAt: at, updatedAt: at })
          .returning();
        if (!row) throw new Error('insert returned no row');
        return { row, capacity: { ...c, creating: c.creating + 1 }, position: null };
      });
    } catch (e) {
      // The lock makes the check above decide; the index is the backstop (a row written without it).
      if (isUniqueViolation(e)) throw existsError(values.slug);
      throw e;
    }
  }

  async reserveStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity }> {
    return this.slotTx(async (tx) => {
      await this.stoppedRow(tx, id);
      const c = await this.capacityIn(tx, cap);
      if (!slotFree(c)) throw capacityError(c);
      const [row] = await tx
        .update(workspaces)
        .set({ state: 'creating', failureReason: null, updatedAt: nowIso() })
        .where(eq(workspaces.id, id))
        .returning();
      if (!row) throw notStopped(undefined);
      return { row, capacity: { ...c, creating: c.creating + 1 } };
    });
  }

  async queueStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number } | undefined> {
    return this.slotTx(async (tx) => {
      await this.stoppedRow(tx, id);
      const c = await this.capacityIn(tx, cap);
      if (slotFree(c)) return undefined;
      const [row] = await tx
        .update(workspaces)
        .set({ state: 'queued', queueSeq: await this.nextSeq(tx), updatedAt: nowIso() })
        .where(eq(workspaces.id, id))
        .returning();
      if (!row) throw notStopped(undefined);
      return { row, capacity: { ...c, queued: c.queued + 1 }, position: c.queued + 1 };
    });
  }

  async update(id: number, patch: WorkspacePatch, from?: WorkspaceStateValue): Promise<WorkspaceRow | undefined> {
    const where = from ? and(eq(workspaces.id, id), eq(workspaces.state, from)) : eq(workspaces.id, id);
    const [row] = await this.db
      .update(workspaces)
      .set({ ...patch, updatedAt: nowIso() })
      .where(where)
      .returning();
    return this.wrote(row);
  }

  async touch(id: number, at: string): Promise<void> {
    await this.db.update(workspaces).set({ lastActivityAt: at }).where(eq(workspaces.id, id));
  }

  async addEvent(slug: string, type: string, data: Record<string, unknown>): Promise<GroveEvent> {
    const insert = this.eventChain.then(async () => {
      const row = await this.db.transaction(async (tx) => {
        await tx.execute(EVENT_LOCK);
        const [inserted] = await tx.insert(events).values({ slug, type, data, at: nowIso() }).returning();
        return inserted;
      });
      if (!row) throw new Error('insert returned no row');
      return toEvent(row);
    });
    // The chain goes on after a failure; the failure is the caller's.
    this.eventChain = insert.catch(() => undefined);
    return insert;
  }

  async events(query: EventQuery = {}): Promise<GroveEvent[]> {
    const conds = [];
    if (query.slug) conds.push(eq(events.slug, query.slug));
    if (query.after !== undefined) conds.push(gt(events.id, query.after));
    if (query.type) conds.push(eq(events.type, query.type));
    const limit = Math.min(Math.max(query.limit ?? 100, 1), 1000);
    const rows = await this.db
      .select()
      .from(events)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(events.id))
      .limit(limit);
    return rows.map(toEvent);
  }

  async recentEvents(slug: string, types: readonly string[], limit: number): Promise<GroveEvent[]> {
    const rows = await this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), inArray(events.type, [...types])))
      .orderBy(desc(events.id))
      .limit(limit);
    return rows.map(toEvent);
  }

  async lastEventFor(slug: string, type: string, workspaceId: number): Promise<GroveEvent | undefined> {
    const [hit] = await this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), eq(events.type, type), sql`${events.data} -> 'workspaceId' = ${JSON.stringify(workspaceId)}::jsonb`))
      .orderBy(desc(events.id))
      .limit(1);
    return hit ? toEvent(hit) : undefined;
  }

  async close(): Promise<void> {
    await this.eventChain;
    // Held sessions would keep the pool from ending; closing them ends their locks, as a process exit would.
    for (const s of [...this.sessions]) this.endSession(s, true);
    this.holds.clear();
    await this.handle.close();
  }
}
