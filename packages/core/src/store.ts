import { GroveError } from '@grove/contracts';
import type { Capacity, GroveEvent, Workspace } from '@grove/contracts';
import { events, projects, workspaces } from '@grove/db';
import type { Db, EventRow, NewWorkspaceRow, ProjectRow, WorkspaceRow, WorkspaceStateValue } from '@grove/db';
import { and, asc, count, desc, eq, gt, inArray, max, sql } from 'drizzle-orm';

/** Registry queries over the db handle. Synchronous (better-sqlite3), so each call is atomic in-process. */

export const LIVE_STATES = ['queued', 'creating', 'running', 'stopped', 'tearing-down'] as const satisfies readonly WorkspaceStateValue[];
/** States that occupy a sandbox slot. */
const SLOT_STATES = ['creating', 'running'] as const satisfies readonly WorkspaceStateValue[];
/** What capacity() counts: the slot holders and the line. */
const COUNTED_STATES = [...SLOT_STATES, 'queued'] as const satisfies readonly WorkspaceStateValue[];

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Q = Db | Tx;

export function nowIso(): string {
  return new Date().toISOString();
}

/** queuePosition: the row's 1-based place in the line when it is queued (see Store.queuePositions). */
export function toWorkspace(r: WorkspaceRow, queuePosition: number | null = null): Workspace {
  // Host paths (worktree_path, container_id) stay inside core.
  return {
    slug: r.slug,
    project: r.project,
    name: r.name,
    isDefault: r.isDefault,
    branch: r.branch,
    baseRef: r.baseRef,
    state: r.state,
    failureReason: r.failureReason,
    agentSessionId: r.agentSessionId,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    lastActivityAt: r.lastActivityAt,
    queuePosition: r.state === 'queued' ? queuePosition : null,
    pullRequest: r.prUrl && r.prNumber && r.prState ? { url: r.prUrl, number: r.prNumber, state: r.prState } : null,
    cleanupHeld: r.cleanupHeld,
    keepCheckoutOnClose: r.keepCheckoutOnClose,
  };
}

export function toEvent(r: EventRow): GroveEvent {
  return { id: r.id, slug: r.slug, type: r.type, data: r.data, at: r.at };
}

function isUniqueViolation(e: unknown): boolean {
  return (e as { code?: string } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

export function capacityError(c: Capacity): GroveError {
  const line = c.queued > 0 ? `; ${c.queued} ${c.queued === 1 ? 'workspace waits' : 'workspaces wait'} in line for a slot` : '';
  const why = c.running + c.creating >= c.cap ? `all ${c.cap} sandbox slots are in use (${c.running} running, ${c.creating} starting)` : `a slot is about to go to the first in line`;
  return new GroveError('capacity_reached', `${why}${line}; stop or tear down a workspace first, or fork with queue: true to wait in line`, {
    details: { running: c.running, creating: c.creating, cap: c.cap, queued: c.queued },
  });
}

/**
 * Whether a new fork or a reopen may take a slot now: one is free and nobody waits in line (a caller
 * never jumps the line; the first in line gets the next free slot through promoteNext).
 */
export function slotFree(c: Capacity): boolean {
  return c.running + c.creating < c.cap && c.queued === 0;
}

/** The row of a workspace that must be stopped to be reopened (or put in line to reopen); invalid_state otherwise. */
function stoppedRow(tx: Tx, id: number): WorkspaceRow {
  const cur = tx.select().from(workspaces).where(eq(workspaces.id, id)).get();
  if (!cur || cur.state !== 'stopped') {
    throw new GroveError('invalid_state', `workspace is ${cur?.state ?? 'gone'}, not stopped`, { details: { state: cur?.state ?? null } });
  }
  return cur;
}

export class Store {
  /**
   * The queries on the proxy's hot path, compiled once: building a drizzle query and preparing a new
   * SQLite statement on every proxied request cost about three quarters of the proxy's CPU
   * (docs/benchmarks.md). better-sqlite3 runs them on the same connection, so inside a transaction too.
   */
  private readonly stmt;

  constructor(private readonly db: Db) {
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

  project(name: string): ProjectRow | undefined {
    return this.db.select().from(projects).where(eq(projects.name, name)).get();
  }

  projects(): ProjectRow[] {
    return this.db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name)).all();
  }

  /** Insert the project unless it exists; returns the stored row. */
  ensureProject(row: ProjectRow): ProjectRow {
    this.db.insert(projects).values(row).onConflictDoNothing().run();
    return this.project(row.name) ?? row;
  }

  live(slug: string): WorkspaceRow | undefined {
    return this.stmt.live.get({ slug });
  }

  latest(slug: string): WorkspaceRow | undefined {
    return this.stmt.latest.get({ slug });
  }

  byId(id: number): WorkspaceRow | undefined {
    return this.stmt.byId.get({ id });
  }

  rows(filter: { project?: string; states?: readonly WorkspaceStateValue[] } = {}): WorkspaceRow[] {
    const conds = [];
    if (filter.project) conds.push(eq(workspaces.project, filter.project));
    if (filter.states) conds.push(inArray(workspaces.state, [...filter.states]));
    return this.db
      .select()
      .from(workspaces)
      .where(conds.length ? and(...conds) : undefined)
      .orderBy(asc(workspaces.id))
      .all();
  }

  capacity(cap: number, q: Q = this.db): Capacity {
    const rows = q
      .select({ state: workspaces.state, n: count() })
      .from(workspaces)
      .where(inArray(workspaces.state, [...COUNTED_STATES]))
      .groupBy(workspaces.state)
      .all();
    const of = (s: WorkspaceStateValue): number => rows.find((r) => r.state === s)?.n ?? 0;
    return { running: of('running'), creating: of('creating'), cap, queued: of('queued') };
  }

  /** The line for a slot, first in line first. */
  queue(q: Q = this.db): WorkspaceRow[] {
    return q.select().from(workspaces).where(eq(workspaces.state, 'queued')).orderBy(asc(workspaces.queueSeq), asc(workspaces.id)).all();
  }

  /** Row id -> 1-based place in the line, for every queued row. */
  queuePositions(q: Q = this.db): Map<number, number> {
    return new Map(this.queue(q).map((r, i) => [r.id, i + 1]));
  }

  /**
   * Give a free slot to the first in line, in one BEGIN IMMEDIATE transaction: queued -> creating when
   * running + creating < cap. Undefined when no slot is free or nobody waits. Synchronous and atomic, so two
   * frees (in this process or another) never promote the same row twice nor exceed the cap.
   */
  promoteNext(cap: number): { row: WorkspaceRow; capacity: Capacity } | undefined {
    return this.db.transaction(
      (tx) => {
        const c = this.capacity(cap, tx);
        if (c.running + c.creating >= cap || c.queued === 0) return undefined;
        const [first] = this.queue(tx);
        if (!first) return undefined;
        const row = tx
          .update(workspaces)
          .set({ state: 'creating', queueSeq: null, updatedAt: nowIso() })
          .where(and(eq(workspaces.id, first.id), eq(workspaces.state, 'queued')))
          .returning()
          .get();
        if (!row) return undefined;
        return { row, capacity: { ...c, creating: c.creating + 1, queued: c.queued - 1 } };
      },
      { behavior: 'immediate' },
    );
  }

  /**
   * Reserve a slot for a new workspace in one BEGIN IMMEDIATE transaction: a live row with the slug ->
   * workspace_exists; no free slot (see slotFree) -> capacity_reached, or with `queue` the row is inserted
   * as queued at the end of the line (position is its 1-based place); else the row is inserted as creating.
   */
  reserveNew(
    values: Omit<NewWorkspaceRow, 'state' | 'createdAt' | 'updatedAt' | 'queueSeq'>,
    cap: number,
    opts: { queue?: boolean } = {},
  ): { row: WorkspaceRow; capacity: Capacity; position: number | null } {
    try {
      return this.db.transaction(
        (tx) => {
          if (this.live(values.slug)) {
            throw new GroveError('workspace_exists', `workspace "${values.slug}" already exists`, { details: { slug: values.slug } });
          }
          const c = this.capacity(cap, tx);
          const at = nowIso();
          if (!slotFree(c)) {
            if (!opts.queue) throw capacityError(c);
            // The check and the insert share the transaction: no fork slips between "full" and "in line".
            const last = tx.select({ seq: max(workspaces.queueSeq) }).from(workspaces).where(eq(workspaces.state, 'queued')).get();
            const row = tx
              .insert(workspaces)
              .values({ ...values, state: 'queued', queueSeq: (last?.seq ?? 0) + 1, createdAt: at, updatedAt: at })
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
        { behavior: 'immediate' },
      );
    } catch (e) {
      // Another process inserted the same live slug between our check and insert.
      if (isUniqueViolation(e)) throw new GroveError('workspace_exists', `workspace "${values.slug}" already exists`, { details: { slug: values.slug } });
      throw e;
    }
  }

  /** Reserve a slot to reopen a stopped workspace: stopped -> creating under the same cap check. */
  reserveStart(id: number, cap: number): { row: WorkspaceRow; capacity: Capacity } {
    return this.db.transaction(
      (tx) => {
        stoppedRow(tx, id);
        const c = this.capacity(cap, tx);
        if (!slotFree(c)) throw capacityError(c);
        const row = tx
          .update(workspaces)
          .set({ state: 'creating', failureReason: null, updatedAt: nowIso() })
          .where(eq(workspaces.id, id))
          .returning()
          .get();
        return { row, capacity: { ...c, creating: c.creating + 1 } };
      },
      { behavior: 'immediate' },
    );
  }

  /**
   * Put a stopped workspace in line to reopen, in one BEGIN IMMEDIATE transaction with the slot check:
   * undefined when a slot is free (reopen it now with reserveStart), else stopped -> queued at the end.
   */
  queueStart(id: number, cap: number): { row: WorkspaceRow; capacity: Capacity; position: number } | undefined {
    return this.db.transaction(
      (tx) => {
        stoppedRow(tx, id);
        const c = this.capacity(cap, tx);
        if (slotFree(c)) return undefined;
        const last = tx.select({ seq: max(workspaces.queueSeq) }).from(workspaces).where(eq(workspaces.state, 'queued')).get();
        const row = tx
          .update(workspaces)
          .set({ state: 'queued', queueSeq: (last?.seq ?? 0) + 1, updatedAt: nowIso() })
          .where(eq(workspaces.id, id))
          .returning()
          .get();
        return { row, capacity: { ...c, queued: c.queued + 1 }, position: c.queued + 1 };
      },
      { behavior: 'immediate' },
    );
  }

  /** Update a row; with `from`, only when it is still in that state (returns undefined otherwise). */
  update(id: number, patch: Partial<Omit<NewWorkspaceRow, 'id'>>, from?: WorkspaceStateValue): WorkspaceRow | undefined {
    const where = from ? and(eq(workspaces.id, id), eq(workspaces.state, from)) : eq(workspaces.id, id);
    return this.db
      .update(workspaces)
      .set({ ...patch, updatedAt: nowIso() })
      .where(where)
      .returning()
      .get();
  }

  /** Activity is not a state change: leave updated_at alone. */
  touch(id: number, at: string): void {
    this.stmt.touch.run({ id, at });
  }

  addEvent(slug: string, type: string, data: Record<string, unknown>): GroveEvent {
    const row = this.db.insert(events).values({ slug, type, data, at: nowIso() }).returning().get();
    return toEvent(row);
  }

  events(query: { slug?: string; after?: number; limit?: number; type?: string } = {}): GroveEvent[] {
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

  /** The newest events of these types for a slug, newest first. */
  recentEvents(slug: string, types: readonly string[], limit: number): GroveEvent[] {
    return this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), inArray(events.type, [...types])))
      .orderBy(desc(events.id))
      .limit(limit)
      .all()
      .map(toEvent);
  }

  /** The newest event of a type for one workspace row (events carry workspaceId in their data). */
  lastEventFor(slug: string, type: string, workspaceId: number): GroveEvent | undefined {
    const rows = this.db
      .select()
      .from(events)
      .where(and(eq(events.slug, slug), eq(events.type, type)))
      .orderBy(desc(events.id))
      .all();
    const hit = rows.find((r) => r.data.workspaceId === workspaceId);
    return hit ? toEvent(hit) : undefined;
  }
}
