/**
 * The lifecycle: fork, start, stop and teardown of a workspace as explicit steps. A fork prepares the worktree,
 * then the host dirs, then brings the sandbox up through the runtime; what each step made is recorded in an Undo,
 * and a failure rolls back exactly that (rollbackFork, which the reconciler also runs for a fork a crash cut
 * short). Each operation reads the project config once and passes it on. A slot freed here goes to the line
 * (promoteQueue, handed this lifecycle to run what it promotes).
 */
import {
  DEFAULT_WORKSPACE_NAME,
  GroveError,
  forkRequestSchema,
  isGroveError,
  makeSlug,
  parseOrThrow,
  parseRecoveryRef,
  updateWorkspaceRequestSchema,
  workspaceNameSchema,
} from '@grove/contracts';
import type { Capacity, ForkRequest, ProjectConfig, Project, UpdateWorkspaceRequest, Workspace } from '@grove/contracts';
import type { ProjectRow, WorkspaceRow } from '@grove/db';
import { invalidState, notFound, reasonOf, requireLive } from './context.ts';
import type { GroveContext } from './context.ts';
import type { DiskWatch } from './disks.ts';
import { chownTree, removeDir } from './fsutil.ts';
import { deleteBranchIfEmpty, ensureWorktree, freshBranch, removeWorktree, resolveCommit } from './git.ts';
import type { GitFlow } from './git-flow.ts';
import { copyWritable } from './overlay.ts';
import { validProject, validSlug } from './paths.ts';
import * as projects from './projects.ts';
import { view } from './queries.ts';
import { capacityError, nowIso, slotFree, toWorkspace } from './registry.ts';
import type { WarmPool, WarmSandbox } from './pool.ts';
import { pullHeadRef, pullOfRef } from './remote.ts';
import * as savedWork from './saved-work.ts';
import { admitFork, promoteQueue } from './scheduler.ts';
import { clearSnapshots } from './turn-snapshots.ts';
import type { AddProjectOptions } from './types.ts';
import { OWNER, archive, backendStatus, owner, prepareDirs, prepareSandboxGit, spec, volumeTargets } from './workspace-host.ts';

/** sun_path is 108 bytes on Linux including the terminating NUL; a longer path can never be connected to. */
const MAX_SOCKET_PATH_BYTES = 107;

type Step = 'worktree' | 'dirs' | 'egress' | 'image' | 'container' | 'health' | 'register';

/** A failure whose message is already the reason a user should read. */
class StepFailure extends Error {
  override name = 'StepFailure';
}

/** What a fork did so far, so a rollback undoes exactly that. */
export interface Undo {
  worktree: boolean;
  branchCreated: boolean;
  baseCommit: string | null;
  /** The workspace's disk image may exist (it is made before the worktree is added in it). */
  volume: boolean;
  /** The warm sandbox this fork took (pool.ts): removed on a rollback, never handed out again. */
  warm?: WarmSandbox | null;
}

/** spawn_failed for everything except an unreachable Docker engine, which keeps its own 503 code. */
function spawnError(e: unknown, reason: string, details: Record<string, unknown>): GroveError {
  const code = isGroveError(e) && e.code === 'docker_unavailable' ? 'docker_unavailable' : 'spawn_failed';
  return new GroveError(code, reason, { cause: e, details });
}

function parseForkRequest(req: unknown): ForkRequest {
  if (typeof req !== 'object' || req === null) throw new GroveError('invalid_input', 'invalid fork request: expected an object');
  const r = req as Record<string, unknown>;
  // Names first, so a bad name answers invalid_name with the rule it broke rather than a generic invalid_input.
  validProject(r.project);
  parseOrThrow(workspaceNameSchema, r.name, { what: 'workspace name', code: 'invalid_name' });
  return parseOrThrow(forkRequestSchema, req, { what: 'fork request' });
}

function checkAbort(signal: AbortSignal): void {
  if (signal.aborted) throw new StepFailure(reasonOf(signal.reason));
}

/** What create() is asked to make: the project with the config its caller read, and where the fork starts. */
interface CreateRequest {
  project: ProjectRow;
  config: ProjectConfig;
  name: string;
  isDefault: boolean;
  baseRef: string;
  wait: boolean;
  queue?: boolean;
  keepCheckoutOnClose?: boolean;
}

/** The lifecycle's collaborators: git flow (fetch before fork, pull-request bases) and the disk watch (teardown forgets). */
export interface LifecycleParts {
  flow: GitFlow;
  disks: DiskWatch;
  /** Warm sandboxes a fork takes instead of starting one (pool.ts). */
  pool: WarmPool;
}

export class Lifecycle {
  constructor(
    private readonly ctx: GroveContext,
    private readonly parts: LifecycleParts,
  ) {}

  // ---- fork ----

  /** Register a project, then (unless told not to) fork its default workspace with the config registering read. */
  async addProject(o: AddProjectOptions): Promise<Project> {
    const { project, config } = await projects.registerProject(this.ctx, o, { sshCommand: this.parts.flow.sshCommand });
    const shape: Project = { name: project.name, defaultBranch: project.defaultBranch, createdAt: project.createdAt };
    if (o.createDefault === false || (await this.ctx.store.live(project.name))) return shape;
    try {
      await this.create({ project, config, name: DEFAULT_WORKSPACE_NAME, isDefault: true, baseRef: project.defaultBranch, wait: true });
    } catch (e) {
      // Created concurrently by another caller: that is the state we wanted.
      if (isGroveError(e) && e.code === 'workspace_exists') return shape;
      throw e;
    }
    return shape;
  }

  /**
   * The project's default workspace (its one conversation): the live one as it is, or one begun now (created: true),
   * not waited for and in line at the cap, so whoever asked (a first message) is never refused. A project added by the
   * API or the CLI gets its default this way, when someone first writes to it, with the config and overlay set by then.
   */
  async ensureDefault(asked: string): Promise<{ workspace: Workspace; created: boolean }> {
    const projectName = validProject(asked);
    let live = await this.ctx.store.live(projectName);
    if (live?.state === 'tearing-down') {
      // Closing right now ("Start a new conversation" pressed while the old one is torn down): the teardown holds the
      // slug's mutex in this process, so the next one is begun once it is gone instead of answering with the closing
      // one. One torn down by another server, or cut short by a crash, is still answered as it is.
      await this.ctx.slugs.run(projectName, async () => undefined);
      live = await this.ctx.store.live(projectName);
    }
    if (live) return { workspace: await view(this.ctx, live), created: false };
    const { project, config } = await projects.loadProject(this.ctx, projectName);
    try {
      const workspace = await this.create({ project, config, name: DEFAULT_WORKSPACE_NAME, isDefault: true, baseRef: project.defaultBranch, wait: false, queue: true });
      return { workspace, created: true };
    } catch (e) {
      // Begun concurrently by another caller (two tabs' first messages): theirs is the one.
      const again = isGroveError(e) && e.code === 'workspace_exists' ? await this.ctx.store.live(projectName) : undefined;
      if (again) return { workspace: await view(this.ctx, again), created: false };
      throw e;
    }
  }

  async fork(req: ForkRequest, opts: { wait?: boolean } = {}): Promise<Workspace> {
    const { project, name, from, queue, pullRequest, keepCheckoutOnClose } = parseForkRequest(req);
    // The one read of the config for this fork: one edited into something invalid is refused before a slot is taken.
    const { project: proj, config } = await projects.loadProject(this.ctx, project);
    // A pull request's head is fetched when the fork runs (runCreate); until then the base names where it will be.
    // Saved work (a recovery ref) lives in its workspace's private store: copied into the primary first.
    const saved = from ? parseRecoveryRef(from) : null;
    const baseRef = pullRequest ? pullHeadRef(pullRequest) : saved ? await savedWork.savedWorkBase(this.ctx, project, saved) : (from ?? proj.defaultBranch);
    return this.create({ project: proj, config, name, isDefault: false, baseRef, wait: opts.wait ?? true, queue: queue ?? false, keepCheckoutOnClose });
  }

  /** PATCH /api/workspaces/:slug: the workspace's own settings (keepCheckoutOnClose; null: the project's). */
  async update(slug: string, req: UpdateWorkspaceRequest): Promise<Workspace> {
    const body = parseOrThrow(updateWorkspaceRequestSchema, req, { what: 'workspace settings' });
    const row = await requireLive(this.ctx, slug);
    if (body.keepCheckoutOnClose === undefined) return toWorkspace(row);
    const updated = await this.ctx.store.update(row.id, { keepCheckoutOnClose: body.keepCheckoutOnClose });
    if (!updated) throw notFound(slug);
    return toWorkspace(updated);
  }

  /** A new workspace: refused early when it cannot be, its branch chosen, then admitted by the scheduler (admitFork). */
  private async create(c: CreateRequest): Promise<Workspace> {
    const { ctx } = this;
    const { paths, store } = ctx;
    const { project, config, name, isDefault, baseRef, wait, queue, keepCheckoutOnClose } = c;
    const slug = validSlug(makeSlug(project.name, name));
    const socketBytes = Buffer.byteLength(paths.socket(slug));
    if (socketBytes > MAX_SOCKET_PATH_BYTES) {
      throw new GroveError(
        'invalid_name',
        `name too long for this GROVE_HOME: the backend socket path would be ${socketBytes} bytes, over the ${MAX_SOCKET_PATH_BYTES}-byte limit of Unix sockets; choose a shorter name`,
        { details: { slug } },
      );
    }
    // Fail before reserving anything when Docker is down (503, nothing to undo).
    await ctx.runtime.ping();
    // Cheap early answers, so refused forks do not queue on the repository lock below (the transaction
    // in reserveNew is what actually decides).
    if (await store.live(slug)) throw new GroveError('workspace_exists', `workspace "${slug}" already exists`, { details: { slug } });
    const pre = await store.capacity(ctx.opts.maxRunning);
    if (!queue && !slotFree(pre)) throw capacityError(pre);
    // The branch is chosen before the reservation and recorded in the row, so a crash at any later point
    // still knows which branch this fork created. Only forks of this slug could create it meanwhile, and
    // the live-slug unique index serializes those.
    const repo = paths.repo(project.name);
    const branch = isDefault ? 'grove/default' : await ctx.lock.withLock(project.name, () => freshBranch(repo, name));
    return admitFork(ctx, this, { row: { slug, project: project.name, name, isDefault, branch, baseRef, keepCheckoutOnClose: keepCheckoutOnClose ?? null }, config, queue, wait });
  }

  /**
   * The fork's steps on a reserved row: the worktree, the host dirs, the sandbox. `config`: the one fork() read;
   * absent (a queued fork, promoted), it is read now, as it may have changed while the fork waited.
   */
  async runCreate(reserved: WorkspaceRow, signal: AbortSignal, given?: ProjectConfig): Promise<Workspace> {
    const { ctx } = this;
    const t0 = Date.now();
    const askedAt = performance.now();
    const { slug } = reserved;
    let row = reserved;
    // Cancelled (torn down) between its promotion and this turn on the slug: nothing was made, nothing to undo.
    const now = await ctx.store.byId(reserved.id);
    if (now?.state !== 'creating') throw invalidState(now ?? reserved, 'create');
    const undo: Undo = { worktree: false, branchCreated: false, baseCommit: null, volume: false, warm: null };
    let step: Step = 'worktree';
    try {
      const config = given ?? (await projects.readConfig(ctx, row.project));
      const { pool } = this.parts;
      undo.warm = await pool.take(row.project, config, ctx.paths.worktree(row.project, row.name));
      // No warm sandbox for this fork: one that holds the slot it needs gives way.
      if (!undo.warm) await pool.giveWay();
      const wt = await this.prepareWorktree(row, undo, config, askedAt);
      row = wt.row;
      await ctx.emit(slug, 'workspace.prepared', {
        workspaceId: row.id,
        branch: row.branch,
        base: row.baseRef,
        baseCommit: wt.baseCommit,
        branchCreated: wt.createdBranch,
        reused: wt.reused,
        ms: Date.now() - t0,
      });
      checkAbort(signal);

      step = 'dirs';
      // A warm sandbox's dirs are the workspace's already (prepareWorktree archived what an earlier one left).
      await prepareDirs(ctx, slug, { fresh: !undo.warm });
      checkAbort(signal);

      const { running, containerId, warm } = await this.bringUp(row, signal, { verb: 'created', config, at: (s) => (step = s), warm: undo.warm });
      row = running;
      if (undo.warm) await this.parts.pool.claimed(undo.warm);
      await ctx.emit(slug, 'workspace.registered', { workspaceId: row.id, branch: row.branch, containerId, warm, ms: Date.now() - t0 });
      return toWorkspace(running);
    } catch (e) {
      const reason = reasonOf(e);
      ctx.log.error({ err: e, slug, step }, `fork of ${slug} failed at ${step}: ${reason}`);
      const problems = await this.rollbackFork(row, undo);
      await ctx.store.update(row.id, { state: 'failed', failureReason: reason, containerId: null });
      await ctx.emit(slug, 'spawn_failed', { workspaceId: row.id, op: 'fork', step, reason, ms: Date.now() - t0, ...(problems.length ? { rollbackProblems: problems } : {}) });
      void promoteQueue(ctx, this); // the slot this fork held is free again
      throw spawnError(e, reason, { slug, step });
    }
  }

  /**
   * The fork's first step, under the repository lock: fetch (or share one that started after askedAt), the base (a
   * pull request's head), the disk image, the worktree on its branch, the sandbox's git dir and the writable overlay
   * copies. Records in `undo` what it made.
   */
  private async prepareWorktree(
    reserved: WorkspaceRow,
    undo: Undo,
    config: ProjectConfig,
    askedAt: number,
  ): Promise<{ row: WorkspaceRow; baseCommit: string; createdBranch: boolean; reused: boolean }> {
    const { ctx } = this;
    const { paths, store } = ctx;
    const { slug, project } = reserved;
    let row = reserved;
    const repo = paths.repo(project);
    const path = paths.worktree(project, row.name);
    // Where the step's time goes, per sub-step, in a debug log line ('fork worktree step'): for profiling a fork.
    const laps: Record<string, number> = {};
    let last = Date.now();
    const lap = (what: string): void => {
      const t = Date.now();
      laps[what] = t - last;
      last = t;
    };
    return ctx.lock.withLock(project, async () => {
      lap('lock');
      // A fetch another fork ran while this one waited for the lock is shared, not run again.
      await this.parts.flow.fetchBeforeFork(project, slug, askedAt);
      lap('fetch');
      const pr = pullOfRef(row.baseRef);
      if (pr !== null) {
        const base = await this.parts.flow.pullRequestBase(project, slug, { workspaceId: row.id, n: pr });
        if (base !== row.baseRef) row = (await store.update(row.id, { baseRef: base })) ?? row;
      }
      const baseCommit = await resolveCommit(repo, row.baseRef);
      if (!baseCommit) throw new StepFailure(`base "${row.baseRef}" is not a branch, tag or commit of project "${project}"`);
      undo.baseCommit = baseCommit;
      lap('base');
      // A new workspace under an old slug starts its own turn numbers: no undo into its predecessor. Its own store and
      // refs, which nothing below touches, so cleared alongside the rest (and always waited for within the lock).
      const clearing = clearSnapshots({ repo, objects: paths.workspaceObjects(slug), slug });
      clearing.catch(() => undefined);
      try {
        return await this.placeWorktree(row, undo, config, { path, repo, baseCommit, lap, laps, clearing });
      } catch (e) {
        await clearing.catch(() => undefined);
        throw e;
      }
    });
  }

  /** prepareWorktree once the base is known: the dirs, the worktree on its branch, the sandbox's git dir, the overlay. */
  private async placeWorktree(
    reserved: WorkspaceRow,
    undo: Undo,
    config: ProjectConfig,
    o: { path: string; repo: string; baseCommit: string; lap: (what: string) => void; laps: Record<string, number>; clearing: Promise<void> },
  ): Promise<{ row: WorkspaceRow; baseCommit: string; createdBranch: boolean; reused: boolean }> {
    const { ctx } = this;
    const { paths, store } = ctx;
    const { slug, project } = reserved;
    const { path, repo, baseCommit, lap } = o;
    const row = (await store.update(reserved.id, { worktreePath: path })) ?? reserved;
    undo.worktree = true;
    // The disk quota: the worktree is added inside the workspace's disk image, so it is mounted first, over
    // empty dirs (what an earlier workspace of this slug left there is archived or removed).
    undo.volume = true;
    // The warm sandbox's worktree, checked out ahead (and moved to the base when that is another commit): the fork's
    // branch is made there (takeWorktree) rather than a worktree added.
    let adopted: string | null = null;
    if (undo.warm) {
      const prepared = await this.parts.pool.takeWorktree(undo.warm, row.branch, baseCommit);
      if (prepared) undo.branchCreated = true;
      lap('take');
      // The warm sandbox's dirs take the workspace's places, over nothing (an earlier workspace's are archived or removed).
      await archive(ctx, slug, ['thread', 'state']);
      await removeDir(paths.run(slug));
      await removeDir(paths.sandboxGit(slug));
      adopted = await this.parts.pool.moveInto(undo.warm, row, { prepared });
    } else if (ctx.volumes) {
      await archive(ctx, slug, ['state']);
      await removeDir(paths.sandboxGit(slug));
      await ctx.volumes.ensure(slug, volumeTargets(ctx, row), { create: true });
    }
    lap('dirs');
    const saveTarget = row;
    const r = adopted
      ? { reused: false, createdBranch: true, adminDir: adopted }
      : await ensureWorktree(repo, { path, branch: row.branch, base: baseCommit, beforeRemove: () => savedWork.saveBeforeRemoval(ctx, saveTarget, 'fork') });
    undo.branchCreated = r.createdBranch;
    lap('worktree');
    await o.clearing;
    lap('snapshots');
    // A prepared worktree was the agent's user's before its sandbox started, and host git wrote nothing in it since.
    if (!adopted) await chownTree(path, OWNER.uid, OWNER.gid);
    lap('chown');
    await prepareSandboxGit(ctx, row, r.adminDir, { fresh: true });
    lap('sandboxGit');
    // Writable overlay files are copied once, at fork; from then on they are the workspace's own.
    const refused = await copyWritable(await projects.currentOverlay(ctx, project, config), path, owner());
    if (refused.length) ctx.log.warn({ slug, refused }, 'overlay files not copied: a symlink or a non-directory is in the way');
    lap('overlay');
    ctx.log.debug({ slug, warm: Boolean(undo.warm), laps: o.laps }, 'fork worktree step');
    return { row, baseCommit, createdBranch: r.createdBranch, reused: r.reused };
  }

  /**
   * The steps fork and start share once the worktree and dirs are ready: the runtime's start (egress gate, image,
   * container, health), then creating -> running. `at` records the current step for the caller's failure report.
   */
  private async bringUp(
    reserved: WorkspaceRow,
    signal: AbortSignal,
    o: { verb: 'created' | 'started'; config: ProjectConfig; at: (step: Step) => void; warm?: WarmSandbox | null },
  ): Promise<{ running: WorkspaceRow; containerId: string; warm: boolean }> {
    const { ctx } = this;
    let row = reserved;
    // What the sandbox is given is prepared on the host first (overlay targets, env, policy) from the caller's config.
    const workspace = await spec(ctx, row, o.config);
    checkAbort(signal);
    let warm = o.warm ?? null;
    const startOptions = {
      signal,
      onStep: o.at,
      onSandbox: async (sandbox: { id: string; image: string; ms: number }) => {
        await ctx.emit(row.slug, 'sandbox.started', { workspaceId: row.id, containerId: sandbox.id, image: sandbox.image, ms: sandbox.ms, ...(warm ? { warm: true } : {}) });
        row = (await ctx.store.update(row.id, { containerId: sandbox.id })) ?? row;
      },
    };
    let info: { id: string };
    if (warm && workspace.overlay.length > 0) {
      // A read-only overlay file appeared since the take: its mount needs a container started with it.
      ctx.log.info({ slug: row.slug, pool: warm.id }, 'overlay files to mount: starting cold instead of the warm sandbox');
      await this.dropWarm(row.slug, warm);
      warm = null;
    }
    if (warm) {
      try {
        info = await ctx.runtime.claimWarm(warm.id, workspace, startOptions);
      } catch (e) {
        if (signal.aborted) throw e;
        // Its dirs are the workspace's now, so a cold sandbox on them is the same workspace; the warm one goes.
        ctx.log.warn({ err: e, slug: row.slug, pool: warm.id }, `claiming the warm sandbox failed, starting cold: ${reasonOf(e)}`);
        await this.dropWarm(row.slug, warm);
        warm = null;
        info = await ctx.runtime.start(workspace, startOptions);
      }
    } else {
      info = await ctx.runtime.start(workspace, startOptions);
    }

    o.at('register');
    const running = await ctx.store.update(row.id, { state: 'running', failureReason: null, lastActivityAt: nowIso() }, 'creating');
    if (!running) throw new StepFailure(`the workspace left the creating state while it was being ${o.verb}`);
    return { running, containerId: info.id, warm: warm !== null };
  }

  /** A taken warm sandbox that will not serve this fork: renamed already or not, it is removed. */
  private async dropWarm(slug: string, warm: WarmSandbox): Promise<void> {
    await this.ctx.runtime.remove(slug);
    await this.parts.pool.release(warm);
  }

  /** Undo a fork: container, worktree (+ the branch when this fork created it and it holds no work), dirs, thread. Never throws. */
  async rollbackFork(row: WorkspaceRow, undo: Undo): Promise<string[]> {
    const { ctx } = this;
    const { paths } = ctx;
    const problems: string[] = [];
    const attempt = async (what: string, fn: () => Promise<unknown>): Promise<boolean> => {
      try {
        await fn();
        return true;
      } catch (e) {
        problems.push(`${what}: ${reasonOf(e)}`);
        ctx.log.warn({ err: e, slug: row.slug }, `rollback of ${row.slug}: ${what} failed`);
        return false;
      }
    };
    // The sandbox with its gate and host listeners (the runtime ends those even when the removal fails).
    await attempt('remove container', () => ctx.runtime.remove(row.slug));
    // A warm sandbox it took, still under its pool name: removed, never handed out again.
    const warm = undo.warm;
    if (warm) await attempt('remove warm sandbox', () => this.parts.pool.release(warm));
    let worktreeGone = true;
    if (undo.worktree) {
      worktreeGone = await attempt('remove worktree', () =>
        ctx.lock.withLock(row.project, async () => {
          const repo = paths.repo(row.project);
          // A fork never served anyone, so this is normally a no-op; when it cannot save, the worktree stays.
          await savedWork.saveBeforeRemoval(ctx, row, 'rollback');
          await removeWorktree(repo, paths.worktree(row.project, row.name));
          if (undo.branchCreated && undo.baseCommit) await deleteBranchIfEmpty(repo, row.branch, undo.baseCommit);
        }),
      );
    }
    await attempt('remove run, state and sandbox git dirs', async () => {
      await removeDir(paths.run(row.slug));
      await removeDir(paths.state(row.slug));
      await removeDir(paths.sandboxGit(row.slug));
    });
    await attempt('archive thread', () => archive(ctx, row.slug, ['thread']));
    // The disk image goes with the worktree in it; a worktree kept because its work could not be saved keeps it.
    const volumes = ctx.volumes;
    if (undo.volume && worktreeGone && volumes) await attempt('remove disk image', () => volumes.destroy(row.slug));
    return problems;
  }

  // ---- stop / start ----

  /** Stop a running workspace; reason 'idle' when the idle sweep does it. The freed slot goes to the line. */
  async stop(slug: string, reason: 'idle' | null): Promise<Workspace> {
    const { ctx } = this;
    const { store } = ctx;
    ctx.assertOpen();
    const row = await requireLive(ctx, slug);
    if (row.state === 'stopped') return toWorkspace(row);
    if (row.state === 'queued' && row.worktreePath !== null) {
      // Queued to reopen: stopping it means leaving the line and staying stopped.
      const left = await store.update(row.id, { state: 'stopped', queueSeq: null }, 'queued');
      if (left) {
        await ctx.emit(slug, 'workspace.stopped', { workspaceId: row.id, ms: 0, reason: 'left the line' });
        return toWorkspace(left);
      }
      return this.stop(slug, reason); // promoted meanwhile: stop it as usual
    }
    if (row.state !== 'running') throw invalidState(row, 'stop');
    // Held while the container stops under a running row: another server's reconcile would take it for dead.
    const stopped = await ctx.slugs.run(slug, () => ctx.holding(slug, async () => {
      const cur = await store.byId(row.id);
      if (!cur) throw notFound(slug);
      if (cur.state === 'stopped') return toWorkspace(cur);
      if (cur.state !== 'running') throw invalidState(cur, 'stop');
      const t0 = Date.now();
      // Kept so a reopened workspace resumes the agent's session (best effort).
      const id = (await backendStatus(ctx, slug))?.agentSessionId;
      const agentSessionId = typeof id === 'string' && id ? id : null;
      await ctx.runtime.stop(slug);
      const done = await store.update(cur.id, { state: 'stopped', ...(agentSessionId ? { agentSessionId } : {}) }, 'running');
      if (!done) throw invalidState((await store.byId(cur.id)) ?? cur, 'stop');
      await ctx.emit(slug, 'workspace.stopped', { workspaceId: cur.id, ms: Date.now() - t0, ...(reason ? { reason } : {}), ...(agentSessionId ? { agentSessionId } : {}) });
      return toWorkspace(done);
    }));
    await promoteQueue(ctx, this);
    return stopped;
  }

  async start(slug: string, opts: { queue?: boolean } = {}): Promise<Workspace> {
    const { ctx } = this;
    const row = await requireLive(ctx, slug);
    if (row.state === 'running') return toWorkspace(row);
    if (row.state === 'queued' && opts.queue) return view(ctx, row);
    if (row.state !== 'stopped') throw invalidState(row, 'start');
    await ctx.runtime.ping();
    if (opts.queue) {
      const queued = await ctx.store.queueStart(row.id, ctx.opts.maxRunning);
      if (queued) {
        await ctx.emit(slug, 'workspace.queued', { workspaceId: row.id, op: 'start', position: queued.position, ...queued.capacity });
        return toWorkspace(queued.row, queued.position);
      }
    }
    const abort = new AbortController();
    const task = ctx.slugs.run(slug, () => ctx.holding(slug, () => this.runStart(row.id, abort.signal)));
    ctx.track(slug, abort, task);
    return task;
  }

  /** Reopen a stopped workspace; `promoted`: its slot was already given to it by promoteQueue. */
  async runStart(id: number, signal: AbortSignal, promoted?: { row: WorkspaceRow; capacity: Capacity }): Promise<Workspace> {
    const { ctx } = this;
    const { paths, store } = ctx;
    const cur = await store.byId(id);
    if (cur?.state === 'running') return toWorkspace(cur); // a concurrent start won
    if (promoted && cur?.state !== 'creating') throw invalidState(cur ?? promoted.row, 'start'); // left the line meanwhile
    const t0 = Date.now();
    const { row, capacity } = promoted ?? (await store.reserveStart(id, ctx.opts.maxRunning));
    const { slug, project } = row;
    await ctx.emit(slug, 'workspace.reserved', { workspaceId: id, op: 'start', ...capacity });
    let step: Step = 'worktree';
    let warm: WarmSandbox | null = null;
    try {
      const repo = paths.repo(project);
      const path = paths.worktree(project, row.name);
      const wt = await ctx.lock.withLock(project, async () => {
        // The disk image (mounted again after a reboot) before the worktree in it is looked at.
        await ctx.volumes?.ensure(slug, volumeTargets(ctx, row), { create: false });
        const r = await ensureWorktree(repo, { path, branch: row.branch, base: row.baseRef, beforeRemove: () => savedWork.saveBeforeRemoval(ctx, row, 'start') });
        // Host-side git may have written root-owned files since the last start.
        await chownTree(path, OWNER.uid, OWNER.gid);
        await prepareSandboxGit(ctx, row, r.adminDir, { fresh: !r.reused });
        return r;
      });
      if (!wt.reused) ctx.log.warn({ slug, branch: row.branch, createdBranch: wt.createdBranch }, 'worktree was missing; re-added it on start');
      checkAbort(signal);

      step = 'dirs';
      await prepareDirs(ctx, slug, { fresh: false });
      // The one read of the config for this start (an invalid one fails the start here, as before).
      const config = await projects.readConfig(ctx, project);
      const { pool } = this.parts;
      // A warm sandbox takes the workspace's dirs (pool.moveUnder; not with disk images: takeForReopen says why), else
      // one that holds the slot this reopen needs gives way.
      warm = await pool.takeForReopen(project, config);
      if (warm) {
        const w = warm;
        // The stopped container goes (the claim renames the warm one to its name) while the dirs move.
        const done = await Promise.allSettled([ctx.runtime.remove(slug), ctx.lock.withLock(project, () => pool.moveUnder(w, row))]);
        const failed = done.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
      } else {
        await pool.giveWay();
      }
      checkAbort(signal);

      const up = await this.bringUp(row, signal, { verb: 'started', config, at: (s) => (step = s), warm });
      if (warm && up.warm) await pool.claimed(warm);
      warm = null;
      await ctx.emit(slug, 'workspace.started', { workspaceId: id, containerId: up.containerId, ms: Date.now() - t0 });
      return toWorkspace(up.running);
    } catch (e) {
      const reason = reasonOf(e);
      ctx.log.error({ err: e, slug, step }, `start of ${slug} failed at ${step}: ${reason}`);
      try {
        // The container holds no state of its own (everything is mounted), so a broken one is simply removed.
        await ctx.runtime.remove(slug);
      } catch (err) {
        ctx.log.warn({ err, slug }, 'could not remove the container after a failed start');
      }
      // A warm sandbox it took is never handed out again (the dirs it moved are the workspace's, and stay).
      if (warm) await this.parts.pool.release(warm);
      await store.update(id, { state: 'stopped', failureReason: reason, containerId: null });
      await ctx.emit(slug, 'spawn_failed', { workspaceId: id, op: 'start', step, reason, ms: Date.now() - t0 });
      void promoteQueue(ctx, this); // the slot this start held is free again
      throw spawnError(e, reason, { slug, step });
    }
  }

  // ---- teardown ----

  async teardown(slug: string): Promise<Workspace> {
    const { ctx } = this;
    ctx.assertOpen();
    validSlug(slug);
    if (!(await ctx.store.live(slug)) && !(await ctx.store.latest(slug))) throw notFound(slug);
    // A half-done fork or start of this slug stops at its next step and rolls back; then we clean up.
    ctx.inflight.get(slug)?.abort.abort(new Error('cancelled by teardown'));
    return ctx.slugs.run(slug, () => ctx.holding(slug, () => this.runTeardown(slug)));
  }

  /** Teardown's steps, also run by the reconciler to finish one a crash cut short. */
  async runTeardown(slug: string): Promise<Workspace> {
    const { ctx } = this;
    const { paths, store } = ctx;
    let row = (await store.live(slug)) ?? (await store.latest(slug));
    if (!row) throw notFound(slug);
    if (row.state === 'gone') return toWorkspace(row);
    if (row.state === 'queued' && row.worktreePath === null) {
      // Cancelling a queued fork: no worktree, container or thread was ever made; the others keep their order.
      const gone = await store.update(row.id, { state: 'gone', queueSeq: null }, 'queued');
      if (gone) {
        await ctx.emit(slug, 'workspace.cleaned', { workspaceId: row.id, from: 'queued', cancelled: true, branch: row.branch, archive: null, recoveryRef: null, ms: 0 });
        return toWorkspace(gone);
      }
      // Promoted meanwhile: tear down what its fork made.
      row = (await store.byId(row.id)) ?? row;
    }
    const t0 = Date.now();
    let from = row.state;
    // A failed row is history, not live: it is cleaned and dismissed without entering a live state again. The state
    // can move between the read above and this write (the line promotes without the slug's mutex; another server
    // shares the registry), so the write is conditional and a miss reads the row again: `from` is what is torn down.
    for (let tries = 0; from !== 'tearing-down' && from !== 'failed' && from !== 'gone' && tries < 3; tries++) {
      // queueSeq: a stopped workspace queued to reopen leaves the line too.
      const moved = await store.update(row.id, { state: 'tearing-down', queueSeq: null }, from);
      if (moved) {
        row = moved;
        break;
      }
      row = (await store.byId(row.id)) ?? row;
      from = row.state;
    }
    if (row.state === 'gone') return toWorkspace(row);
    await ctx.emit(slug, 'workspace.teardown', { workspaceId: row.id, from });
    // Stopped first so the saved work is final; saved before anything is removed, so a crash from here on loses
    // nothing (a re-run, e.g. reconcile finishing this teardown, finds the same work and reuses its ref).
    await ctx.runtime.stop(slug);
    const { project, name } = row;
    const target = row;
    // The stopped container goes while the work is saved: removing it touches none of the host directories the save
    // reads (they were bind mounts), and a re-run finds no container and saves the same work.
    // Both are waited for before an error of either is thrown, so nothing of this teardown runs on behind a re-run.
    const [save, removal] = await Promise.allSettled([ctx.lock.withLock(project, () => savedWork.saveBeforeRemoval(ctx, target, 'teardown')), ctx.runtime.remove(slug)]);
    if (save.status === 'rejected') throw save.reason;
    if (removal.status === 'rejected') throw removal.reason;
    const saved = save.value;
    // Four disjoint paths, so they go at once; all are waited for before an error of any is thrown (as above).
    const [worktree, run, sandboxGit, archiving] = await Promise.allSettled([
      ctx.lock.withLock(project, () => removeWorktree(paths.repo(project), paths.worktree(project, name))),
      removeDir(paths.run(slug)),
      removeDir(paths.sandboxGit(slug)),
      archive(ctx, slug, ['thread', 'state']),
    ]);
    for (const step of [worktree, run, sandboxGit]) if (step.status === 'rejected') throw step.reason;
    if (archiving.status === 'rejected') throw archiving.reason;
    const archived = archiving.value;
    // The disk image last: its worktree was saved and removed, its state archived.
    await ctx.volumes?.destroy(slug);
    this.parts.disks.forget(slug);
    const gone = (await store.update(row.id, { state: 'gone', containerId: null })) ?? row;
    ctx.activity.delete(slug);
    await ctx.emit(slug, 'workspace.cleaned', { workspaceId: row.id, branch: row.branch, archive: archived, recoveryRef: saved?.ref ?? null, ms: Date.now() - t0 });
    if (from === 'running' || from === 'creating') void promoteQueue(ctx, this);
    return toWorkspace(gone);
  }
}
