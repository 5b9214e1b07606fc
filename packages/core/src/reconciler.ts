/**
 * The reconciler: rows, sandboxes, worktrees, disk images and locks brought back in line with reality at server
 * start (a crash, SIGKILL or reboot may have cut any operation short), and sandbox deaths followed as they happen.
 * What it finishes or undoes it hands to the lifecycle it is given (an interrupted teardown, a fork's rollback);
 * once done, the scheduler it is given starts the watch timer and gives freed slots to the line.
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { makeSlug, nameSchema, parseSlug } from '@grove/contracts';
import type { Workspace } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import { exitSummary } from '@grove/runtime';
import type { RuntimeEvent, WorkspaceStatus } from '@grove/runtime';
import { reasonOf, releasing } from './context.ts';
import type { GroveContext } from './context.ts';
import * as egressPolicy from './egress-policy.ts';
import { isEmptyDir } from './fsutil.ts';
import { isBareRepo, listWorktrees, prune, removeWorktree, resolveCommit } from './git.ts';
import type { Undo } from './lifecycle.ts';
import { validSlug } from './paths.ts';
import { LIVE_STATES } from './registry.ts';
import * as savedWork from './saved-work.ts';
import { archive, volumeTargets } from './workspace-host.ts';

/** Scheduled fetch of every project and the pull-request watcher (docs/git-flow.md). */
const DEFAULT_WATCH_INTERVAL_MS = 5 * 60_000;

/** The lifecycle's steps the reconciler finishes or undoes. */
export interface ReconciledOps {
  runTeardown(slug: string): Promise<Workspace>;
  rollbackFork(row: WorkspaceRow, undo: Undo): Promise<string[]>;
}

/** What the reconciler starts once it is done: the watch timer, and the line. */
export interface AfterReconcile {
  startWatch(intervalMs: number): void;
  promote(): Promise<void>;
}

export class Reconciler {
  /** Stops following the engine's sandbox events; set once reconcile has run. */
  private unwatch: (() => void) | null = null;

  constructor(
    private readonly ctx: GroveContext,
    private readonly ops: ReconciledOps,
    private readonly after: AfterReconcile,
  ) {}

  async reconcile(): Promise<void> {
    const { ctx } = this;
    const { store, runtime, log } = ctx;
    ctx.assertOpen();
    const t0 = Date.now();
    // Follow sandbox deaths before listing, so one that dies during the reconcile is not missed.
    this.unwatch ??= runtime.watch(
      (e) => void this.onSandboxEvent(e),
      (err) => log.warn({ err }, `lost the sandbox event stream, following it again: ${reasonOf(err)}`),
    );
    const released = await ctx.lock.releaseStale();
    // Disk images first (after a reboot none is mounted): everything below reads the worktrees inside them.
    await this.reconcileVolumes();
    const containers = await runtime.list();
    const listed = new Map(containers.map((c) => [c.slug, c]));
    let touched = 0;
    let held = 0;
    for (const row of await store.rows({ states: LIVE_STATES })) {
      if (ctx.inflight.has(row.slug)) continue; // this process is working on it right now
      // The common case needs neither a hold nor an inspect: a stopped row whose sandbox was not running when
      // listed. Only a stop cut short leaves a stopped row with a running sandbox, and that happened before the
      // listing; a start since then moved the row out of `stopped` first (under its hold).
      if (row.state === 'stopped' && !listed.get(row.slug)?.running) continue;
      try {
        const changed = await ctx.slugs.run(row.slug, () =>
          this.reconcileHeld(row.slug, async () => {
            // Inspected now, under the hold: an operation that finished since the listing above made or removed it.
            const container = (await runtime.poll(row.slug)) ?? undefined;
            return this.reconcileRow(row.id, container);
          }),
        );
        if (changed === null) held++;
        else if (changed) touched++;
      } catch (e) {
        log.error({ err: e, slug: row.slug }, `reconcile of ${row.slug} failed: ${reasonOf(e)}`);
      }
    }
    // Listed again: rolling rows back above already removed some of the containers seen before.
    for (const c of await runtime.list()) {
      if ((await store.live(c.slug)) || ctx.inflight.has(c.slug)) continue;
      try {
        // A fork of this slug elsewhere is held from before its row exists: its container is not an orphan.
        const removed = await this.reconcileHeld(c.slug, async () => {
          if (await store.live(c.slug)) return false;
          await runtime.remove(c.slug);
          await ctx.emit(c.slug, 'workspace.reconciled', { action: 'removed-orphan-container', containerId: c.id });
          return true;
        });
        if (removed) touched++;
      } catch (e) {
        log.error({ err: e, slug: c.slug }, 'could not remove an orphan container');
      }
    }
    for (const p of await store.projects()) {
      try {
        touched += await ctx.lock.withLock(p.name, () => this.reconcileWorktrees(p.name));
      } catch (e) {
        log.error({ err: e, project: p.name }, `worktree reconcile of ${p.name} failed: ${reasonOf(e)}`);
      }
    }
    await this.removeOrphanVolumes();
    await this.reconcileAttachments();
    // From now on the server serves: fetch projects and follow published workspaces' pull requests.
    this.after.startWatch(ctx.opts.watchIntervalMs ?? DEFAULT_WATCH_INTERVAL_MS);
    log.info({ ms: Date.now() - t0, containers: containers.length, changed: touched, held, locksReleased: released.length }, 'reconciled');
    // The line survives a restart (queued rows keep their queue_seq); slots freed while we were down go to it now.
    await this.after.promote();
  }

  /** No more sandbox events (close()). */
  stop(): void {
    this.unwatch?.();
  }

  /**
   * A sandbox died on its own (crash, OOM kill of its backend, `docker kill`): mark the workspace
   * stopped with the reason now, not at the next restart, and free its slot. Its worktree, branch and
   * thread are untouched, so reopening it is the way back. Grove's own stop and teardown hold the
   * slug's mutex while the container dies, so by the time this runs their row is no longer `running`;
   * another server's (the engine is shared) hold the slug, and the event is left to them.
   */
  private async onSandboxEvent(e: RuntimeEvent): Promise<void> {
    const { ctx } = this;
    const { store, runtime, log } = ctx;
    if (ctx.closed) return;
    const { slug } = e;
    try {
      if (e.kind === 'oom') {
        // A process hit the memory limit; the backend may have survived it (the common case: a test
        // runner or build inside the sandbox). Recorded so the card and `grove logs` can say why.
        const row = await store.live(slug);
        if (!row) return;
        log.warn({ slug, limitBytes: ctx.limits.memoryBytes }, `a process in ${slug} was killed for memory`);
        await ctx.emit(slug, 'sandbox.oom', { workspaceId: row.id, limitBytes: ctx.limits.memoryBytes });
        return;
      }
      await ctx.slugs.run(slug, () => this.reconcileHeld(slug, async () => {
        const row = await store.live(slug);
        if (!row || row.state !== 'running' || ctx.closed) return;
        const info = await runtime.poll(slug);
        if (info?.running) return;
        const reason = `the sandbox stopped unexpectedly: it ${exitSummary(info ?? e)}`;
        await runtime.detach(slug);
        const done = await store.update(row.id, { state: 'stopped', failureReason: reason }, 'running');
        if (!done) return;
        log.warn({ slug, exitCode: info?.exitCode ?? e.exitCode, oomKilled: info?.oomKilled ?? false }, reason);
        await ctx.emit(slug, 'sandbox.died', { workspaceId: row.id, exitCode: info?.exitCode ?? e.exitCode, oomKilled: info?.oomKilled ?? false, reason });
      }));
    } catch (err) {
      log.error({ err, slug }, `could not record the death of ${slug}'s sandbox: ${reasonOf(err)}`);
    }
  }

  /**
   * The host side (egress gate, host listeners) for every running workspace, none for the others: it does not
   * survive a server restart, the sandboxes do.
   */
  private async reconcileAttachments(): Promise<void> {
    const { ctx } = this;
    for (const row of await ctx.store.rows({ states: LIVE_STATES })) {
      if (ctx.inflight.has(row.slug)) continue;
      try {
        if (row.state === 'running') await ctx.runtime.attach(row.slug, { egressPolicy: await egressPolicy.policyOf(ctx, row) });
        else await ctx.runtime.detach(row.slug);
      } catch (e) {
        ctx.log.error({ err: e, slug: row.slug }, `egress gate or host listeners of ${row.slug} could not be started: ${reasonOf(e)}`);
      }
    }
  }

  /** Returns true when something changed. */
  private async reconcileRow(id: number, container: WorkspaceStatus | undefined): Promise<boolean> {
    const { ctx } = this;
    const { store, runtime } = ctx;
    const row = await store.byId(id);
    if (!row) return false;
    const { slug } = row;
    switch (row.state) {
      case 'creating': {
        const wasRunning = (await store.lastEventFor(slug, 'workspace.registered', id)) !== undefined;
        if (wasRunning) {
          // An interrupted start: the workspace is real work, never roll it back; leave it stopped.
          await runtime.stop(slug);
          await store.update(id, { state: 'stopped', failureReason: 'start interrupted by a server restart' }, 'creating');
          await ctx.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'creating', to: 'stopped', reason: 'start interrupted by a server restart' });
          return true;
        }
        await this.rollbackInterruptedFork(row);
        return true;
      }
      case 'running': {
        let why: string | null = null;
        // Sentences for the card and the thread (a Docker restart takes every sandbox with it), in the words of
        // the live death's reason above.
        if (!container) why = 'the sandbox was gone when Grove started (Docker or the machine restarted, or it was removed)';
        else if (!container.running) why = `the sandbox had stopped when Grove started: it ${exitSummary(container)}`;
        else {
          const healthy = await runtime.probe(slug);
          if (!healthy.ok) {
            why = `the sandbox did not answer when Grove started: ${healthy.error}`;
            await runtime.stop(slug);
          }
        }
        if (!why) return false;
        await store.update(id, { state: 'stopped', failureReason: why }, 'running');
        await ctx.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'running', to: 'stopped', reason: why });
        return true;
      }
      case 'stopped': {
        if (!container?.running) return false;
        // A stop that was interrupted after the row changed: finish it.
        await runtime.stop(slug);
        await ctx.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'stopped', to: 'stopped', reason: 'container was still running' });
        return true;
      }
      case 'tearing-down': {
        await this.ops.runTeardown(slug);
        await ctx.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'tearing-down', to: 'gone', reason: 'teardown finished' });
        return true;
      }
      default:
        return false;
    }
  }

  /** A fork cut short by a crash or SIGKILL: undo it exactly like a failed fork. */
  private async rollbackInterruptedFork(row: WorkspaceRow): Promise<void> {
    const { ctx } = this;
    const reason = 'interrupted by a server restart';
    const prepared = await ctx.store.lastEventFor(row.slug, 'workspace.prepared', row.id);
    const repo = ctx.paths.repo(row.project);
    const recordedBase = typeof prepared?.data.baseCommit === 'string' ? prepared.data.baseCommit : null;
    const undo: Undo = {
      worktree: true,
      // The branch in a fork row was free when it was reserved, so if it exists now this fork made it. The
      // default workspace reuses grove/default: only trust the event for it.
      branchCreated: prepared ? prepared.data.branchCreated === true : !row.isDefault,
      baseCommit: recordedBase ?? (await ctx.lock.withLock(row.project, () => resolveCommit(repo, row.baseRef)).catch(() => null)),
      volume: true,
    };
    const problems = await this.ops.rollbackFork(row, undo);
    await ctx.store.update(row.id, { state: 'failed', failureReason: reason, containerId: null }, 'creating');
    await ctx.emit(row.slug, 'spawn_failed', { workspaceId: row.id, op: 'fork', step: 'interrupted', reason, ...(problems.length ? { rollbackProblems: problems } : {}) });
    await ctx.emit(row.slug, 'workspace.reconciled', { workspaceId: row.id, from: 'creating', to: 'failed', reason });
  }

  /** Prune worktree admin entries, and remove worktrees under <home>/worktrees/<project> that no live row owns. */
  private async reconcileWorktrees(project: string): Promise<number> {
    const { ctx } = this;
    const { paths } = ctx;
    const repo = paths.repo(project);
    if (!(await isBareRepo(repo))) return 0;
    await prune(repo);
    const root = paths.worktreesOf(project);
    const owned = new Set((await ctx.store.rows({ project, states: LIVE_STATES })).map((r) => paths.worktree(project, r.name)));
    const candidates = new Set<string>();
    for (const e of await listWorktrees(repo)) if (resolve(e.path).startsWith(`${root}/`)) candidates.add(resolve(e.path));
    if (existsSync(root)) for (const n of await readdir(root)) candidates.add(join(root, n));
    const heads = new Map((await listWorktrees(repo)).map((e) => [resolve(e.path), e]));
    let removed = 0;
    for (const path of candidates) {
      if (owned.has(path)) continue;
      const name = basename(path);
      if (!nameSchema.safeParse(name).success) {
        ctx.log.warn({ project, path }, 'leaving a directory Grove did not create under the worktrees root');
        continue;
      }
      // Its work is saved first, on top of whatever it had checked out; a failure keeps it for the next run.
      const head = heads.get(path);
      const parent = head?.branch && /^refs\/heads\/[A-Za-z0-9._/-]+$/.test(head.branch) && !head.branch.includes('..') ? head.branch : head?.head && /^[0-9a-f]{40,64}$/.test(head.head) ? head.head : null;
      await savedWork.saveBeforeRemoval(ctx, { slug: makeSlug(project, name), project, name, parent }, 'reconcile');
      await removeWorktree(repo, path);
      await ctx.emit(makeSlug(project, basename(path)), 'workspace.reconciled', { action: 'removed-orphan-worktree', worktree: basename(path) });
      removed++;
    }
    return removed;
  }

  /**
   * Mount every disk image under <home>/volumes (after a reboot none is): a live workspace's, and an orphan's
   * (a teardown or rolled-back fork cut short) so reconcileWorktrees can save what its worktree holds. Never makes one.
   */
  private async reconcileVolumes(): Promise<void> {
    const { ctx } = this;
    const volumes = ctx.volumes;
    if (!volumes) return;
    for (const slug of await this.volumeSlugs()) {
      if (ctx.inflight.has(slug)) continue;
      try {
        // Held: another server on this host may be forking (making the image) or tearing down that slug right now.
        await this.reconcileHeld(slug, () => volumes.ensure(slug, volumeTargets(ctx, { slug, ...parseSlug(slug) }), { create: false }));
      } catch (e) {
        ctx.log.error({ err: e, slug }, `disk image of ${slug} could not be mounted: ${reasonOf(e)}`);
      }
    }
  }

  /** Delete the disk images no live workspace owns once reconcileWorktrees has saved and removed their worktree. */
  private async removeOrphanVolumes(): Promise<void> {
    const { ctx } = this;
    const volumes = ctx.volumes;
    if (!volumes) return;
    for (const slug of await this.volumeSlugs()) {
      if ((await ctx.store.live(slug)) || ctx.inflight.has(slug)) continue;
      const { project, name } = parseSlug(slug);
      try {
        const removed = await this.reconcileHeld(slug, async () => {
          if (await ctx.store.live(slug)) return false;
          // A worktree whose work could not be saved is still there: its image stays with it.
          const worktree = ctx.paths.worktree(project, name);
          if (existsSync(worktree) && !(await isEmptyDir(worktree))) return false;
          await archive(ctx, slug, ['state']);
          await volumes.destroy(slug);
          return true;
        });
        if (removed) await ctx.emit(slug, 'workspace.reconciled', { action: 'removed-orphan-volume' });
      } catch (e) {
        ctx.log.error({ err: e, slug }, `orphan disk image of ${slug} could not be removed: ${reasonOf(e)}`);
      }
    }
  }

  /** The slugs with a directory under <home>/volumes (anything else there is not Grove's and left alone). */
  private async volumeSlugs(): Promise<string[]> {
    const root = this.ctx.paths.volumesRoot;
    if (!existsSync(root)) return [];
    return (await readdir(root)).filter((n) => {
      try {
        validSlug(n);
        return true;
      } catch {
        return false;
      }
    });
  }

  /**
   * Run fn on a slug unless an operation holds it (another server's fork, start, stop or teardown; this process's
   * own are skipped by the callers through `inflight` and the slug's mutex): then it is left alone, and null.
   */
  private async reconcileHeld<T>(slug: string, fn: () => Promise<T>): Promise<T | null> {
    const release = await this.ctx.store.tryHoldForReconcile(slug);
    if (!release) {
      this.ctx.log.info({ slug }, `reconcile left ${slug} alone: an operation on it is in flight`);
      return null;
    }
    return releasing(release, fn);
  }
}
