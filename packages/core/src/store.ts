/**
 * The registry over SQLite (the embedded default) and the factory that opens either dialect. better-sqlite3 is
 * synchronous: every method runs to completion when it is called (the Promise only wraps the answer), and the
 * atomic ones are BEGIN IMMEDIATE transactions, so they are atomic across processes sharing the file too.
 */
import { events, openDb, projects, workspaces } from '@grove/db';
import type { Db, OpenDbOptions, ProjectRow, WorkspaceRow, WorkspaceStateValue } from '@grove/db';
import type { Capacity, GroveEvent } from '@grove/contracts';
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
import { PgStore } from './store-pg.ts';

const noHold: Release = async () => undefined;

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Q = Db | Tx;

/** Open the registry DATABASE_URL names, else the SQLite file; migrations are applied. */
export async function openRegistry(opts: OpenDbOptions): Promise<Registry> {
  const handle = await openDb(opts);
  return handle.dialect === 'postgres' ? new PgStore(handle) : new SqliteStore(handle.db, handle.close);
}

/** The row of a workspace that must be stopped to be reopened (or put in line to reopen); invalid_state otherwise. */
function stoppedRow(tx: Tx, id: number): WorkspaceRow {
  const cur = tx.select().from(workspaces).where(eq(workspaces.id, id)).get();
  if (!cur || cur.state !== 'stopped') throw notStopped(cur);
  return cur;
}

export class SqliteStore implements Registry {
  readonly dialect = 'sqlite';
  /**
   * The queries on the proxy's hot path, compiled once: building a drizzle query and preparing a new
   * SQLite statement on every proxied request cost about three quarters of the proxy's CPU
   * (docs/benchmarks.md). better-sqlite3 runs them on the same connection, so inside a transaction too.
   */
  private readonly stmt;
  private readonly routes = new RouteCache();

  constructor(
    private readonly db: Db,
    private readonly closeDb: () => Promise<void> = async () => undefined,
  ) {
    this.stmt = {
      live: db
        .select()
        .from(workspaces)
        .where(and(eq(workspaces.slug, sql.placeholder('slug')), inArray(workspaces.state, [...LIVE_STATES])))
        .prepare(),
      latest: db.select().from(workspaces).where(eq(workspaces.slug, sql.placeholder('slug'))).orderBy(desc(workspaces.id)).limit(1).prepare(),
      byId: db.select().from(workspaces).where(eq(workspaces.id, sql.placeholder('id'))).prepare(),
      touch: db
        .update(workspaces)
        .set({ lastActivityAt: sql`${sql.placeholder('at')}` })
        .where(eq(workspaces.id, sql.placeholder('id')))
        .prepare(),
    };
  }

  async project(name: string): Promise<ProjectRow | undefined> {
    return this.db.select().from(projects).where(eq(projects.name, name)).get();
  }

  async projects(): Promise<ProjectRow[]> {
    return this.db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name)).all();
  }

  async ensureProject(row: ProjectRow): Promise<ProjectRow> {
    this.db.insert(projects).values(row).onConflictDoNothing().run();
    return this.db.select().from(projects).where(eq(projects.name, row.name)).get() ?? row;
  }

  async live(slug: string): Promise<WorkspaceRow | undefined> {
    return this.stmt.live.get({ slug });
  }

  async route(slug: string): Promise<WorkspaceRow | undefined> {
    return this.routes.get(slug, async () => this.stmt.live.get({ slug }));
  }

  /**
   * A BEGIN IMMEDIATE transaction that writes workspace rows (atomic across processes sharing the file); it
   * drops the proxy's cached routes, so this process never routes on a row it changed.
   */
  private immediate<T>(fn: (tx: Tx) => T): T {
    try {
      return this.db.transaction(fn, { behavior: 'immediate' });
    } finally {
      this.routes.clear();
    }
  }

  async latest(slug: string): Promise<WorkspaceRow | undefined> {
    return this.stmt.latest.get({ slug });
  }

  async byId(id: number): Promise<WorkspaceRow | undefined> {
    return this.stmt.byId.get({ id });
  }

  async rows(filter: { project?: string; states?: readonly WorkspaceStateValue[] } = {}): Promise<WorkspaceRow[]> {
    return this.rowsOf(this.db, filter);
  }

  private rowsOf(q: Q, filter: { project?: string; states?: readonly WorkspaceStateValue[] }): WorkspaceRow[] {
    const conds = [];
    if (filter.project) conds.push(eq(workspaces.project, filter.project));
    if (filter.states) conds.push(inArray(workspaces.state, [...filter.states]));
    return q
      .select()
      .from(workspaces)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(workspaces.id))
      .all();
  }

  async listing(filter: { project?: string }, cap: number): Promise<{ rows: WorkspaceRow[]; positions: Map<number, number>; capacity: Capacity }> {
    // Synchronous: no other write of this process can come between the three reads.
    return { rows: this.rowsOf(this.db, filter), positions: this.positionsOf(this.db), capacity: this.capacityIn(this.db, cap) };
  }

  async capacity(cap: number): Promise<Capacity> {
    return this.capacityIn(this.db, cap);
  }

  private capacityIn(q: Q, cap: number): Capacity {
    const rows = q
      .select({ state: workspaces.state, n: count() })
      .from(workspaces)
      .where(inArray(workspaces.state, [...COUNTED_STATES]))
      .groupBy(workspaces.state)
      .all();
    return capacityOf(rows, cap);
  }

  /** The line for a slot, first in line first. */
  private queueOf(q: Q): WorkspaceRow[] {
    return q.select().from(workspaces).where(eq(workspaces.state, 'queued')).orderBy(asc(workspaces.queueSeq), asc(workspaces.id)).all();
  }

  private positionsOf(q: Q): Map<number, number> {
    return new Map(this.queueOf(q).map((r, i) => [r.id, i + 1]));
  }

  async queuePositions(): Promise<Map<number, number>> {
    return this.positionsOf(this.db);
  }

  private nextSeq(tx: Tx): number {
    const last = tx.select({ seq: max(workspaces.queueSeq) }).from(workspaces).where(eq(workspaces.state, 'queued')).get();
    return (last?.seq ?? 0) + 1;
  }

  /**
   * Operation holds are no-ops here: the SQLite registry (<home>/grove.db) is one server's, and within one process
   * the slug's mutex and the in-flight map already keep reconcile off a workspace that an operation is moving.
   * Several servers share a registry through PostgreSQL (PgStore), which has the session-scoped locks this needs;
   * SQLite has no lock that a dying process gives up on its own.
   */
  async holdOperation(_slug: string): Promise<Release> {
    return noHold;
  }

  async tryHoldForReconcile(_slug: string): Promise<Release | null> {
    return noHold;
  }

  async promoteNext(cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; release: Release } | undefined> {
    return this.immediate(
      (tx) => {
        const c = this.capacityIn(tx, cap);
        if (c.running + c.creating >= cap || c.queued === 0) return undefined;
        const [first] = this.queueOf(tx);
        if (!first) return undefined;
        const row = tx
          .update(workspaces)
          .set({ state: 'creating', queueSeq: null, updatedAt: nowIso() })
          .where(and(eq(workspaces.id, first.id), eq(workspaces.state, 'queued')))
          .returning()
          .get();
        if (!row) return undefined;
        return { row, capacity: { ...c, creating: c.creating + 1, queued: c.queued - 1 }, release: noHold };
      },
    );
  }

  async reserveNew(values: NewWorkspace, cap: number, opts: { queue?: boolean } = {}): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number | null }> {
    try {
      return this.immediate(
        (tx) => {
          if (this.stmt.live.get({ slug: values.slug })) throw existsError(values.slug);
          const c = this.capacityIn(tx, cap);
          const at = nowIso();
          if (!slotFree(c)) {
            if (!opts.queue) throw capacityError(c);
            // The check and the insert share the transaction: no fork slips between "full" and "in line".
            const row = tx
              .insert(workspaces)
              .values({ ...values, state: 'queued', queueSeq: this.nextSeq(tx), createdAt: at, updatedAt: at })
              .returning()
              .get();
            return { row, capacity: { ...c, queued: c.queued + 1 }, position: c.queued + 1 };
          }
          const row = tx
            .insert(workspaces)
            .values({ ...values, state: 'creating', createdAt: at, updatedAt: at })
            .returning()
            .get();
          return { row, capacity: { ...c, creating: c.creating + 1 }, position: null };
        },
      );
    } catch (e) {
      // Another process inserted the same live slug between our check and insert.
      if (isUniqueViolation(e)) throw existsError(values.slug);
      throw e;
    }
  }

  async reserveStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity }> {
    return this.immediate(
      (tx) => {
        stoppedRow(tx, id);
        const c = this.capacityIn(tx, cap);
        if (!slotFree(c)) throw capacityError(c);
        const row = tx
          .update(workspaces)
          .set({ state: 'creating', failureReason: null, updatedAt: nowIso() })
          .where(eq(workspaces.id, id))
          .returning()
          .get();
        return { row, capacity: { ...c, creating: c.creating + 1 } };
      },
    );
  }

  async queueStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number } | undefined> {
    return this.immediate(
      (tx) => {
        stoppedRow(tx, id);
        const c = this.capacityIn(tx, cap);
        if (slotFree(c)) return undefined;
        const row = tx
          .update(workspaces)
          .set({ state: 'queued', queueSeq: this.nextSeq(tx), updatedAt: nowIso() })
          .where(eq(workspaces.id, id))
          .returning()
          .get();
        return { row, capacity: { ...c, queued: c.queued + 1 }, position: c.queued + 1 };
      },
    );
  }

  async update(id: number, patch: WorkspacePatch, from?: WorkspaceStateValue): Promise<WorkspaceRow | undefined> {
    const where = from ? and(eq(workspaces.id, id), eq(workspaces.state, from)) : eq(workspaces.id, id);
    const row = this.db
      .update(workspaces)
      .set({ ...patch, updatedAt: nowIso() })
      .where(where)
      .returning()
      .get();
    this.routes.clear();
    return row;
  }

  async touch(id: number, at: string): Promise<void> {
    this.stmt.touch.run({ id, at });
  }

  async addEvent(slug: string, type: string, data: Record<string, unknown>): Promise<GroveEvent> {
    // Inserted before this returns (synchronous driver), so events are numbered in call order.
    const row = this.db.insert(events).values({ slug, type, data, at: nowIso() }).returning().get();
    return toEvent(row);
  }

  async events(query: EventQuery = {}): Promise<GroveEvent[]> {
    const conds = [];
    if (query.slug) conds.push(eq(events.slug, query.slug));
    if (query.after !== undefined) conds.push(gt(events.id, query.after));
    if (query.type) conds.push(eq(events.type, query.type));
    const limit = Math.min(Math.max(query.limit ?? 100, 1), 1000);
    return this.db
      .select()
      .from(events)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(events.id))
      .limit(limit)
      .all()
      .map(toEvent);
  }

  async recentEvents(slug: string, types: readonly string[], limit: number): Promise<GroveEvent[]> {
    return this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), inArray(events.type, [...types])))
      .orderBy(desc(events.id))
      .limit(limit)
      .all()
      .map(toEvent);
  }

  async lastEventFor(slug: string, type: string, workspaceId: number): Promise<GroveEvent | undefined> {
    const rows = this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), eq(events.type, type)))
      .orderBy(desc(events.id))
      .all();
    const hit = rows.find((r) => r.data.workspaceId === workspaceId);
    return hit ? toEvent(hit) : undefined;
  }

  async close(): Promise<void> {
    await this.closeDb();
  }
}
