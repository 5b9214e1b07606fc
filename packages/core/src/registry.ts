/**
 * The registry: the rows behind workspaces, projects and the audit trail, over SQLite (the embedded default,
 * store.ts) or PostgreSQL (DATABASE_URL, store-pg.ts). Every method is async so both fit one interface; the
 * operations that must be atomic (a check and the write it allows) are single methods, each one transaction in
 * either dialect, so callers never check-then-act across an await.
 */
import { GroveError } from '@grove/contracts';
import type { Capacity, GroveEvent, Workspace } from '@grove/contracts';
import type { EventRow, NewWorkspaceRow, ProjectRow, WorkspaceRow, WorkspaceStateValue } from '@grove/db';

export const LIVE_STATES = ['queued', 'creating', 'running', 'stopped', 'tearing-down'] as const satisfies readonly WorkspaceStateValue[];
/** States that occupy a sandbox slot. */
export const SLOT_STATES = ['creating', 'running'] as const satisfies readonly WorkspaceStateValue[];
/** What capacity() counts: the slot holders and the line. */
export const COUNTED_STATES = [...SLOT_STATES, 'queued'] as const satisfies readonly WorkspaceStateValue[];

export type NewWorkspace = Omit<NewWorkspaceRow, 'state' | 'createdAt' | 'updatedAt' | 'queueSeq'>;
export type WorkspacePatch = Partial<Omit<NewWorkspaceRow, 'id'>>;
export interface EventQuery {
  slug?: string;
  after?: number;
  limit?: number;
  type?: string;
}

/** Ends a hold (holdOperation, tryHoldForReconcile). Never rejects; calling it again does nothing. */
export type Release = () => Promise<void>;

export interface Registry {
  readonly dialect: 'sqlite' | 'postgres';
  /**
   * Mark an operation on the workspace named slug as in flight, for other processes sharing this registry, until
   * the returned release: taken before the operation moves the row into a transient state (creating, tearing-down,
   * a stop on its way) and released once the row has left it. Waits while another process holds the slug; holds of
   * one slug in this process share one lock. A process that dies loses its holds with its connection, so what it
   * left half done is reconcile's again.
   */
  holdOperation(slug: string): Promise<Release>;
  /**
   * Hold slug for reconcile, without waiting: null when an operation holds it (in another process or this one), and
   * the row must be left alone. Release it when done with the row.
   */
  tryHoldForReconcile(slug: string): Promise<Release | null>;
  project(name: string): Promise<ProjectRow | undefined>;
  projects(): Promise<ProjectRow[]>;
  /** Insert the project unless it exists; returns the stored row. */
  ensureProject(row: ProjectRow): Promise<ProjectRow>;
  live(slug: string): Promise<WorkspaceRow | undefined>;
  /**
   * The live row for the proxy, once per proxied request: may answer from a cache of at most ROUTE_CACHE_MS
   * (route-cache.ts), dropped on every write of a workspace row this process makes, so a request does not wait
   * for the database (PostgreSQL) or pay a query (SQLite); another process's change shows within that time.
   */
  route(slug: string): Promise<WorkspaceRow | undefined>;
  latest(slug: string): Promise<WorkspaceRow | undefined>;
  byId(id: number): Promise<WorkspaceRow | undefined>;
  rows(filter?: { project?: string; states?: readonly WorkspaceStateValue[] }): Promise<WorkspaceRow[]>;
  /** Rows, places in the line and capacity read together (one snapshot), for GET /api/workspaces. */
  listing(filter: { project?: string }, cap: number): Promise<{ rows: WorkspaceRow[]; positions: Map<number, number>; capacity: Capacity }>;
  capacity(cap: number): Promise<Capacity>;
  /** Row id -> 1-based place in the line, for every queued row. */
  queuePositions(): Promise<Map<number, number>>;
  /**
   * Give a free slot to the first in line, atomically: queued -> creating when running + creating < cap.
   * Undefined when no slot is free or nobody waits. Two frees (in this process or another) never promote the same
   * row twice nor exceed the cap. The promoted row comes held (holdOperation) from the moment it is creating, so no
   * reconcile elsewhere takes it for an interrupted fork; its fork or start releases it. A row another process holds
   * (it is cancelling it, or racing a fork of its name) is passed over for the next in line.
   */
  promoteNext(cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; release: Release } | undefined>;
  /**
   * Reserve a slot for a new workspace atomically: a live row with the slug -> workspace_exists; no free slot
   * (see slotFree) -> capacity_reached, or with `queue` the row is inserted as queued at the end of the line
   * (position is its 1-based place); else the row is inserted as creating.
   */
  reserveNew(values: NewWorkspace, cap: number, opts?: { queue?: boolean }): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number | null }>;
  /** Reserve a slot to reopen a stopped workspace: stopped -> creating under the same cap check. */
  reserveStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity }>;
  /** Put a stopped workspace in line to reopen: undefined when a slot is free (reopen it with reserveStart), else stopped -> queued at the end. */
  queueStart(id: number, cap: number): Promise<{ row: WorkspaceRow; capacity: Capacity; position: number } | undefined>;
  /** Update a row; with `from`, only when it is still in that state (returns undefined otherwise). One statement. */
  update(id: number, patch: WorkspacePatch, from?: WorkspaceStateValue): Promise<WorkspaceRow | undefined>;
  /** Activity is not a state change: leave updated_at alone. */
  touch(id: number, at: string): Promise<void>;
  /** Append to the audit trail. Calls from one process are stored (and numbered) in call order. */
  addEvent(slug: string, type: string, data: Record<string, unknown>): Promise<GroveEvent>;
  events(query?: EventQuery): Promise<GroveEvent[]>;
  /** The newest events of these types for a slug, newest first. */
  recentEvents(slug: string, types: readonly string[], limit: number): Promise<GroveEvent[]>;
  /** The newest event of a type for one workspace row (events carry workspaceId in their data). */
  lastEventFor(slug: string, type: string, workspaceId: number): Promise<GroveEvent | undefined>;
  close(): Promise<void>;
}

export function nowIso(): string {
  return new Date().toISOString();
}

/** queuePosition: the row's 1-based place in the line when it is queued (see Registry.queuePositions). */
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

export function capacityOf(counts: ReadonlyArray<{ state: WorkspaceStateValue; n: number }>, cap: number): Capacity {
  const of = (s: WorkspaceStateValue): number => counts.find((r) => r.state === s)?.n ?? 0;
  return { running: of('running'), creating: of('creating'), cap, queued: of('queued') };
}

export function capacityError(c: Capacity): GroveError {
  const line = c.queued > 0 ? `; ${c.queued} ${c.queued === 1 ? 'workspace waits' : 'workspaces wait'} in line for a slot` : '';
  const why = c.running + c.creating >= c.cap ? `all ${c.cap} sandbox slots are in use (${c.running} running, ${c.creating} starting)` : `a slot is about to go to the first in line`;
  return new GroveError('capacity_reached', `${why}${line}; stop or tear down a workspace first, or fork with queue: true to wait in line`, {
    details: { running: c.running, creating: c.creating, cap: c.cap, queued: c.queued },
  });
}

export function existsError(slug: string): GroveError {
  return new GroveError('workspace_exists', `workspace "${slug}" already exists`, { details: { slug } });
}

export function notStopped(cur: WorkspaceRow | undefined): GroveError {
  return new GroveError('invalid_state', `workspace is ${cur?.state ?? 'gone'}, not stopped`, { details: { state: cur?.state ?? null } });
}

/**
 * Whether a new fork or a reopen may take a slot now: one is free and nobody waits in line (a caller
 * never jumps the line; the first in line gets the next free slot through promoteNext).
 */
export function slotFree(c: Capacity): boolean {
  return c.running + c.creating < c.cap && c.queued === 0;
}

/**
 * A unique index refused the row: SQLite's SQLITE_CONSTRAINT_UNIQUE or PostgreSQL's 23505 (unique_violation), on
 * the driver's error or on the DrizzleQueryError wrapping it.
 */
export function isUniqueViolation(e: unknown): boolean {
  for (let cur = e, depth = 0; cur && depth < 3; cur = (cur as { cause?: unknown }).cause, depth++) {
    const code = (cur as { code?: unknown }).code;
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === '23505') return true;
  }
  return false;
}
