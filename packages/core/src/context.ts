/**
 * The one context every part of the hub takes (queries, projects, egress policy, saved work, turns, git flow,
 * the lifecycle, the scheduler, the reconciler): the registry, paths, the repository lock, the per-slug mutex,
 * events, the runtime, the disk images, the operations in flight and the options. Built once by createGrove; the
 * parts never call back into the hub, only into this.
 */
import { GroveError } from '@grove/contracts';
import type { EventType, GroveEvent } from '@grove/contracts';
import type { ProjectRow, WorkspaceRow } from '@grove/db';
import type { WorkspaceLimits, WorkspaceRuntime } from '@grove/runtime';
import type { Logger } from 'pino';
import { RepoLock } from './lock.ts';
import { KeyedMutex } from './mutex.ts';
import { validSlug } from './paths.ts';
import type { GrovePaths } from './paths.ts';
import type { Registry, Release } from './registry.ts';
import type { GroveOptions } from './types.ts';
import type { Volumes } from './volume.ts';

const DEFAULT_GIT_LOCK_TIMEOUT_MS = 30_000;

/** A fork or start this process is running: teardown aborts it, reconcile and the idle sweep leave its slug alone. */
export interface InFlight {
  abort: AbortController;
  task: Promise<unknown>;
}

export interface GroveContext {
  /** Everything createGrove was given, the runtime (driver, image, limits) included. */
  readonly opts: GroveOptions;
  readonly paths: GrovePaths;
  readonly store: Registry;
  /** The per-repository lock: every git write of a project runs under it. */
  readonly lock: RepoLock;
  /** One lifecycle operation per workspace at a time in this process. */
  readonly slugs: KeyedMutex;
  readonly log: Logger;
  /** Where workspaces run: their sandboxes, egress gates, host sockets and readiness (@grove/runtime). */
  readonly runtime: WorkspaceRuntime;
  /** Each sandbox's limits (the defaults with the options' over them). */
  readonly limits: WorkspaceLimits;
  /** Per-workspace disk images (the disk and inode quota); null when no quota applies. */
  readonly volumes: Volumes | null;
  /** The forks and starts this process is running, by slug (track adds them). */
  readonly inflight: Map<string, InFlight>;
  /** When each workspace was last active in this process (proxied requests): socketFor writes it, idle stop reads it. */
  readonly activity: Map<string, number>;
  /** Writes that were not awaited (activity touches); close() lets them land before it closes the registry. */
  readonly pending: Set<Promise<void>>;
  /** Set by close(); every part stops starting new work once it is. */
  readonly closed: boolean;
  /**
   * Record a lifecycle event, log it and tell the listeners. The registry stores events in call order, so callers
   * that do not wait (audit decisions, hooks) keep their order too; lifecycle steps await it, so an event is in
   * the trail before the step after it runs.
   */
  emit(slug: string, type: EventType, data: Record<string, unknown>): Promise<GroveEvent>;
  /**
   * emit without waiting, where the caller must not yield before its next step (queueing on the slug right after
   * a reservation) or cannot wait (hooks, audit decisions). The event still lands in call order; a failure to
   * record it is logged.
   */
  emitSoon(slug: string, type: EventType, data: Record<string, unknown>): void;
  /** Subscribe to events as they are written. Returns an unsubscribe function. */
  onEvent(listener: (e: GroveEvent) => void): () => void;
  /** Run an operation that moves the slug's row through transient states, holding it (Registry.holdOperation). */
  holding<T>(slug: string, fn: () => Promise<T>): Promise<T>;
  /** Record a fork or start in flight until its task settles. */
  track(slug: string, abort: AbortController, task: Promise<unknown>): void;
  /** Throws once close() has begun. */
  assertOpen(): void;
  /** Marks the context closed (close() of the hub, once). */
  markClosed(): void;
}

export function reasonOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

export function createContext(opts: GroveOptions, paths: GrovePaths, store: Registry, parts: { limits: WorkspaceLimits; volumes: Volumes | null }): GroveContext {
  const inflight = new Map<string, InFlight>();
  const listeners = new Set<(e: GroveEvent) => void>();
  const log = opts.logger;
  let closed = false;
  const emit = async (slug: string, type: EventType, data: Record<string, unknown>): Promise<GroveEvent> => {
    const e = await store.addEvent(slug, type, data);
    log.info({ slug, event: type, ...data }, `${type} ${slug}`);
    for (const l of listeners) {
      try {
        l(e);
      } catch (err) {
        log.warn({ err }, 'an event listener threw');
      }
    }
    return e;
  };
  return {
    opts,
    paths,
    store,
    log,
    lock: new RepoLock({
      dir: paths.locksRoot,
      fileFor: (project) => paths.lockFile(project),
      timeoutMs: opts.gitLockTimeoutMs ?? DEFAULT_GIT_LOCK_TIMEOUT_MS,
      logger: log,
    }),
    slugs: new KeyedMutex(),
    runtime: opts.runtime,
    limits: parts.limits,
    volumes: parts.volumes,
    inflight,
    activity: new Map(),
    pending: new Set(),
    get closed() {
      return closed;
    },
    emit,
    emitSoon: (slug, type, data) => {
      emit(slug, type, data).catch((err: unknown) => log.error({ err, slug, event: type }, `could not record ${type} for ${slug}: ${reasonOf(err)}`));
    },
    onEvent: (listener) => {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
    holding: async (slug, fn) => releasing(await store.holdOperation(slug), fn),
    track: (slug, abort, task) => {
      inflight.set(slug, { abort, task });
      const done = (): void => {
        if (inflight.get(slug)?.task === task) inflight.delete(slug);
      };
      task.then(done, done);
    },
    assertOpen: () => {
      if (closed) throw new GroveError('internal', 'this Grove instance is closed');
    },
    markClosed: () => {
      closed = true;
    },
  };
}

export function notFound(slug: string): GroveError {
  return new GroveError('workspace_not_found', `no workspace "${slug}"`, { details: { slug } });
}

export function invalidState(row: WorkspaceRow, action: string): GroveError {
  const why = row.state === 'failed' && row.failureReason ? ` (${row.failureReason}); tear it down and fork again` : '';
  return new GroveError('invalid_state', `cannot ${action} workspace "${row.slug}": it is ${row.state}${why}`, {
    details: { slug: row.slug, state: row.state },
  });
}

/** The live row of slug; a failed last attempt is invalid_state (tear it down first), none at all workspace_not_found. */
export async function requireLive(ctx: GroveContext, slug: string): Promise<WorkspaceRow> {
  validSlug(slug);
  const row = await ctx.store.live(slug);
  if (row) return row;
  const last = await ctx.store.latest(slug);
  if (last?.state === 'failed') throw invalidState(last, 'use');
  throw notFound(slug);
}

/** The live row of slug, else its newest (failed or gone) one; workspace_not_found when it never existed. */
export async function requireAny(ctx: GroveContext, slug: string): Promise<WorkspaceRow> {
  validSlug(slug);
  const row = (await ctx.store.live(slug)) ?? (await ctx.store.latest(slug));
  if (!row) throw notFound(slug);
  return row;
}

export async function requireProject(ctx: GroveContext, name: string): Promise<ProjectRow> {
  const p = await ctx.store.project(name);
  if (!p) throw new GroveError('project_not_found', `no project "${name}"; add it first`, { details: { project: name } });
  return p;
}

/** Run fn, then end the hold (a Release never rejects). */
export async function releasing<T>(release: Release, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    await release();
  }
}
