import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import {
  DEFAULT_WORKSPACE_NAME,
  GroveError,
  forkRequestSchema,
  updateWorkspaceRequestSchema,
  isGroveError,
  makeSlug,
  nameSchema,
  parseOrThrow,
  parseRecoveryRef,
  parseSlug,
  workspaceNameSchema,
  gitSshCommandSchema,
} from '@grove/contracts';
import type { Capacity, EventType, ForkRequest, GroveEvent, LastMessage, RestoreRequest, UpdateWorkspaceRequest, Workspace } from '@grove/contracts';
import type { EgressPolicy, EgressResponse } from '@grove/contracts';
import type { ProjectConfig, TeardownPreview, TurnDiffResponse, TurnSummary, UndoResponse } from '@grove/contracts';
import type { CheckpointRequest, ProjectConfigInput, ProjectConfigPatch, PublishRequest, PutOverlayFileRequest } from '@grove/contracts';
import type { CheckpointResponse, DiffResponse, OverlayListResponse, Project, PublishResponse } from '@grove/contracts';
import type { ProjectRow, WorkspaceRow } from '@grove/db';
import { BACKEND_GID, BACKEND_UID, SANDBOX_GID, SANDBOX_UID, exitSummary } from '@grove/runtime';
import type { RuntimeEvent, WorkspaceLimits, WorkspaceRuntime, WorkspaceSpec, WorkspaceStatus } from '@grove/runtime';
import type { Logger } from 'pino';
import { canChown, chownTree, ensureDirs, isEmptyDir, isNonEmptyDir, moveInto, reclaimTrees, removeDir } from './fsutil.ts';
import { ensureSandboxGitDir } from './sandbox-git.ts';
import {
  deleteBranchIfEmpty,
  ensureWorktree,
  freshBranch,
  isBareRepo,
  listWorktrees,
  prune,
  removeWorktree,
  resolveCommit,
} from './git.ts';
import type { SavedWork } from './git-store.ts';
import { GitFlow } from './git-flow.ts';
import type { WatchResult } from './git-flow.ts';
import { pullHeadRef, pullOfRef } from './remote.ts';
import { getOverSocket } from './health.ts';
import { TurnGuard, agentSandboxEnv, readProjectConfig } from './agents.ts';
import { copyWritable, prepareMountTargets } from './overlay.ts';
import type { OverlayFile } from './overlay.ts';
import { clearSnapshots } from './turn-snapshots.ts';
import type { RepoLock } from './lock.ts';
import type { KeyedMutex } from './mutex.ts';
import { createContext, invalidState, notFound, reasonOf, releasing, requireLive, requireProject } from './context.ts';
import type { GroveContext } from './context.ts';
import { createPaths, validProject, validSlug } from './paths.ts';
import type { GrovePaths } from './paths.ts';
import { LIVE_STATES, capacityError, nowIso, slotFree, toWorkspace } from './registry.ts';
import type { Registry } from './registry.ts';
import { openRegistry } from './store.ts';
import { DiskWatch } from './disks.ts';
import * as queries from './queries.ts';
import * as projects from './projects.ts';
import * as egressPolicy from './egress-policy.ts';
import * as savedWork from './saved-work.ts';
import type { SaveTarget } from './saved-work.ts';
import * as turns from './turns.ts';
import { Volumes, volumesSupported } from './volume.ts';
import type { VolumeTargets } from './volume.ts';
import type { AddProjectOptions, Grove, GroveOptions } from './types.ts';

export const DEFAULT_LIMITS: WorkspaceLimits = { memoryBytes: 512 * 1024 * 1024, nanoCpus: 1_000_000_000, pids: 256 };
/** Scheduled fetch of every project and the pull-request watcher (docs/git-flow.md). */
const DEFAULT_WATCH_INTERVAL_MS = 5 * 60_000;
const OWNER = { uid: SANDBOX_UID, gid: SANDBOX_GID };
/** The backend's user (root in the container): owner of the run and thread dirs and of every host socket there. */
const BACKEND = { uid: BACKEND_UID, gid: BACKEND_GID };
/** sun_path is 108 bytes on Linux including the terminating NUL; a longer path can never be connected to. */
const MAX_SOCKET_PATH_BYTES = 107;
/** The idle sweep runs every half idle period, within these bounds. */
const IDLE_SWEEP_MIN_MS = 50;
const IDLE_SWEEP_MAX_MS = 60_000;

type Step = 'worktree' | 'dirs' | 'egress' | 'image' | 'container' | 'health' | 'register';

/** A failure whose message is already the reason a user should read. */
class StepFailure extends Error {
  override name = 'StepFailure';
}

/** What a fork did so far, so a rollback undoes exactly that. */
interface Undo {
  worktree: boolean;
  branchCreated: boolean;
  baseCommit: string | null;
  /** The workspace's disk image may exist (it is made before the worktree is added in it). */
  volume: boolean;
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

class GroveImpl implements Grove {
  /** What every part of the hub shares (context.ts); the parts below take it instead of calling back into this class. */
  private readonly ctx: GroveContext;
  private readonly opts: GroveOptions;
  private readonly paths: GrovePaths;
  private readonly store: Registry;
  private readonly lock: RepoLock;
  /** One lifecycle operation per workspace at a time in this process. */
  private readonly slugs: KeyedMutex;
  private readonly inflight = new Map<string, { abort: AbortController; task: Promise<unknown> }>();
  private readonly activity: Map<string, number>;
  private readonly limits: WorkspaceLimits;
  private readonly log: Logger;
  /** Where workspaces run: their sandboxes, egress gates, host sockets and readiness (@grove/runtime). */
  private readonly runtime: WorkspaceRuntime;
  private readonly guard: TurnGuard;
  /** Stops following the engine's sandbox events; set once reconcile has run. */
  private unwatch: (() => void) | null = null;
  /** Checkpoints, diff, fetch before fork and publish (docs/git-flow.md). */
  private readonly flow: GitFlow;
  /** The pull-request watcher's timer (once reconcile has run) and its pass in progress. */
  private watchTimer: NodeJS.Timeout | null = null;
  private watching: Promise<WatchResult> | null = null;
  private readonly idleTimer: NodeJS.Timeout | null = null;
  private sweeping = false;
  /** Per-workspace disk images (the disk and inode quota); null when no quota applies. */
  private readonly volumes: Volumes | null = null;
  /** Disk usage for the API and workspace.disk_full. */
  private readonly disks: DiskWatch;

  constructor(ctx: GroveContext) {
    this.ctx = ctx;
    const { opts, paths } = ctx;
    this.opts = opts;
    this.paths = paths;
    this.store = ctx.store;
    this.lock = ctx.lock;
    this.slugs = ctx.slugs;
    this.activity = ctx.activity;
    this.log = opts.logger;
    this.runtime = opts.runtime;
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    if (!canChown() && process.getuid?.() !== SANDBOX_UID) {
      this.log.warn({ uid: process.getuid?.(), sandboxUid: SANDBOX_UID }, 'not running as root: worktrees cannot be handed to the sandbox uid, which may not be able to write them');
    }
    const owner = canChown() ? OWNER : null;
    this.flow = new GitFlow(ctx, {
      forgeToken: opts.forgeToken ?? null,
      sshCommand: opts.gitSshCommand != null ? parseOrThrow(gitSshCommandSchema, opts.gitSshCommand, { what: 'gitSshCommand (GROVE_GIT_SSH_COMMAND)' }) : null,
      owner,
    });
    // The checkpoint after a turn (and after an undo) is git flow's: the guard is handed it, not a way back into the hub.
    this.guard = new TurnGuard(ctx, { owner, checkpoints: this.flow });
    this.runtime.bind({
      runDir: (slug) => paths.run(slug),
      onTurnEnded: (slug, req) => this.guard.onTurnEnded(slug, req),
      emit: (slug, type, data) => this.emitSoon(slug, type, data),
    });
    const idle = opts.idleStopMs ?? 0;
    if (idle > 0) {
      const every = Math.min(Math.max(Math.floor(idle / 2), IDLE_SWEEP_MIN_MS), IDLE_SWEEP_MAX_MS);
      this.idleTimer = setInterval(() => void this.idleSweep(idle), every);
      // The sweep never keeps a process alive on its own; close() clears it.
      this.idleTimer.unref();
    }
    if (opts.diskQuota) {
      const ok = volumesSupported();
      if (ok.ok) {
        this.volumes = new Volumes({ paths, quota: opts.diskQuota, owner });
      } else {
        this.log.warn({ reason: ok.reason }, `no disk quota for workspaces: ${ok.reason}`);
      }
    }
    this.disks = new DiskWatch(ctx, this.volumes);
  }

  // ---- queries (queries.ts) ----

  async listProjects(): Promise<Array<{ name: string; defaultBranch: string; createdAt: string }>> {
    return queries.listProjects(this.ctx);
  }

  async list(filter: { project?: string; includeGone?: boolean } = {}): Promise<{ workspaces: Workspace[]; capacity: Capacity }> {
    return queries.list(this.ctx, this.disks, filter);
  }

  async capacity(): Promise<Capacity> {
    return queries.capacity(this.ctx);
  }

  async get(slug: string): Promise<Workspace> {
    return queries.get(this.ctx, this.disks, slug);
  }

  private async view(row: WorkspaceRow): Promise<Workspace> {
    return queries.view(this.ctx, row);
  }

  async lastMessage(slug: string): Promise<LastMessage | null> {
    return queries.lastMessage(this.ctx, slug);
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

  // ---- projects ----

  async addProject(o: AddProjectOptions): Promise<Project> {
    this.assertOpen();
    const { project } = await projects.registerProject(this.ctx, o, { sshCommand: this.flow.sshCommand });
    const shape: Project = { name: project.name, defaultBranch: project.defaultBranch, createdAt: project.createdAt };
    if (o.createDefault === false || (await this.store.live(project.name))) return shape;
    try {
      await this.create({ project, name: DEFAULT_WORKSPACE_NAME, isDefault: true, baseRef: project.defaultBranch, wait: true });
    } catch (e) {
      // Created concurrently by another caller: that is the state we wanted.
      if (isGroveError(e) && e.code === 'workspace_exists') return shape;
      throw e;
    }
    return shape;
  }

  /** The project's overlay files (projects.ts), its config read again: the fork path's reads are the lifecycle's to fold. */
  private async currentOverlay(project: string): Promise<OverlayFile[]> {
    return projects.currentOverlay(this.ctx, project, await projects.readConfig(this.ctx, project));
  }

  private async requireProject(name: string): Promise<ProjectRow> {
    return requireProject(this.ctx, name);
  }

  // ---- fork ----

  async fork(req: ForkRequest, opts: { wait?: boolean } = {}): Promise<Workspace> {
    this.assertOpen();
    const { project, name, from, queue, pullRequest, keepCheckoutOnClose } = parseForkRequest(req);
    const proj = await this.requireProject(project);
    // A config edited into something invalid since the project was added is refused before a slot is taken.
    await readProjectConfig(this.paths.projectConfig(project));
    // A pull request's head is fetched when the fork runs (runCreate); until then the base names where it will be.
    // Saved work (a recovery ref) lives in its workspace's private store: copied into the primary first.
    const saved = from ? parseRecoveryRef(from) : null;
    const baseRef = pullRequest ? pullHeadRef(pullRequest) : saved ? await this.savedWorkBase(project, saved) : (from ?? proj.defaultBranch);
    return this.create({ project: proj, name, isDefault: false, baseRef, wait: opts.wait ?? true, queue: queue ?? false, keepCheckoutOnClose });
  }

  /** PATCH /api/workspaces/:slug: the workspace's own settings (keepCheckoutOnClose; null: the project's). */
  async update(slug: string, req: UpdateWorkspaceRequest): Promise<Workspace> {
    this.assertOpen();
    const body = parseOrThrow(updateWorkspaceRequestSchema, req, { what: 'workspace settings' });
    const row = await this.requireLive(slug);
    if (body.keepCheckoutOnClose === undefined) return toWorkspace(row);
    const updated = await this.store.update(row.id, { keepCheckoutOnClose: body.keepCheckoutOnClose });
    if (!updated) throw notFound(slug);
    return toWorkspace(updated);
  }

  private async create(c: {
    project: ProjectRow;
    name: string;
    isDefault: boolean;
    baseRef: string;
    wait: boolean;
    queue?: boolean;
    keepCheckoutOnClose?: boolean;
  }): Promise<Workspace> {
    const slug = validSlug(makeSlug(c.project.name, c.name));
    const socketBytes = Buffer.byteLength(this.paths.socket(slug));
    if (socketBytes > MAX_SOCKET_PATH_BYTES) {
      throw new GroveError(
        'invalid_name',
        `name too long for this GROVE_HOME: the backend socket path would be ${socketBytes} bytes, over the ${MAX_SOCKET_PATH_BYTES}-byte limit of Unix sockets; choose a shorter name`,
        { details: { slug } },
      );
    }
    // Fail before reserving anything when Docker is down (503, nothing to undo).
    await this.runtime.ping();
    // Cheap early answers, so refused forks do not queue on the repository lock below (the transaction
    // in reserveNew is what actually decides).
    if (await this.store.live(slug)) throw new GroveError('workspace_exists', `workspace "${slug}" already exists`, { details: { slug } });
    const pre = await this.store.capacity(this.opts.maxRunning);
    if (!c.queue && !slotFree(pre)) throw capacityError(pre);
    // The branch is chosen before the reservation and recorded in the row, so a crash at any later point
    // still knows which branch this fork created. Only forks of this slug could create it meanwhile, and
    // the live-slug unique index serializes those.
    const repo = this.paths.repo(c.project.name);
    const branch = c.isDefault ? 'grove/default' : await this.lock.withLock(c.project.name, () => freshBranch(repo, c.name));
    // Held from before the row is creating until runCreate has moved it on, so another server's reconcile never
    // sees this fork creating and unheld (and rolls it back as interrupted) while this process lives.
    const release = await this.store.holdOperation(slug);
    let reserved: Awaited<ReturnType<Registry['reserveNew']>>;
    try {
      reserved = await this.store.reserveNew(
        { slug, project: c.project.name, name: c.name, isDefault: c.isDefault, branch, baseRef: c.baseRef, keepCheckoutOnClose: c.keepCheckoutOnClose ?? null },
        this.opts.maxRunning,
        { queue: c.queue },
      );
    } catch (e) {
      await release();
      throw e;
    }
    const { row, capacity, position } = reserved;
    if (position !== null) {
      // Nothing is made for a queued workspace until promoteQueue gives it a slot (then runCreate as below).
      await release();
      await this.emit(slug, 'workspace.queued', { workspaceId: row.id, position, branch, base: c.baseRef, ...capacity });
      return toWorkspace(row, position);
    }
    this.emitSoon(slug, 'workspace.reserved', { workspaceId: row.id, op: 'fork', branch, base: c.baseRef, ...capacity });
    // Queue on the slug before any await, so a teardown issued right after us waits for (or cancels) this fork.
    const abort = new AbortController();
    const task = this.slugs.run(slug, () => releasing(release, () => this.runCreate(row, abort.signal)));
    this.track(slug, abort, task);
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
  private async promoteQueue(): Promise<void> {
    if (this.closed || (await this.store.capacity(this.opts.maxRunning)).queued === 0) return;
    try {
      // With Docker down every promoted fork would fail: the line waits (reconcile promotes once it is back).
      await this.runtime.ping();
    } catch (e) {
      this.log.warn({ err: e }, 'queue.waiting: docker unavailable, the line keeps waiting');
      return;
    }
    for (;;) {
      if (this.closed) return;
      let next: Awaited<ReturnType<Registry['promoteNext']>>;
      try {
        next = await this.store.promoteNext(this.opts.maxRunning);
      } catch (e) {
        this.log.error({ err: e }, `queue promotion failed: ${reasonOf(e)}`);
        return;
      }
      if (!next) return;
      // The promoted row comes held; its fork or start releases it.
      const { row, capacity, release } = next;
      // A row with a worktree was stopped and queued to reopen (a queued fork gets its worktree in runCreate).
      const reopen = row.worktreePath !== null;
      this.emitSoon(row.slug, 'workspace.promoted', { workspaceId: row.id, op: reopen ? 'start' : 'fork', ...capacity });
      if (!reopen) this.emitSoon(row.slug, 'workspace.reserved', { workspaceId: row.id, op: 'fork', branch: row.branch, base: row.baseRef, ...capacity });
      const abort = new AbortController();
      const task = this.slugs.run(row.slug, () =>
        releasing(release, () => (reopen ? this.runStart(row.id, abort.signal, { row, capacity }) : this.runCreate(row, abort.signal))),
      );
      this.track(row.slug, abort, task);
      task.catch(() => undefined); // recorded in the row, the events and the log by runCreate
    }
  }

  private async runCreate(reserved: WorkspaceRow, signal: AbortSignal): Promise<Workspace> {
    const t0 = Date.now();
    const { slug, project } = reserved;
    let row = reserved;
    // Cancelled (torn down) between its promotion and this turn on the slug: nothing was made, nothing to undo.
    const now = await this.store.byId(reserved.id);
    if (now?.state !== 'creating') throw invalidState(now ?? reserved, 'create');
    const undo: Undo = { worktree: false, branchCreated: false, baseCommit: null, volume: false };
    let step: Step = 'worktree';
    try {
      const repo = this.paths.repo(project);
      const path = this.paths.worktree(project, row.name);
      const wt = await this.lock.withLock(project, async () => {
        await this.flow.fetchBeforeFork(project, slug);
        const pr = pullOfRef(row.baseRef);
        if (pr !== null) {
          const base = await this.flow.pullRequestBase(project, slug, { workspaceId: row.id, n: pr });
          if (base !== row.baseRef) row = (await this.store.update(row.id, { baseRef: base })) ?? row;
        }
        const baseCommit = await resolveCommit(repo, row.baseRef);
        if (!baseCommit) throw new StepFailure(`base "${row.baseRef}" is not a branch, tag or commit of project "${project}"`);
        undo.baseCommit = baseCommit;
        row = (await this.store.update(row.id, { worktreePath: path })) ?? row;
        undo.worktree = true;
        // The disk quota: the worktree is added inside the workspace's disk image, so it is mounted first, over
        // empty dirs (what an earlier workspace of this slug left there is archived or removed).
        undo.volume = true;
        if (this.volumes) {
          await this.archive(slug, ['state']);
          await removeDir(this.paths.sandboxGit(slug));
          await this.volumes.ensure(slug, this.volumeTargets(row), { create: true });
        }
        const r = await ensureWorktree(repo, { path, branch: row.branch, base: baseCommit, beforeRemove: () => this.saveBeforeRemoval(row, 'fork') });
        undo.branchCreated = r.createdBranch;
        // A new workspace under an old slug starts its own turn numbers: no undo into its predecessor.
        await clearSnapshots({ repo, objects: this.paths.workspaceObjects(slug), slug });
        await chownTree(path, OWNER.uid, OWNER.gid);
        await this.prepareSandboxGit(row, r.adminDir, { fresh: true });
        // Writable overlay files are copied once, at fork; from then on they are the workspace's own.
        const refused = await copyWritable(await this.currentOverlay(project), path, canChown() ? OWNER : null);
        if (refused.length) this.log.warn({ slug, refused }, 'overlay files not copied: a symlink or a non-directory is in the way');
        return { ...r, baseCommit };
      });
      await this.emit(slug, 'workspace.prepared', {
        workspaceId: row.id,
        branch: row.branch,
        base: row.baseRef,
        baseCommit: wt.baseCommit,
        branchCreated: wt.createdBranch,
        reused: wt.reused,
        ms: Date.now() - t0,
      });
      this.checkAbort(signal);

      step = 'dirs';
      await this.prepareDirs(slug, { fresh: true });
      this.checkAbort(signal);

      const { running, containerId } = await this.bringUp(row, signal, 'created', (s) => (step = s));
      row = running;
      await this.emit(slug, 'workspace.registered', { workspaceId: row.id, branch: row.branch, containerId, ms: Date.now() - t0 });
      return toWorkspace(running);
    } catch (e) {
      const reason = reasonOf(e);
      this.log.error({ err: e, slug, step }, `fork of ${slug} failed at ${step}: ${reason}`);
      const problems = await this.rollbackFork(row, undo);
      await this.store.update(row.id, { state: 'failed', failureReason: reason, containerId: null });
      await this.emit(slug, 'spawn_failed', { workspaceId: row.id, op: 'fork', step, reason, ms: Date.now() - t0, ...(problems.length ? { rollbackProblems: problems } : {}) });
      void this.promoteQueue(); // the slot this fork held is free again
      throw spawnError(e, reason, { slug, step });
    }
  }

  /**
   * The steps fork and start share once the worktree and dirs are ready: the runtime's start (egress gate, image,
   * container, health), then creating -> running. `at` records the current step for the caller's failure report.
   */
  private async bringUp(
    reserved: WorkspaceRow,
    signal: AbortSignal,
    verb: 'created' | 'started',
    at: (step: Step) => void,
  ): Promise<{ running: WorkspaceRow; containerId: string }> {
    let row = reserved;
    // What the sandbox is given is read and prepared on the host first (config, overlay targets, policy).
    const spec = await this.spec(row);
    this.checkAbort(signal);
    const info = await this.runtime.start(spec, {
      signal,
      onStep: at,
      onSandbox: async (sandbox) => {
        await this.emit(row.slug, 'sandbox.started', { workspaceId: row.id, containerId: sandbox.id, image: sandbox.image, ms: sandbox.ms });
        row = (await this.store.update(row.id, { containerId: sandbox.id })) ?? row;
      },
    });

    at('register');
    const running = await this.store.update(row.id, { state: 'running', failureReason: null, lastActivityAt: nowIso() }, 'creating');
    if (!running) throw new StepFailure(`the workspace left the creating state while it was being ${verb}`);
    return { running, containerId: info.id };
  }

  /** Undo a fork: container, worktree (+ the branch when this fork created it and it holds no work), dirs, thread. Never throws. */
  private async rollbackFork(row: WorkspaceRow, undo: Undo): Promise<string[]> {
    const problems: string[] = [];
    const attempt = async (what: string, fn: () => Promise<unknown>): Promise<boolean> => {
      try {
        await fn();
        return true;
      } catch (e) {
        problems.push(`${what}: ${reasonOf(e)}`);
        this.log.warn({ err: e, slug: row.slug }, `rollback of ${row.slug}: ${what} failed`);
        return false;
      }
    };
    // The sandbox with its gate and host listeners (the runtime ends those even when the removal fails).
    await attempt('remove container', () => this.runtime.remove(row.slug));
    let worktreeGone = true;
    if (undo.worktree) {
      worktreeGone = await attempt('remove worktree', () =>
        this.lock.withLock(row.project, async () => {
          const repo = this.paths.repo(row.project);
          // A fork never served anyone, so this is normally a no-op; when it cannot save, the worktree stays.
          await this.saveBeforeRemoval(row, 'rollback');
          await removeWorktree(repo, this.paths.worktree(row.project, row.name));
          if (undo.branchCreated && undo.baseCommit) await deleteBranchIfEmpty(repo, row.branch, undo.baseCommit);
        }),
      );
    }
    await attempt('remove run, state and sandbox git dirs', async () => {
      await removeDir(this.paths.run(row.slug));
      await removeDir(this.paths.state(row.slug));
      await removeDir(this.paths.sandboxGit(row.slug));
    });
    await attempt('archive thread', () => this.archive(row.slug, ['thread']));
    // The disk image goes with the worktree in it; a worktree kept because its work could not be saved keeps it.
    const volumes = this.volumes;
    if (undo.volume && worktreeGone && volumes) await attempt('remove disk image', () => volumes.destroy(row.slug));
    return problems;
  }

  // ---- stop / start ----

  async stop(slug: string): Promise<Workspace> {
    return this.stopAs(slug, null);
  }

  /** Stop a running workspace; reason 'idle' when the idle sweep does it. The freed slot goes to the line. */
  private async stopAs(slug: string, reason: 'idle' | null): Promise<Workspace> {
    this.assertOpen();
    const row = await this.requireLive(slug);
    if (row.state === 'stopped') return toWorkspace(row);
    if (row.state === 'queued' && row.worktreePath !== null) {
      // Queued to reopen: stopping it means leaving the line and staying stopped.
      const left = await this.store.update(row.id, { state: 'stopped', queueSeq: null }, 'queued');
      if (left) {
        await this.emit(slug, 'workspace.stopped', { workspaceId: row.id, ms: 0, reason: 'left the line' });
        return toWorkspace(left);
      }
      return this.stopAs(slug, reason); // promoted meanwhile: stop it as usual
    }
    if (row.state !== 'running') throw invalidState(row, 'stop');
    // Held while the container stops under a running row: another server's reconcile would take it for dead.
    const stopped = await this.slugs.run(slug, () => this.holding(slug, async () => {
      const cur = await this.store.byId(row.id);
      if (!cur) throw notFound(slug);
      if (cur.state === 'stopped') return toWorkspace(cur);
      if (cur.state !== 'running') throw invalidState(cur, 'stop');
      const t0 = Date.now();
      const agentSessionId = await this.agentSession(slug);
      await this.runtime.stop(slug);
      const done = await this.store.update(cur.id, { state: 'stopped', ...(agentSessionId ? { agentSessionId } : {}) }, 'running');
      if (!done) throw invalidState((await this.store.byId(cur.id)) ?? cur, 'stop');
      await this.emit(slug, 'workspace.stopped', { workspaceId: cur.id, ms: Date.now() - t0, ...(reason ? { reason } : {}), ...(agentSessionId ? { agentSessionId } : {}) });
      return toWorkspace(done);
    }));
    await this.promoteQueue();
    return stopped;
  }

  /**
   * Stop running workspaces without activity (a proxied request, or a state change when there was none)
   * for idleMs. A backend in the middle of a turn counts as active: an agent may work long without traffic.
   */
  private async idleSweep(idleMs: number): Promise<void> {
    if (this.closed || this.sweeping) return;
    this.sweeping = true;
    try {
      for (const row of await this.store.rows({ states: ['running'] })) {
        if (this.closed) return;
        if (this.inflight.has(row.slug) || this.slugs.isBusy(row.slug)) continue;
        const now = Date.now();
        const last = Math.max(Date.parse(row.lastActivityAt ?? row.updatedAt), this.activity.get(row.slug) ?? 0);
        if (now - last < idleMs) continue;
        if (await this.backendBusy(row.slug)) {
          this.activity.set(row.slug, now);
          await this.store.touch(row.id, new Date(now).toISOString());
          continue;
        }
        try {
          await this.stopAs(row.slug, 'idle');
        } catch (e) {
          this.log.warn({ err: e, slug: row.slug }, `idle stop of ${row.slug} failed: ${reasonOf(e)}`);
        }
      }
    } catch (e) {
      this.log.error({ err: e }, `idle sweep failed: ${reasonOf(e)}`);
    } finally {
      this.sweeping = false;
    }
  }

  /** Whether the backend reports a turn in progress. Unreachable counts as not busy. */
  private async backendBusy(slug: string): Promise<boolean> {
    try {
      const { status, body } = await getOverSocket(this.paths.socket(slug), '/status', 1_000);
      return status === 200 && (body as { busy?: unknown } | null)?.busy === true;
    } catch {
      return false;
    }
  }

  async start(slug: string, opts: { queue?: boolean } = {}): Promise<Workspace> {
    this.assertOpen();
    const row = await this.requireLive(slug);
    if (row.state === 'running') return toWorkspace(row);
    if (row.state === 'queued' && opts.queue) return this.view(row);
    if (row.state !== 'stopped') throw invalidState(row, 'start');
    await this.runtime.ping();
    if (opts.queue) {
      const queued = await this.store.queueStart(row.id, this.opts.maxRunning);
      if (queued) {
        await this.emit(slug, 'workspace.queued', { workspaceId: row.id, op: 'start', position: queued.position, ...queued.capacity });
        return toWorkspace(queued.row, queued.position);
      }
    }
    const abort = new AbortController();
    const task = this.slugs.run(slug, () => this.holding(slug, () => this.runStart(row.id, abort.signal)));
    this.track(slug, abort, task);
    return task;
  }

  /** Reopen a stopped workspace; `promoted`: its slot was already given to it by promoteQueue. */
  private async runStart(id: number, signal: AbortSignal, promoted?: { row: WorkspaceRow; capacity: Capacity }): Promise<Workspace> {
    const cur = await this.store.byId(id);
    if (cur?.state === 'running') return toWorkspace(cur); // a concurrent start won
    if (promoted && cur?.state !== 'creating') throw invalidState(cur ?? promoted.row, 'start'); // left the line meanwhile
    const t0 = Date.now();
    const { row, capacity } = promoted ?? (await this.store.reserveStart(id, this.opts.maxRunning));
    const { slug, project } = row;
    await this.emit(slug, 'workspace.reserved', { workspaceId: id, op: 'start', ...capacity });
    let step: Step = 'worktree';
    try {
      const repo = this.paths.repo(project);
      const path = this.paths.worktree(project, row.name);
      const wt = await this.lock.withLock(project, async () => {
        // The disk image (mounted again after a reboot) before the worktree in it is looked at.
        await this.volumes?.ensure(slug, this.volumeTargets(row), { create: false });
        const r = await ensureWorktree(repo, { path, branch: row.branch, base: row.baseRef, beforeRemove: () => this.saveBeforeRemoval(row, 'start') });
        // Host-side git may have written root-owned files since the last start.
        await chownTree(path, OWNER.uid, OWNER.gid);
        await this.prepareSandboxGit(row, r.adminDir, { fresh: !r.reused });
        return r;
      });
      if (!wt.reused) this.log.warn({ slug, branch: row.branch, createdBranch: wt.createdBranch }, 'worktree was missing; re-added it on start');
      this.checkAbort(signal);

      step = 'dirs';
      await this.prepareDirs(slug, { fresh: false });

      const { running, containerId } = await this.bringUp(row, signal, 'started', (s) => (step = s));
      await this.emit(slug, 'workspace.started', { workspaceId: id, containerId, ms: Date.now() - t0 });
      return toWorkspace(running);
    } catch (e) {
      const reason = reasonOf(e);
      this.log.error({ err: e, slug, step }, `start of ${slug} failed at ${step}: ${reason}`);
      try {
        // The container holds no state of its own (everything is mounted), so a broken one is simply removed.
        await this.runtime.remove(slug);
      } catch (err) {
        this.log.warn({ err, slug }, 'could not remove the container after a failed start');
      }
      await this.store.update(id, { state: 'stopped', failureReason: reason, containerId: null });
      await this.emit(slug, 'spawn_failed', { workspaceId: id, op: 'start', step, reason, ms: Date.now() - t0 });
      void this.promoteQueue(); // the slot this start held is free again
      throw spawnError(e, reason, { slug, step });
    }
  }

  // ---- teardown ----

  async teardown(slug: string): Promise<Workspace> {
    this.assertOpen();
    validSlug(slug);
    if (!(await this.store.live(slug)) && !(await this.store.latest(slug))) throw notFound(slug);
    // A half-done fork or start of this slug stops at its next step and rolls back; then we clean up.
    this.inflight.get(slug)?.abort.abort(new Error('cancelled by teardown'));
    return this.slugs.run(slug, () => this.holding(slug, () => this.runTeardown(slug)));
  }

  private async runTeardown(slug: string): Promise<Workspace> {
    let row = (await this.store.live(slug)) ?? (await this.store.latest(slug));
    if (!row) throw notFound(slug);
    if (row.state === 'gone') return toWorkspace(row);
    if (row.state === 'queued' && row.worktreePath === null) {
      // Cancelling a queued fork: no worktree, container or thread was ever made; the others keep their order.
      const gone = await this.store.update(row.id, { state: 'gone', queueSeq: null }, 'queued');
      if (gone) {
        await this.emit(slug, 'workspace.cleaned', { workspaceId: row.id, from: 'queued', cancelled: true, branch: row.branch, archive: null, recoveryRef: null, ms: 0 });
        return toWorkspace(gone);
      }
      // Promoted meanwhile: tear down what its fork made.
      row = (await this.store.byId(row.id)) ?? row;
    }
    const t0 = Date.now();
    let from = row.state;
    // A failed row is history, not live: it is cleaned and dismissed without entering a live state again. The state
    // can move between the read above and this write (the line promotes without the slug's mutex; another server
    // shares the registry), so the write is conditional and a miss reads the row again: `from` is what is torn down.
    for (let tries = 0; from !== 'tearing-down' && from !== 'failed' && from !== 'gone' && tries < 3; tries++) {
      // queueSeq: a stopped workspace queued to reopen leaves the line too.
      const moved = await this.store.update(row.id, { state: 'tearing-down', queueSeq: null }, from);
      if (moved) {
        row = moved;
        break;
      }
      row = (await this.store.byId(row.id)) ?? row;
      from = row.state;
    }
    if (row.state === 'gone') return toWorkspace(row);
    await this.emit(slug, 'workspace.teardown', { workspaceId: row.id, from });
    // Stopped first so the saved work is final; saved before anything is removed, so a crash from here on loses
    // nothing (a re-run, e.g. reconcile finishing this teardown, finds the same work and reuses its ref).
    await this.runtime.stop(slug);
    const { project, name } = row;
    const saved = await this.lock.withLock(project, () => this.saveBeforeRemoval(row, 'teardown'));
    await this.runtime.remove(slug);
    await this.lock.withLock(project, () => removeWorktree(this.paths.repo(project), this.paths.worktree(project, name)));
    await removeDir(this.paths.run(slug));
    await removeDir(this.paths.sandboxGit(slug));
    const archive = await this.archive(slug, ['thread', 'state']);
    // The disk image last: its worktree was saved and removed, its state archived.
    await this.volumes?.destroy(slug);
    this.disks.forget(slug);
    const gone = (await this.store.update(row.id, { state: 'gone', containerId: null })) ?? row;
    this.activity.delete(slug);
    await this.emit(slug, 'workspace.cleaned', { workspaceId: row.id, branch: row.branch, archive, recoveryRef: saved?.ref ?? null, ms: Date.now() - t0 });
    if (from === 'running' || from === 'creating') void this.promoteQueue();
    return toWorkspace(gone);
  }

  async teardownPreview(slug: string): Promise<TeardownPreview> {
    return savedWork.teardownPreview(this.ctx, slug);
  }

  /** Save a worktree's uncommitted work before it is removed (saved-work.ts). Under the project's repository lock. */
  private async saveBeforeRemoval(w: SaveTarget, reason: string): Promise<SavedWork | null> {
    return savedWork.saveBeforeRemoval(this.ctx, w, reason);
  }

  // ---- egress ----

  /** The policy a workspace's gate enforces (egress-policy.ts). */
  private async policyOf(row: WorkspaceRow): Promise<EgressPolicy> {
    return egressPolicy.policyOf(this.ctx, row);
  }

  async egress(slug: string, opts: { limit?: number } = {}): Promise<EgressResponse> {
    return egressPolicy.egress(this.ctx, slug, opts);
  }

  async setEgressPolicy(slug: string, policy: EgressPolicy): Promise<EgressPolicy> {
    this.assertOpen();
    return egressPolicy.setEgressPolicy(this.ctx, this.runtime, slug, policy);
  }

  async resetEgressPolicy(slug: string): Promise<EgressPolicy> {
    this.assertOpen();
    return egressPolicy.resetEgressPolicy(this.ctx, this.runtime, slug);
  }

  // ---- saved work (saved-work.ts) ----

  async savedWork(slug: string): Promise<Array<{ ref: string; n: number; commit: string }>> {
    return savedWork.savedWork(this.ctx, slug);
  }

  async restore(slug: string, req: RestoreRequest, opts: { wait?: boolean } = {}): Promise<Workspace> {
    this.assertOpen();
    return this.fork(await savedWork.restoreRequest(this.ctx, slug, req), opts);
  }

  private async savedWorkBase(project: string, saved: { slug: string; n: number }): Promise<string> {
    return savedWork.savedWorkBase(this.ctx, project, saved);
  }

  // ---- git flow: checkpoints, diff, publish (docs/git-flow.md) ----

  async checkpoint(slug: string, req: CheckpointRequest = {}): Promise<CheckpointResponse> {
    this.assertOpen();
    return this.flow.checkpoint(slug, req);
  }

  async diff(slug: string, opts: { maxBytes?: number } = {}): Promise<DiffResponse> {
    return this.flow.diff(slug, opts);
  }

  async publish(slug: string, req: PublishRequest = {}): Promise<PublishResponse> {
    this.assertOpen();
    return this.flow.publish(slug, req);
  }

  /** Concurrent calls share one pass, its teardowns included. */
  async watchPullRequests(): Promise<WatchResult> {
    this.assertOpen();
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
        await this.teardown(d.slug);
      } catch (e) {
        // As when the check itself fails: the change is not reported, and the next pass looks again.
        this.log.warn({ slug: d.slug, reason: d.reason }, `pull-request check of ${d.slug} failed: ${reasonOf(e)}`);
        result.changed = result.changed.filter((c) => c.slug !== d.slug);
      }
    }
    return result;
  }

  /** Run watchPullRequests every intervalMs (not overlapping itself) until close(). */
  private startWatch(intervalMs: number): void {
    if (this.watchTimer || intervalMs <= 0) return;
    this.watchTimer = setInterval(() => {
      this.watchPullRequests().catch((e: unknown) => this.log.error({ err: e }, `pull-request watch failed: ${reasonOf(e)}`));
    }, intervalMs);
    this.watchTimer.unref();
  }

  // ---- agents: project config and undo ----

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
    this.assertOpen();
    return projects.setProjectConfig(this.ctx, project, config);
  }

  async patchProjectConfig(project: string, patch: ProjectConfigPatch): Promise<ProjectConfig> {
    this.assertOpen();
    return projects.patchProjectConfig(this.ctx, project, patch);
  }

  async undo(slug: string): Promise<UndoResponse> {
    this.assertOpen();
    return turns.undo(this.ctx, this.guard, slug);
  }

  async turns(slug: string): Promise<TurnSummary[]> {
    return turns.turns(this.ctx, slug);
  }

  async turnDiff(slug: string, n: number): Promise<TurnDiffResponse> {
    return turns.turnDiff(this.ctx, slug, n);
  }

  // ---- reconcile ----

  async reconcile(): Promise<void> {
    this.assertOpen();
    const t0 = Date.now();
    // Follow sandbox deaths before listing, so one that dies during the reconcile is not missed.
    this.unwatch ??= this.runtime.watch(
      (e) => void this.onSandboxEvent(e),
      (err) => this.log.warn({ err }, `lost the sandbox event stream, following it again: ${reasonOf(err)}`),
    );
    const released = await this.lock.releaseStale();
    // Disk images first (after a reboot none is mounted): everything below reads the worktrees inside them.
    await this.reconcileVolumes();
    const containers = await this.runtime.list();
    const listed = new Map(containers.map((c) => [c.slug, c]));
    let touched = 0;
    let held = 0;
    for (const row of await this.store.rows({ states: LIVE_STATES })) {
      if (this.inflight.has(row.slug)) continue; // this process is working on it right now
      // The common case needs neither a hold nor an inspect: a stopped row whose sandbox was not running when
      // listed. Only a stop cut short leaves a stopped row with a running sandbox, and that happened before the
      // listing; a start since then moved the row out of `stopped` first (under its hold).
      if (row.state === 'stopped' && !listed.get(row.slug)?.running) continue;
      try {
        const changed = await this.slugs.run(row.slug, () =>
          this.reconcileHeld(row.slug, async () => {
            // Inspected now, under the hold: an operation that finished since the listing above made or removed it.
            const container = (await this.runtime.poll(row.slug)) ?? undefined;
            return this.reconcileRow(row.id, container);
          }),
        );
        if (changed === null) held++;
        else if (changed) touched++;
      } catch (e) {
        this.log.error({ err: e, slug: row.slug }, `reconcile of ${row.slug} failed: ${reasonOf(e)}`);
      }
    }
    // Listed again: rolling rows back above already removed some of the containers seen before.
    for (const c of await this.runtime.list()) {
      if ((await this.store.live(c.slug)) || this.inflight.has(c.slug)) continue;
      try {
        // A fork of this slug elsewhere is held from before its row exists: its container is not an orphan.
        const removed = await this.reconcileHeld(c.slug, async () => {
          if (await this.store.live(c.slug)) return false;
          await this.runtime.remove(c.slug);
          await this.emit(c.slug, 'workspace.reconciled', { action: 'removed-orphan-container', containerId: c.id });
          return true;
        });
        if (removed) touched++;
      } catch (e) {
        this.log.error({ err: e, slug: c.slug }, 'could not remove an orphan container');
      }
    }
    for (const p of await this.store.projects()) {
      try {
        touched += await this.lock.withLock(p.name, () => this.reconcileWorktrees(p.name));
      } catch (e) {
        this.log.error({ err: e, project: p.name }, `worktree reconcile of ${p.name} failed: ${reasonOf(e)}`);
      }
    }
    await this.removeOrphanVolumes();
    await this.reconcileAttachments();
    // From now on the server serves: fetch projects and follow published workspaces' pull requests.
    this.startWatch(this.opts.watchIntervalMs ?? DEFAULT_WATCH_INTERVAL_MS);
    this.log.info({ ms: Date.now() - t0, containers: containers.length, changed: touched, held, locksReleased: released.length }, 'reconciled');
    // The line survives a restart (queued rows keep their queue_seq); slots freed while we were down go to it now.
    await this.promoteQueue();
  }

  /**
   * A sandbox died on its own (crash, OOM kill of its backend, `docker kill`): mark the workspace
   * stopped with the reason now, not at the next restart, and free its slot. Its worktree, branch and
   * thread are untouched, so reopening it is the way back. Grove's own stop and teardown hold the
   * slug's mutex while the container dies, so by the time this runs their row is no longer `running`;
   * another server's (the engine is shared) hold the slug, and the event is left to them.
   */
  private async onSandboxEvent(e: RuntimeEvent): Promise<void> {
    if (this.closed) return;
    const { slug } = e;
    try {
      if (e.kind === 'oom') {
        // A process hit the memory limit; the backend may have survived it (the common case: a test
        // runner or build inside the sandbox). Recorded so the card and `grove logs` can say why.
        const row = await this.store.live(slug);
        if (!row) return;
        this.log.warn({ slug, limitBytes: this.limits.memoryBytes }, `a process in ${slug} was killed for memory`);
        await this.emit(slug, 'sandbox.oom', { workspaceId: row.id, limitBytes: this.limits.memoryBytes });
        return;
      }
      await this.slugs.run(slug, () => this.reconcileHeld(slug, async () => {
        const row = await this.store.live(slug);
        if (!row || row.state !== 'running' || this.closed) return;
        const info = await this.runtime.poll(slug);
        if (info?.running) return;
        const reason = `the sandbox stopped unexpectedly: it ${exitSummary(info ?? e)}`;
        await this.runtime.detach(slug);
        const done = await this.store.update(row.id, { state: 'stopped', failureReason: reason }, 'running');
        if (!done) return;
        this.log.warn({ slug, exitCode: info?.exitCode ?? e.exitCode, oomKilled: info?.oomKilled ?? false }, reason);
        await this.emit(slug, 'sandbox.died', { workspaceId: row.id, exitCode: info?.exitCode ?? e.exitCode, oomKilled: info?.oomKilled ?? false, reason });
      }));
    } catch (err) {
      this.log.error({ err, slug }, `could not record the death of ${slug}'s sandbox: ${reasonOf(err)}`);
    }
  }

  /**
   * The host side (egress gate, host listeners) for every running workspace, none for the others: it does not
   * survive a server restart, the sandboxes do.
   */
  private async reconcileAttachments(): Promise<void> {
    for (const row of await this.store.rows({ states: LIVE_STATES })) {
      if (this.inflight.has(row.slug)) continue;
      try {
        if (row.state === 'running') await this.runtime.attach(row.slug, { egressPolicy: await this.policyOf(row) });
        else await this.runtime.detach(row.slug);
      } catch (e) {
        this.log.error({ err: e, slug: row.slug }, `egress gate or host listeners of ${row.slug} could not be started: ${reasonOf(e)}`);
      }
    }
  }

  /** Returns true when something changed. */
  private async reconcileRow(id: number, container: WorkspaceStatus | undefined): Promise<boolean> {
    const row = await this.store.byId(id);
    if (!row) return false;
    const { slug } = row;
    switch (row.state) {
      case 'creating': {
        const wasRunning = (await this.store.lastEventFor(slug, 'workspace.registered', id)) !== undefined;
        if (wasRunning) {
          // An interrupted start: the workspace is real work, never roll it back; leave it stopped.
          await this.runtime.stop(slug);
          await this.store.update(id, { state: 'stopped', failureReason: 'start interrupted by a server restart' }, 'creating');
          await this.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'creating', to: 'stopped', reason: 'start interrupted by a server restart' });
          return true;
        }
        await this.rollbackInterruptedFork(row);
        return true;
      }
      case 'running': {
        let why: string | null = null;
        if (!container) why = 'container missing';
        else if (!container.running) why = `container ${exitSummary(container)}`;
        else {
          const healthy = await this.runtime.probe(slug);
          if (!healthy.ok) {
            why = `backend not healthy: ${healthy.error}`;
            await this.runtime.stop(slug);
          }
        }
        if (!why) return false;
        await this.store.update(id, { state: 'stopped', failureReason: why }, 'running');
        await this.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'running', to: 'stopped', reason: why });
        return true;
      }
      case 'stopped': {
        if (!container?.running) return false;
        // A stop that was interrupted after the row changed: finish it.
        await this.runtime.stop(slug);
        await this.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'stopped', to: 'stopped', reason: 'container was still running' });
        return true;
      }
      case 'tearing-down': {
        await this.runTeardown(slug);
        await this.emit(slug, 'workspace.reconciled', { workspaceId: id, from: 'tearing-down', to: 'gone', reason: 'teardown finished' });
        return true;
      }
      default:
        return false;
    }
  }

  /** A fork cut short by a crash or SIGKILL: undo it exactly like a failed fork. */
  private async rollbackInterruptedFork(row: WorkspaceRow): Promise<void> {
    const reason = 'interrupted by a server restart';
    const prepared = await this.store.lastEventFor(row.slug, 'workspace.prepared', row.id);
    const repo = this.paths.repo(row.project);
    const recordedBase = typeof prepared?.data.baseCommit === 'string' ? prepared.data.baseCommit : null;
    const undo: Undo = {
      worktree: true,
      // The branch in a fork row was free when it was reserved, so if it exists now this fork made it. The
      // default workspace reuses grove/default: only trust the event for it.
      branchCreated: prepared ? prepared.data.branchCreated === true : !row.isDefault,
      baseCommit: recordedBase ?? (await this.lock.withLock(row.project, () => resolveCommit(repo, row.baseRef)).catch(() => null)),
      volume: true,
    };
    const problems = await this.rollbackFork(row, undo);
    await this.store.update(row.id, { state: 'failed', failureReason: reason, containerId: null }, 'creating');
    await this.emit(row.slug, 'spawn_failed', { workspaceId: row.id, op: 'fork', step: 'interrupted', reason, ...(problems.length ? { rollbackProblems: problems } : {}) });
    await this.emit(row.slug, 'workspace.reconciled', { workspaceId: row.id, from: 'creating', to: 'failed', reason });
  }

  /** Prune worktree admin entries, and remove worktrees under <home>/worktrees/<project> that no live row owns. */
  private async reconcileWorktrees(project: string): Promise<number> {
    const repo = this.paths.repo(project);
    if (!(await isBareRepo(repo))) return 0;
    await prune(repo);
    const root = this.paths.worktreesOf(project);
    const owned = new Set(
      (await this.store.rows({ project, states: LIVE_STATES })).map((r) => this.paths.worktree(project, r.name)),
    );
    const candidates = new Set<string>();
    for (const e of await listWorktrees(repo)) if (resolve(e.path).startsWith(`${root}/`)) candidates.add(resolve(e.path));
    if (existsSync(root)) for (const n of await readdir(root)) candidates.add(join(root, n));
    const heads = new Map((await listWorktrees(repo)).map((e) => [resolve(e.path), e]));
    let removed = 0;
    for (const path of candidates) {
      if (owned.has(path)) continue;
      const name = basename(path);
      if (!nameSchema.safeParse(name).success) {
        this.log.warn({ project, path }, 'leaving a directory Grove did not create under the worktrees root');
        continue;
      }
      // Its work is saved first, on top of whatever it had checked out; a failure keeps it for the next run.
      const head = heads.get(path);
      const parent = head?.branch && /^refs\/heads\/[A-Za-z0-9._/-]+$/.test(head.branch) && !head.branch.includes('..') ? head.branch : head?.head && /^[0-9a-f]{40,64}$/.test(head.head) ? head.head : null;
      await this.saveBeforeRemoval({ slug: makeSlug(project, name), project, name, parent }, 'reconcile');
      await removeWorktree(repo, path);
      await this.emit(makeSlug(project, basename(path)), 'workspace.reconciled', { action: 'removed-orphan-worktree', worktree: basename(path) });
      removed++;
    }
    return removed;
  }

  // ---- disk quota ----

  /** The host paths the disk image's dirs are bound onto: where the rest of Grove (and Docker) finds them. */
  private volumeTargets(row: { slug: string; project: string; name: string }): VolumeTargets {
    return { worktree: this.paths.worktree(row.project, row.name), state: this.paths.state(row.slug), git: this.paths.sandboxGit(row.slug) };
  }

  /**
   * Mount every disk image under <home>/volumes (after a reboot none is): a live workspace's, and an orphan's
   * (a teardown or rolled-back fork cut short) so reconcileWorktrees can save what its worktree holds. Never makes one.
   */
  private async reconcileVolumes(): Promise<void> {
    const volumes = this.volumes;
    if (!volumes) return;
    for (const slug of await this.volumeSlugs()) {
      if (this.inflight.has(slug)) continue;
      try {
        // Held: another server on this host may be forking (making the image) or tearing down that slug right now.
        await this.reconcileHeld(slug, () => volumes.ensure(slug, this.volumeTargets({ slug, ...parseSlug(slug) }), { create: false }));
      } catch (e) {
        this.log.error({ err: e, slug }, `disk image of ${slug} could not be mounted: ${reasonOf(e)}`);
      }
    }
  }

  /** Delete the disk images no live workspace owns once reconcileWorktrees has saved and removed their worktree. */
  private async removeOrphanVolumes(): Promise<void> {
    const volumes = this.volumes;
    if (!volumes) return;
    for (const slug of await this.volumeSlugs()) {
      if ((await this.store.live(slug)) || this.inflight.has(slug)) continue;
      const { project, name } = parseSlug(slug);
      try {
        const removed = await this.reconcileHeld(slug, async () => {
          if (await this.store.live(slug)) return false;
          // A worktree whose work could not be saved is still there: its image stays with it.
          const worktree = this.paths.worktree(project, name);
          if (existsSync(worktree) && !(await isEmptyDir(worktree))) return false;
          await this.archive(slug, ['state']);
          await volumes.destroy(slug);
          return true;
        });
        if (removed) await this.emit(slug, 'workspace.reconciled', { action: 'removed-orphan-volume' });
      } catch (e) {
        this.log.error({ err: e, slug }, `orphan disk image of ${slug} could not be removed: ${reasonOf(e)}`);
      }
    }
  }

  /** The slugs with a directory under <home>/volumes (anything else there is not Grove's and left alone). */
  private async volumeSlugs(): Promise<string[]> {
    if (!existsSync(this.paths.volumesRoot)) return [];
    return (await readdir(this.paths.volumesRoot)).filter((n) => {
      try {
        validSlug(n);
        return true;
      } catch {
        return false;
      }
    });
  }

  // ---- lifecycle plumbing ----

  async close(): Promise<void> {
    if (this.closed) return;
    this.ctx.markClosed();
    this.unwatch?.();
    if (this.idleTimer) clearInterval(this.idleTimer);
    this.disks.stop();
    if (this.watchTimer) clearInterval(this.watchTimer);
    const pending = [...this.inflight.values()];
    for (const p of pending) p.abort.abort(new Error('server shutting down'));
    await Promise.allSettled(pending.map((p) => p.task));
    await this.runtime.close();
    await Promise.allSettled(this.ctx.pending);
    await this.store.close();
  }

  /** Run an operation that moves the slug's row through transient states, holding it (Registry.holdOperation). */
  private async holding<T>(slug: string, fn: () => Promise<T>): Promise<T> {
    return releasing(await this.store.holdOperation(slug), fn);
  }

  /**
   * Run fn on a slug unless an operation holds it (another server's fork, start, stop or teardown; this process's
   * own are skipped by the callers through `inflight` and the slug's mutex): then it is left alone, and null.
   */
  private async reconcileHeld<T>(slug: string, fn: () => Promise<T>): Promise<T | null> {
    const release = await this.store.tryHoldForReconcile(slug);
    if (!release) {
      this.log.info({ slug }, `reconcile left ${slug} alone: an operation on it is in flight`);
      return null;
    }
    return releasing(release, fn);
  }

  private get closed(): boolean {
    return this.ctx.closed;
  }

  private assertOpen(): void {
    this.ctx.assertOpen();
  }

  private async requireLive(slug: string): Promise<WorkspaceRow> {
    return requireLive(this.ctx, slug);
  }

  private track(slug: string, abort: AbortController, task: Promise<unknown>): void {
    this.inflight.set(slug, { abort, task });
    const done = (): void => {
      if (this.inflight.get(slug)?.task === task) this.inflight.delete(slug);
    };
    task.then(done, done);
  }

  private checkAbort(signal: AbortSignal): void {
    if (signal.aborted) throw new StepFailure(reasonOf(signal.reason));
  }

  /** Record an event (GroveContext.emit). */
  private async emit(slug: string, type: EventType, data: Record<string, unknown>): Promise<GroveEvent> {
    return this.ctx.emit(slug, type, data);
  }

  /** Record an event without waiting (GroveContext.emitSoon). */
  private emitSoon(slug: string, type: EventType, data: Record<string, unknown>): void {
    this.ctx.emitSoon(slug, type, data);
  }

  private async prepareDirs(slug: string, o: { fresh: boolean }): Promise<void> {
    // A new workspace never inherits a thread or agent state left under its slug by an earlier one.
    if (o.fresh) await this.archive(slug, ['thread', 'state']);
    await ensureDirs([this.paths.state(slug)], OWNER);
    // The backend's: the agent's user can neither list nor change them (its socket, the host's sockets, the
    // thread). chown -R also takes back what an earlier version let the agent's user own there.
    const backendDirs = [this.paths.run(slug), this.paths.thread(slug)];
    await ensureDirs(backendDirs);
    if (!canChown()) return;
    await reclaimTrees(backendDirs, BACKEND);
    for (const d of backendDirs) await chmod(d, 0o700);
  }

  /** The sandbox's own git dir and the worktree's .git file naming it (sandbox-git.ts). Under the repository lock. */
  private async prepareSandboxGit(row: WorkspaceRow, hostAdminDir: string, o: { fresh: boolean }): Promise<void> {
    // The host's admin dir is the host's alone from now on (an earlier version handed it to the agent's user).
    await reclaimTrees([hostAdminDir], BACKEND);
    await mkdir(this.paths.sandboxGitRoot, { recursive: true, mode: 0o755 });
    await ensureSandboxGitDir({
      dir: this.paths.sandboxGit(row.slug),
      worktree: this.paths.worktree(row.project, row.name),
      branch: row.branch,
      hostAdminDir,
      // Files are renamed into the git dir, and rename cannot cross mounts: when the dir is bound from the disk
      // image, they are made in it (random name, O_EXCL|O_NOFOLLOW, as for the worktree's .git; no sandbox runs now).
      scratch: this.volumes && (await this.volumes.mounted(row.slug)) ? this.paths.sandboxGit(row.slug) : this.paths.scratchRoot,
      owner: canChown() ? OWNER : null,
      fresh: o.fresh,
    });
  }

  /**
   * Move the non-empty ones of the slug's thread/state dirs to <archive>/<slug>-<ts>/<kind> and delete empty
   * ones. Returns the archive's name (not its host path) or null when nothing was kept.
   */
  private async archive(slug: string, kinds: Array<'thread' | 'state'>): Promise<string | null> {
    let dest: string | null = null;
    for (const kind of kinds) {
      const src = kind === 'thread' ? this.paths.thread(slug) : this.paths.state(slug);
      if (!(await isNonEmptyDir(src))) {
        await removeDir(src);
        continue;
      }
      if (!dest) {
        let at = Date.now();
        dest = this.paths.archiveFor(slug, new Date(at));
        while (existsSync(dest)) dest = this.paths.archiveFor(slug, new Date(++at));
        await mkdir(dest, { recursive: true });
      }
      await moveInto(src, join(dest, kind));
    }
    return dest ? basename(dest) : null;
  }

  /** What the runtime is asked to run: the host dirs, the env, the overlay files (their targets made here) and the policy. */
  private async spec(row: WorkspaceRow): Promise<WorkspaceSpec> {
    const config = await readProjectConfig(this.paths.projectConfig(row.project));
    const worktree = this.paths.worktree(row.project, row.name);
    const { mounts, refused } = await this.lock.withLock(row.project, async () =>
      prepareMountTargets(await this.currentOverlay(row.project), worktree, canChown() ? OWNER : null),
    );
    if (refused.length) this.log.warn({ slug: row.slug, refused }, 'overlay files not mounted: a symlink or a non-directory is in the way');
    return {
      slug: row.slug,
      project: row.project,
      worktreePath: worktree,
      sandboxGitDir: this.paths.sandboxGit(row.slug),
      gitCommonDir: this.paths.repo(row.project),
      threadDir: this.paths.thread(row.slug),
      stateDir: this.paths.state(row.slug),
      // The runtime adds its proxy variables and the identity (GROVE_SLUG, GROVE_PROJECT) after these.
      env: { GROVE_PROVIDER: 'scripted', ...this.opts.sandboxEnv, ...agentSandboxEnv(config) },
      limits: this.limits,
      overlay: mounts.map((m) => ({ hostPath: m.hostPath, path: m.path })),
      egressPolicy: await this.policyOf(row),
    };
  }

  /** The agent session id from the backend's /status, kept so a reopened workspace resumes it. Best effort. */
  private async agentSession(slug: string): Promise<string | null> {
    try {
      const { status, body } = await getOverSocket(this.paths.socket(slug), '/status', 1_000);
      const id = status === 200 ? (body as { agentSessionId?: unknown } | null)?.agentSessionId : null;
      return typeof id === 'string' && id ? id : null;
    } catch {
      return null;
    }
  }
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
  return new GroveImpl(createContext(opts, paths, store));
}
