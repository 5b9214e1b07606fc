/**
 * The scheduler: who runs when. A new workspace gets a slot under the cap, a place in line, or capacity_reached
 * (admitFork); free slots go to the line (queue promotion, first in line first), running
 * workspaces without activity are stopped (the idle sweep), and the pull-request watcher runs on a timer. It
 * starts, stops and tears down nothing itself: it is handed the lifecycle's operations and calls them.
 */
import type { Capacity, ProjectConfig, Workspace } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { reasonOf, releasing } from './context.ts';
import type { GroveContext } from './context.ts';
import type { GitFlow, WatchResult } from './git-flow.ts';
import { toWorkspace } from './registry.ts';
import type { NewWorkspace, Registry } from './registry.ts';
import { backendStatus } from './workspace-host.ts';

/** The idle sweep runs every half idle period, within these bounds. */
const IDLE_SWEEP_MIN_MS = 50;
const IDLE_SWEEP_MAX_MS = 60_000;

/** What promotion runs for a row given a slot: the fork path, or the reopen of a stopped workspace. */
export interface Launcher {
  /** `config`: the one the fork's request read; absent (promoted from the line), runCreate reads it again. */
  runCreate(row: WorkspaceRow, signal: AbortSignal, config?: ProjectConfig): Promise<Workspace>;
  runStart(id: number, signal: AbortSignal, promoted: { row: WorkspaceRow; capacity: Capacity }): Promise<Workspace>;
}

/** The lifecycle's operations the scheduler calls: promotion's, the idle stop and the watcher's cleanup. */
export interface ScheduledOps extends Launcher {
  stop(slug: string, reason: 'idle' | null): Promise<Workspace>;
  teardown(slug: string): Promise<Workspace>;
}

/**
 * Reserve a slot for a new workspace under the cap (Registry.reserveNew, atomic), or with `queue` a place at the end
 * of the line when none is free; then its fork runs on the slug (wait: this resolves when it is done).
 */
export async function admitFork(
  ctx: GroveContext,
  launcher: Launcher,
  c: { row: NewWorkspace; config: ProjectConfig; queue: boolean | undefined; wait: boolean },
): Promise<Workspace> {
  const { store } = ctx;
  const { slug, branch, baseRef } = c.row;
  // Held from before the row is creating until runCreate has moved it on, so another server's reconcile never
  // sees this fork creating and unheld (and rolls it back as interrupted) while this process lives.
  const release = await store.holdOperation(slug);
  let reserved: Awaited<ReturnType<Registry['reserveNew']>>;
  try {
    reserved = await store.reserveNew(c.row, ctx.opts.maxRunning, { queue: c.queue });
  } catch (e) {
    await release();
    throw e;
  }
  const { row, capacity, position } = reserved;
  if (position !== null) {
    // Nothing is made for a queued workspace until promoteQueue gives it a slot (then runCreate, which reads the config again).
    await release();
    await ctx.emit(slug, 'workspace.queued', { workspaceId: row.id, position, branch, base: baseRef, ...capacity });
    return toWorkspace(row, position);
  }
  ctx.emitSoon(slug, 'workspace.reserved', { workspaceId: row.id, op: 'fork', branch, base: baseRef, ...capacity });
  // Queue on the slug before any await, so a teardown issued right after us waits for (or cancels) this fork.
  const abort = new AbortController();
  const task = ctx.slugs.run(slug, () => releasing(release, () => launcher.runCreate(row, abort.signal, c.config)));
  ctx.track(slug, abort, task);
  if (c.wait) return task;
  task.catch(() => undefined); // recorded in the row, the events and the log by runCreate
  return toWorkspace(row);
}

/**
 * Give free slots to the line, first in line first, and run the normal fork path for each. Called
 * whenever a slot may have freed (stop, teardown, a failed fork or start, idle stop, reconcile). The
 * promotion itself is one atomic transaction (Store.promoteNext), so concurrent calls never start the
 * same workspace twice nor exceed the cap. Never throws.
 */
export async function promoteQueue(ctx: GroveContext, launcher: Launcher): Promise<void> {
  const { store, log } = ctx;
  if (ctx.closed || (await store.capacity(ctx.opts.maxRunning)).queued === 0) return;
  try {
    // With Docker down every promoted fork would fail: the line waits (reconcile promotes once it is back).
    await ctx.runtime.ping();
  } catch (e) {
    log.warn({ err: e }, 'queue.waiting: docker unavailable, the line keeps waiting');
    return;
  }
  for (;;) {
    if (ctx.closed) return;
    let next: Awaited<ReturnType<Registry['promoteNext']>>;
    try {
      next = await store.promoteNext(ctx.opts.maxRunning);
    } catch (e) {
      log.error({ err: e }, `queue promotion failed: ${reasonOf(e)}`);
      return;
    }
    if (!next) return;
    // The promoted row comes held; its fork or start releases it.
    const { row, capacity, release } = next;
    // A row with a worktree was stopped and queued to reopen (a queued fork gets its worktree in runCreate).
    const reopen = row.worktreePath !== null;
    ctx.emitSoon(row.slug, 'workspace.promoted', { workspaceId: row.id, op: reopen ? 'start' : 'fork', ...capacity });
    if (!reopen) ctx.emitSoon(row.slug, 'workspace.reserved', { workspaceId: row.id, op: 'fork', branch: row.branch, base: row.baseRef, ...capacity });
    const abort = new AbortController();
    const task = ctx.slugs.run(row.slug, () =>
      releasing(release, () => (reopen ? launcher.runStart(row.id, abort.signal, { row, capacity }) : launcher.runCreate(row, abort.signal))),
    );
    ctx.track(row.slug, abort, task);
    task.catch(() => undefined); // recorded in the row, the events and the log by runCreate
  }
}

/** The idle sweep and the pull-request watcher's timer, over the lifecycle's operations it is given. */
export class Scheduler {
  private readonly idleTimer: NodeJS.Timeout | null = null;
  private sweeping = false;
  /** The pull-request watcher's timer (once reconcile has run) and its pass in progress. */
  private watchTimer: NodeJS.Timeout | null = null;
  private watching: Promise<WatchResult> | null = null;

  constructor(
    private readonly ctx: GroveContext,
    private readonly ops: ScheduledOps,
    private readonly flow: GitFlow,
  ) {
    const idle = ctx.opts.idleStopMs ?? 0;
    if (idle > 0) {
      const every = Math.min(Math.max(Math.floor(idle / 2), IDLE_SWEEP_MIN_MS), IDLE_SWEEP_MAX_MS);
      this.idleTimer = setInterval(() => void this.idleSweep(idle), every);
      // The sweep never keeps a process alive on its own; close() clears it.
      this.idleTimer.unref();
    }
  }

  /** Give free slots to the line (promoteQueue). Never throws. */
  async promote(): Promise<void> {
    return promoteQueue(this.ctx, this.ops);
  }

  /**
   * Stop running workspaces without activity (a proxied request, or a state change when there was none)
   * for idleMs. A backend in the middle of a turn counts as active: an agent may work long without traffic.
   */
  private async idleSweep(idleMs: number): Promise<void> {
    const { ctx } = this;
    if (ctx.closed || this.sweeping) return;
    this.sweeping = true;
    try {
      for (const row of await ctx.store.rows({ states: ['running'] })) {
        if (ctx.closed) return;
        if (ctx.inflight.has(row.slug) || ctx.slugs.isBusy(row.slug)) continue;
        const now = Date.now();
        const last = Math.max(Date.parse(row.lastActivityAt ?? row.updatedAt), ctx.activity.get(row.slug) ?? 0);
        if (now - last < idleMs) continue;
        // A backend in a turn counts as active; one that does not answer counts as not busy.
        if ((await backendStatus(ctx, row.slug))?.busy === true) {
          ctx.activity.set(row.slug, now);
          await ctx.store.touch(row.id, new Date(now).toISOString());
          continue;
        }
        try {
          await this.ops.stop(row.slug, 'idle');
        } catch (e) {
          ctx.log.warn({ err: e, slug: row.slug }, `idle stop of ${row.slug} failed: ${reasonOf(e)}`);
        }
      }
    } catch (e) {
      ctx.log.error({ err: e }, `idle sweep failed: ${reasonOf(e)}`);
    } finally {
      this.sweeping = false;
    }
  }

  /** Concurrent calls share one pass, its teardowns included. */
  async watchPullRequests(): Promise<WatchResult> {
    this.ctx.assertOpen();
    this.watching ??= this.watchPass().finally(() => {
      this.watching = null;
    });
    return this.watching;
  }

  /** One pass of the watcher; the cleanups it decides are carried out here (the branch is kept, work saved first). */
  private async watchPass(): Promise<WatchResult> {
    const { result, cleanup } = await this.flow.watch();
    for (const d of cleanup) {
      try {
        await this.ops.teardown(d.slug);
      } catch (e) {
        // As when the check itself fails: the change is not reported, and the next pass looks again.
        this.ctx.log.warn({ slug: d.slug, reason: d.reason }, `pull-request check of ${d.slug} failed: ${reasonOf(e)}`);
        result.changed = result.changed.filter((c) => c.slug !== d.slug);
      }
    }
    return result;
  }

  /** Run watchPullRequests every intervalMs (not overlapping itself) until stop(). */
  startWatch(intervalMs: number): void {
    if (this.watchTimer || intervalMs <= 0) return;
    this.watchTimer = setInterval(() => {
      this.watchPullRequests().catch((e: unknown) => this.ctx.log.error({ err: e }, `pull-request watch failed: ${reasonOf(e)}`));
    }, intervalMs);
    this.watchTimer.unref();
  }

  /** Both timers end (close()). */
  stop(): void {
    if (this.idleTimer) clearInterval(this.idleTimer);
    if (this.watchTimer) clearInterval(this.watchTimer);
  }
}
