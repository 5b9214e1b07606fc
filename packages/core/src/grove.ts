/**
 * The hub: createGrove wires the parts (each taking the one GroveContext: context.ts) and GroveImpl is the `Grove`
 * interface over them, one delegation per method. The lifecycle (lifecycle.ts), the scheduler (scheduler.ts) and
 * the reconciler (reconciler.ts) are handed what they call of each other here, one way: none imports this file.
 */
import { mkdir } from 'node:fs/promises';
import { GroveError, gitSshCommandSchema, parseOrThrow } from '@grove/contracts';
import type { Capacity, ForkRequest, GroveEvent, LastMessage, RestoreRequest, UpdateWorkspaceRequest, Workspace } from '@grove/contracts';
import type { EgressPolicy, EgressResponse } from '@grove/contracts';
import type { ProjectConfig, TeardownPreview, TurnDiffResponse, TurnSummary, UndoResponse } from '@grove/contracts';
import type { CheckpointRequest, ProjectConfigInput, ProjectConfigPatch, PublishRequest, PutOverlayFileRequest } from '@grove/contracts';
import type { CheckpointResponse, DiffResponse, OverlayListResponse, Project, PublishResponse, PullRequestResponse } from '@grove/contracts';
import { SANDBOX_UID } from '@grove/runtime';
import type { WorkspaceLimits } from '@grove/runtime';
import { TurnGuard } from './agents.ts';
import { createContext } from './context.ts';
import type { GroveContext } from './context.ts';
import { DiskWatch } from './disks.ts';
import * as egressPolicy from './egress-policy.ts';
import { canChown } from './fsutil.ts';
import { GitFlow } from './git-flow.ts';
import type { WatchResult } from './git-flow.ts';
import { Lifecycle } from './lifecycle.ts';
import { createPaths } from './paths.ts';
import { WarmPool } from './pool.ts';
import * as projects from './projects.ts';
import * as queries from './queries.ts';
import { Reconciler } from './reconciler.ts';
import * as savedWork from './saved-work.ts';
import { Scheduler } from './scheduler.ts';
import { openRegistry } from './store.ts';
import * as turns from './turns.ts';
import type { AddProjectOptions, Grove, GroveOptions } from './types.ts';
import { Volumes, volumesSupported } from './volume.ts';
import { owner } from './workspace-host.ts';

export const DEFAULT_LIMITS: WorkspaceLimits = { memoryBytes: 512 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 256 };

/** The parts createGrove wires; the facade only delegates to them. */
interface Parts {
  flow: GitFlow;
  guard: TurnGuard;
  disks: DiskWatch;
  lifecycle: Lifecycle;
  scheduler: Scheduler;
  reconciler: Reconciler;
  pool: WarmPool;
}

class GroveImpl implements Grove {
  constructor(
    private readonly ctx: GroveContext,
    private readonly p: Parts,
  ) {}

  // ---- queries (queries.ts) ----

  async listProjects(): Promise<Array<{ name: string; defaultBranch: string; createdAt: string }>> {
    return queries.listProjects(this.ctx);
  }

  async list(filter: { project?: string; includeGone?: boolean } = {}): Promise<{ workspaces: Workspace[]; capacity: Capacity }> {
    const listed = await queries.list(this.ctx, this.p.disks, filter);
    return { ...listed, capacity: this.withWarm(listed.capacity) };
  }

  async capacity(): Promise<Capacity> {
    return this.withWarm(await queries.capacity(this.ctx));
  }

  /** The ready warm sandboxes beside the slots, when there is a pool at all. */
  private withWarm(c: Capacity): Capacity {
    return this.p.pool.enabled ? { ...c, warm: this.p.pool.ready() } : c;
  }

  async get(slug: string): Promise<Workspace> {
    return queries.get(this.ctx, this.p.disks, slug);
  }

  async lastMessage(slug: string): Promise<LastMessage | null> {
    return queries.lastMessage(this.ctx, slug);
  }

  async recentMessages(slug: string): Promise<LastMessage[]> {
    return queries.recentMessages(this.ctx, slug);
  }

  async events(query: { slug?: string; after?: number; limit?: number; type?: string } = {}): Promise<GroveEvent[]> {
    return queries.events(this.ctx, query);
  }

  onEvent(listener: (e: GroveEvent) => void): () => void {
    return this.ctx.onEvent(listener);
  }

  async socketFor(slug: string): Promise<string> {
    return queries.socketFor(this.ctx, slug);
  }

  // ---- the lifecycle (lifecycle.ts) ----

  async addProject(o: AddProjectOptions): Promise<Project> {
    this.ctx.assertOpen();
    return this.p.lifecycle.addProject(o);
  }

  /** The project's default workspace: the live one, or one begun now (lifecycle.ts ensureDefault). */
  async ensureDefault(project: string): Promise<{ workspace: Workspace; created: boolean }> {
    this.ctx.assertOpen();
    return this.p.lifecycle.ensureDefault(project);
  }

  async fork(req: ForkRequest, opts: { wait?: boolean } = {}): Promise<Workspace> {
    this.ctx.assertOpen();
    return this.p.lifecycle.fork(req, opts);
  }

  async update(slug: string, req: UpdateWorkspaceRequest): Promise<Workspace> {
    this.ctx.assertOpen();
    return this.p.lifecycle.update(slug, req);
  }

  async stop(slug: string): Promise<Workspace> {
    return this.p.lifecycle.stop(slug, null);
  }

  async start(slug: string, opts: { queue?: boolean } = {}): Promise<Workspace> {
    this.ctx.assertOpen();
    return this.p.lifecycle.start(slug, opts);
  }

  async teardown(slug: string): Promise<Workspace> {
    return this.p.lifecycle.teardown(slug);
  }

  async teardownPreview(slug: string): Promise<TeardownPreview> {
    return savedWork.teardownPreview(this.ctx, slug);
  }

  // ---- saved work (saved-work.ts) ----

  async savedWork(slug: string): Promise<Array<{ ref: string; n: number; commit: string }>> {
    return savedWork.savedWork(this.ctx, slug);
  }

  async restore(slug: string, req: RestoreRequest, opts: { wait?: boolean } = {}): Promise<Workspace> {
    this.ctx.assertOpen();
    return this.p.lifecycle.fork(await savedWork.restoreRequest(this.ctx, slug, req), opts);
  }

  // ---- egress (egress-policy.ts) ----

  async egress(slug: string, opts: { limit?: number } = {}): Promise<EgressResponse> {
    return egressPolicy.egress(this.ctx, slug, opts);
  }

  async setEgressPolicy(slug: string, policy: EgressPolicy): Promise<EgressPolicy> {
    this.ctx.assertOpen();
    return egressPolicy.setEgressPolicy(this.ctx, this.ctx.runtime, slug, policy);
  }

  async resetEgressPolicy(slug: string): Promise<EgressPolicy> {
    this.ctx.assertOpen();
    return egressPolicy.resetEgressPolicy(this.ctx, this.ctx.runtime, slug);
  }

  // ---- git flow: checkpoints, diff, publish (docs/git-flow.md); the watcher's timer is the scheduler's ----

  async checkpoint(slug: string, req: CheckpointRequest = {}): Promise<CheckpointResponse> {
    this.ctx.assertOpen();
    return this.p.flow.checkpoint(slug, req);
  }

  async diff(slug: string, opts: { maxBytes?: number } = {}): Promise<DiffResponse> {
    return this.p.flow.diff(slug, opts);
  }

  async publish(slug: string, req: PublishRequest = {}): Promise<PublishResponse> {
    this.ctx.assertOpen();
    return this.p.flow.publish(slug, req);
  }

  async pullRequest(slug: string): Promise<PullRequestResponse> {
    return this.p.flow.pullRequest(slug);
  }

  async watchPullRequests(): Promise<WatchResult> {
    return this.p.scheduler.watchPullRequests();
  }

  // ---- projects: config and overlay (projects.ts) ----

  async projectConfig(project: string): Promise<ProjectConfig> {
    return projects.projectConfig(this.ctx, project);
  }

  async overlayFiles(project: string): Promise<OverlayListResponse> {
    return projects.overlayFiles(this.ctx, project);
  }

  async putOverlayFile(project: string, req: PutOverlayFileRequest): Promise<OverlayListResponse> {
    return projects.putOverlayFile(this.ctx, project, req);
  }

  async deleteOverlayFile(project: string, path: string): Promise<OverlayListResponse> {
    return projects.deleteOverlayFile(this.ctx, project, path);
  }

  async setProjectConfig(project: string, config: ProjectConfigInput): Promise<ProjectConfig> {
    this.ctx.assertOpen();
    return projects.setProjectConfig(this.ctx, project, config);
  }

  async patchProjectConfig(project: string, patch: ProjectConfigPatch): Promise<ProjectConfig> {
    this.ctx.assertOpen();
    return projects.patchProjectConfig(this.ctx, project, patch);
  }

  // ---- turns (turns.ts) ----

  async undo(slug: string): Promise<UndoResponse> {
    this.ctx.assertOpen();
    return turns.undo(this.ctx, this.p.guard, slug);
  }

  async turns(slug: string): Promise<TurnSummary[]> {
    return turns.turns(this.ctx, slug);
  }

  async turnDiff(slug: string, n: number): Promise<TurnDiffResponse> {
    return turns.turnDiff(this.ctx, slug, n);
  }

  // ---- reconcile (reconciler.ts) and close ----

  async reconcile(): Promise<void> {
    // Warm sandbox a previous process left are removed first (never handed out twice), and the pool made anew after.
    await this.p.pool.recycle().catch((err: unknown) => this.ctx.log.warn({ err }, 'could not recycle the warm sandboxes of a previous run'));
    await this.p.reconciler.reconcile();
    this.p.pool.refill();
  }

  async close(): Promise<void> {
    return closeGrove(this.ctx, this.p);
  }
}

/** Stop the timers and the event stream, let forks and starts in flight roll back, then close the runtime and the registry. */
async function closeGrove(ctx: GroveContext, p: Parts): Promise<void> {
  if (ctx.closed) return;
  ctx.markClosed();
  p.reconciler.stop();
  p.scheduler.stop();
  p.disks.stop();
  const pending = [...ctx.inflight.values()];
  for (const f of pending) f.abort.abort(new Error('server shutting down'));
  await Promise.allSettled(pending.map((f) => f.task));
  await p.pool.close();
  await ctx.runtime.close();
  await Promise.allSettled(ctx.pending);
  await ctx.store.close();
}

/** Per-workspace disk images when a quota is asked for and this host can make them; else null, with a warning. */
function openVolumes(opts: GroveOptions, paths: ReturnType<typeof createPaths>): Volumes | null {
  if (!opts.diskQuota) return null;
  const ok = volumesSupported();
  if (ok.ok) return new Volumes({ paths, quota: opts.diskQuota, owner: owner() });
  opts.logger.warn({ reason: ok.reason }, `no disk quota for workspaces: ${ok.reason}`);
  return null;
}

/** Open (or create) the Grove home and its registry. Call reconcile() once before serving. */
export async function createGrove(opts: GroveOptions): Promise<Grove> {
  if (!Number.isInteger(opts.maxRunning) || opts.maxRunning < 1) {
    throw new GroveError('invalid_input', `maxRunning must be a positive integer, got ${opts.maxRunning}`);
  }
  const paths = createPaths(opts.home);
  for (const dir of [paths.home, paths.reposRoot, paths.worktreesRoot, paths.threadsRoot, paths.runRoot, paths.stateRoot, paths.locksRoot, paths.archiveRoot]) {
    await mkdir(dir, { recursive: true });
  }
  // DATABASE_URL (a PostgreSQL registry several servers may share), else SQLite in the home.
  const store = await openRegistry(opts.databaseUrl ? { url: opts.databaseUrl, onPoolError: (err) => opts.logger.warn({ err }, 'registry.pool_error') } : { file: paths.db });
  if (!canChown() && process.getuid?.() !== SANDBOX_UID) {
    opts.logger.warn({ uid: process.getuid?.(), sandboxUid: SANDBOX_UID }, 'not running as root: worktrees cannot be handed to the sandbox uid, which may not be able to write them');
  }
  const ctx = createContext(opts, paths, store, { limits: { ...DEFAULT_LIMITS, ...opts.limits }, volumes: openVolumes(opts, paths) });
  const flow = new GitFlow(ctx, {
    forgeToken: opts.forgeToken ?? null,
    sshCommand: opts.gitSshCommand != null ? parseOrThrow(gitSshCommandSchema, opts.gitSshCommand, { what: 'gitSshCommand (GROVE_GIT_SSH_COMMAND)' }) : null,
    owner: owner(),
  });
  // The checkpoint after a turn (and after an undo) is git flow's: the guard is handed it, not a way back into the hub.
  const guard = new TurnGuard(ctx, { owner: owner(), checkpoints: flow });
  ctx.runtime.bind({
    runDir: (slug) => paths.run(slug),
    onTurnEnded: (slug, req) => guard.onTurnEnded(slug, req),
    emit: (slug, type, data) => ctx.emitSoon(slug, type, data),
  });
  const disks = new DiskWatch(ctx, ctx.volumes);
  const pool = new WarmPool(ctx, opts.warmPool ?? 0);
  if ((opts.warmPool ?? 0) > 0 && !pool.enabled) {
    opts.logger.warn({ warmPool: opts.warmPool, runtime: ctx.runtime.name }, 'no warm sandboxes: this runtime keeps none, so every fork starts its own');
  }
  const lifecycle = new Lifecycle(ctx, { flow, disks, pool });
  const scheduler = new Scheduler(ctx, lifecycle, flow);
  const reconciler = new Reconciler(ctx, lifecycle, scheduler);
  return new GroveImpl(ctx, { flow, guard, disks, lifecycle, scheduler, reconciler, pool });
}
