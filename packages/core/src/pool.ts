/**
 * The warm pool (GROVE_WARM_POOL): a few hardened sandboxes started ahead of the next fork, so a fork takes one whose
 * backend already answers instead of waiting for a container to start. A mount cannot be added to a running
 * container, so each warm sandbox is started on dirs of its own (<home>/pool/<id>/{worktree,sandbox-git,run,thread,
 * state}); a fork that takes it renames them to its workspace's paths (rename(2) on one filesystem: the bind mounts
 * follow the inodes) and the runtime renames the container and tells its backend the slug (WorkspaceRuntime.claimWarm).
 * The worktree is prepared when the warm sandbox is made, before its container starts (nothing has run in it while the
 * host checks it out and chowns it): detached at the default branch's tip. A fork moves it to its base when that is
 * another commit (read-tree of the files that differ), creates its branch there and points the host-only admin dir at
 * its path and branch (takeWorktree, moveInto); only a fork whose branch exists already has the prepared worktree
 * emptied in place and adds its own into the dir, as a cold fork does. With disk quotas the worktree, state and git
 * dirs live in the warm sandbox's own disk image (<id>/volume, mounted at <id>/volume/fs and mounted into the sandbox
 * from there); a claim renames that dir to volumes/<slug> and binds it onto the workspace's paths, as a cold fork's
 * image is.
 *
 * A reopen takes one too, without disk images (takeForReopen, moveUnder): the stopped workspace's worktree, sandbox
 * git dir, state and thread are renamed entry by entry into the warm sandbox's mounted dirs, which then take the
 * workspace's paths. With disk quotas a reopen starts cold: the work is in the workspace's own disk image and the warm
 * sandbox mounts dirs of another filesystem (its own image), so nothing can be renamed across, and a copy of the work
 * costs more than the cold start saves. Making it possible would take mounts that reach a running container (rslave
 * propagation on the warm sandbox's binds over a shared host mount, so that the workspace's image bound there later
 * shows inside), a change to the sandbox's hardened mount set that this does not make.
 *
 * Rules: a warm sandbox is made with the same driver path, limits, image and egress floor as any (no gate at all
 * until it is claimed, and no agent process runs in it before); one is taken synchronously from the check to the
 * mark, so two forks never get the same one; a failed claim or fork removes it, and one a previous process left is
 * removed at reconcile (recycle), so none is ever handed out twice or to a second workspace. Warm ones hold slots only
 * while nobody needs them: they are made while running + creating + warm < cap with nobody in line, and a fork or
 * reopen that needs the slot makes one give way (giveWay).
 */
import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, readdir, realpath, rename, rm, rmdir } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { parseSlug, warmIdSchema } from '@grove/contracts';
import type { GroveEvent, ProjectConfig } from '@grove/contracts';
import type { WorkspaceRow } from '@grove/db';
import type { WarmSpec } from '@grove/runtime';
import { reasonOf } from './context.ts';
import type { GroveContext } from './context.ts';
import { canChown, chownTree, ensureDirs, isEmptyDir, readRegularFile, removeDir, replaceFile } from './fsutil.ts';
import { addDetachedWorktree, createBranchAt, moveDetachedWorktree, resolveCommit } from './git.ts';
import { listOverlay, overlaySettings } from './overlay.ts';
import { under } from './paths.ts';
import * as projects from './projects.ts';
import { OWNER, sandboxEnv, volumeTargets } from './workspace-host.ts';

/**
 * The worktree a warm sandbox was made with: detached at the project's default branch's tip as it was then, checked
 * out and handed to the agent's user before the container started (so before anything ran in it).
 */
interface PreparedWorktree {
  readonly commit: string;
  /** Its admin dir in <repo>/worktrees: host-only, never mounted. */
  readonly adminDir: string;
}

/** A warm sandbox a fork took (take): its dirs go to the workspace (moveInto), then it is claimed or removed. */
export interface WarmSandbox {
  readonly id: string;
  readonly project: string;
}

interface Entry extends WarmSandbox {
  /** The backend env it was started with: a fork whose config gives another one starts cold. */
  readonly env: string;
  state: 'starting' | 'ready' | 'taken';
  readonly abort: AbortController;
  /** Null: its worktree dir is empty and the fork adds the worktree as a cold fork does. */
  prepared: PreparedWorktree | null;
}

/** A warm sandbox's dirs, and where each goes in its workspace. */
const DIRS = ['worktree', 'sandbox-git', 'run', 'thread', 'state'] as const;
type WarmDir = (typeof DIRS)[number];

/** Events after which a slot may be free for a warm sandbox (or a warm one may be gone). */
const REFILL_ON = new Set(['workspace.registered', 'workspace.started', 'workspace.stopped', 'workspace.cleaned', 'spawn_failed', 'sandbox.died', 'project.added']);

export class WarmPool {
  private readonly entries = new Map<string, Entry>();
  /** The project the next fork is most likely of: the last one forked, else the first registered. */
  private target: string | null = null;
  private filling: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private readonly unsubscribe: () => void;
  /** Projects whose read-only overlay files keep them cold (such a mount must exist when the container starts). */
  private readonly skipped = new Set<string>();

  constructor(
    private readonly ctx: GroveContext,
    private readonly size: number,
  ) {
    this.unsubscribe = ctx.onEvent((e) => this.onEvent(e));
  }

  /** Off with GROVE_WARM_POOL=0 or on a runtime without warm sandboxes. */
  get enabled(): boolean {
    return this.size > 0 && this.ctx.runtime.warmPool;
  }

  /** Warm sandboxes holding a slot now (starting or ready): capacity's `warm`. */
  count(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.state !== 'taken') n++;
    return n;
  }

  /** Ready ones only (the benchmark and tests wait for one). */
  ready(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.state === 'ready') n++;
    return n;
  }

  /**
   * A ready warm sandbox for a fork of `project` with `config`, marked taken, or null (the fork starts cold). Nothing
   * may sit at the fork's worktree path (a worktree kept by a failed fork stays the cold path's to deal with), and no
   * read-only overlay file may be configured (its mount would have to exist when the container started).
   */
  async take(project: string, config: ProjectConfig, worktreePath: string): Promise<WarmSandbox | null> {
    if (!this.enabled || this.closed) return null;
    this.target = project;
    if (existsSync(worktreePath)) return null;
    if (await this.mountsOverlay(project, config)) return null;
    return this.pick(project, config, 'a fork');
  }

  /**
   * A ready warm sandbox for reopening a stopped workspace of `project`, marked taken, or null (the reopen starts
   * cold). Only without disk images: a stopped workspace's files are in its own image and a warm sandbox's mounts are
   * dirs of another (its own), and a file cannot be renamed from one filesystem to another; moving them would be a copy
   * of the whole worktree, slower than the cold start it saves (see the header).
   */
  async takeForReopen(project: string, config: ProjectConfig): Promise<WarmSandbox | null> {
    if (!this.enabled || this.closed || this.ctx.volumes) return null;
    if (await this.mountsOverlay(project, config)) return null;
    return this.pick(project, config, 'a reopen');
  }

  private pick(project: string, config: ProjectConfig, by: string): WarmSandbox | null {
    const env = JSON.stringify(sandboxEnv(this.ctx, config));
    // From here to the mark nothing awaits: one fork per warm sandbox.
    for (const e of this.entries.values()) {
      if (e.state !== 'ready' || e.project !== project) continue;
      if (e.env !== env) {
        // Made before the config changed: of no use to anyone now.
        void this.discard(e);
        continue;
      }
      e.state = 'taken';
      this.ctx.log.info({ pool: e.id, project }, `warm sandbox taken by ${by}`);
      return e;
    }
    return null;
  }

  /** The paths of a workspace's dirs that a warm sandbox's dirs become (the same set, one for one). */
  private workspaceDirs(row: WorkspaceRow): Record<WarmDir, string> {
    const { paths } = this.ctx;
    return {
      worktree: paths.worktree(row.project, row.name),
      'sandbox-git': paths.sandboxGit(row.slug),
      run: paths.run(row.slug),
      thread: paths.thread(row.slug),
      state: paths.state(row.slug),
    };
  }

  /**
   * Move a taken warm sandbox's dirs to the workspace's paths; the caller cleared those (none may exist). Under the
   * repository lock, before `git worktree add` writes into the empty worktree. The dirs are the host's own and nothing
   * ran in them, but only real directories move, and the worktree must still be empty: the add would otherwise
   * replace the directory the container has mounted.
   */
  async moveInto(w: WarmSandbox, row: WorkspaceRow, o: { prepared: boolean }): Promise<string | null> {
    const { volumes } = this.ctx;
    const from = this.dirsOf(w.id);
    const to = this.workspaceDirs(row);
    // With a disk image, the agent's three dirs are in it and come with it; the backend's two move on their own.
    const moved: readonly WarmDir[] = volumes ? ['run', 'thread'] : DIRS;
    const inside = volumes ? join(this.volumeOf(w.id), 'fs', 'worktree') : from.worktree;
    for (const d of DIRS) {
      if (existsSync(to[d])) throw new Error(`${to[d]} exists; the warm sandbox's ${d} cannot take its place`);
      if (!moved.includes(d)) continue;
      const st = await lstat(from[d]);
      if (!st.isDirectory()) throw new Error(`the warm sandbox's ${d} is not a directory`);
    }
    if (!(await lstat(inside)).isDirectory()) throw new Error("the warm sandbox's worktree is not a directory");
    if (!o.prepared && !(await isEmptyDir(inside))) throw new Error("the warm sandbox's worktree is not an empty directory");
    for (const d of moved) {
      // The roots stay root's and traversable (the sandbox-git root must not be the agent's: sandbox-git.ts).
      await mkdir(dirname(to[d]), { recursive: true, mode: 0o755 });
      await rename(from[d], to[d]);
    }
    if (volumes) {
      await volumes.adoptWarm(this.volumeOf(w.id), row.slug);
      if (!(await volumes.ensure(row.slug, volumeTargets(this.ctx, row), { create: false }))) throw new Error("the warm sandbox's disk image is gone");
    }
    const e = this.entries.get(w.id);
    const prepared = e?.prepared;
    if (!o.prepared) return null;
    if (!e || !prepared) throw new Error(`the warm sandbox ${w.id} has no prepared worktree any more`);
    // The worktree is at the workspace's path now: its admin dir says so (what `git worktree add` would have written
    // there), and its HEAD names the fork's branch, which takeWorktree created at the same commit. All are files of
    // the host's admin dir; nothing in the worktree is read. The admin dir takes the name `git worktree add` would
    // have given it (the worktree's basename) when that is free, so the layout is a cold fork's.
    let adminDir = prepared.adminDir;
    const named = join(dirname(adminDir), basename(to.worktree));
    if (!existsSync(named)) {
      await rename(adminDir, named);
      adminDir = named;
      e.prepared = { ...prepared, adminDir };
    }
    const gitdir = join(await realpath(to.worktree), '.git');
    await replaceFile({ target: join(adminDir, 'gitdir'), tmpDir: adminDir, content: Buffer.from(`${gitdir}\n`), owner: null });
    await replaceFile({ target: join(adminDir, 'HEAD'), tmpDir: adminDir, content: Buffer.from(`ref: refs/heads/${row.branch}\n`), owner: null });
    return adminDir;
  }

  /**
   * A reopen's counterpart of moveInto, under the repository lock (no disk images: takeForReopen). The stopped
   * workspace's worktree, sandbox git dir, state and thread keep their paths but move into the warm sandbox's (mounted)
   * dirs: each entry is renamed into the warm dir (rename(2) moves a link or a FIFO as itself and follows nothing; no
   * agent runs while its workspace is stopped), then the emptied workspace dir goes and the warm one is renamed to its
   * path, so the running container's mounts see the work. The run dir holds only sockets of the last run: the warm
   * one (its backend's socket in it) takes its place. A dir that cannot be moved has what was moved put back.
   */
  async moveUnder(w: WarmSandbox, row: WorkspaceRow): Promise<void> {
    const { paths } = this.ctx;
    const e = this.entries.get(w.id);
    if (!e) throw new Error(`the warm sandbox ${w.id} is not the pool's`);
    const from = this.dirsOf(w.id);
    const to = this.workspaceDirs(row);
    // The reopen has its own worktree: the one prepared for a fork goes first.
    await this.dropWorktree(e);
    for (const d of DIRS) {
      const [warm, mine] = await Promise.all([lstat(from[d]), lstat(to[d]).catch(() => null)]);
      // Its run dir holds its backend's socket; the others hold nothing (the prepared worktree was dropped above).
      if (!warm.isDirectory() || (d !== 'run' && !(await isEmptyDir(from[d])))) throw new Error(`the warm sandbox's ${d} is not an empty directory`);
      if (mine && !mine.isDirectory()) throw new Error(`${to[d]} is not a directory`);
      if (mine && mine.dev !== warm.dev) throw new Error(`${to[d]} is on another filesystem than the warm sandbox's ${d}`);
    }
    for (const d of DIRS) {
      await mkdir(dirname(to[d]), { recursive: true, mode: 0o755 });
      if (d === 'run' || !existsSync(to[d])) {
        await removeDir(to[d]);
        await rename(from[d], to[d]);
        continue;
      }
      // Work that cannot go back after a failure leaves the pool's dir (removed with the warm sandbox) for the archive.
      const keep = async (err: unknown): Promise<void> => {
        if (await isEmptyDir(from[d])) return;
        const kept = join(paths.archiveFor(row.slug, new Date()), d);
        await mkdir(dirname(kept), { recursive: true });
        await rename(from[d], kept);
        this.ctx.log.error({ err, slug: row.slug, kept }, `the reopen's ${d} could not be put back; kept at ${kept}`);
      };
      try {
        await moveEntries(to[d], from[d]);
      } catch (err) {
        await keep(err);
        throw err;
      }
      // The emptied dir steps aside rather than going first, so a failed swap can put everything back where it was.
      const aside = `${to[d]}.grove-${randomBytes(4).toString('hex')}`;
      try {
        await rename(to[d], aside);
        try {
          await rename(from[d], to[d]);
        } catch (err) {
          await rename(aside, to[d]);
          throw err;
        }
      } catch (err) {
        await moveEntries(from[d], to[d]).catch(keep);
        throw err;
      }
      await rmdir(aside);
    }
  }

  /**
   * Under the repository lock, before moveInto: whether the warm sandbox's prepared worktree serves this fork. It does
   * when it is still detached where it was made (moved first to the fork's base when that is another commit) and the
   * fork's branch could be created there (it did not exist); then the branch exists on return (true), and moveInto
   * points the worktree at it. Else the prepared worktree is dropped (its dir emptied in place, the container's mount
   * stays on it, its admin dir removed) and the fork adds its worktree as a cold one does (false).
   */
  async takeWorktree(w: WarmSandbox, branch: string, baseCommit: string): Promise<boolean> {
    const e = this.entries.get(w.id);
    const prepared = e?.prepared;
    if (!e || !prepared) return false;
    const repo = this.ctx.paths.repo(w.project);
    // The admin dir is the host's own, but it is checked, not assumed: a real dir whose HEAD is where it was made.
    const head = (await lstat(prepared.adminDir).catch(() => null))?.isDirectory() ? await readRegularFile(join(prepared.adminDir, 'HEAD'), 256) : null;
    let fits = head?.toString('utf8').trim() === prepared.commit;
    if (fits && prepared.commit !== baseCommit) {
      // The base moved since (the fetch before this fork brought commits) or is another one: only the files that
      // differ are written, by host git in a tree nothing else has written to, then handed to the agent's user.
      const dir = this.worktreeDirOf(w.id);
      try {
        await moveDetachedWorktree({ adminDir: prepared.adminDir, path: dir, from: prepared.commit, to: baseCommit });
        await chownTree(dir, OWNER.uid, OWNER.gid);
        e.prepared = { ...prepared, commit: baseCommit };
      } catch (err) {
        this.ctx.log.warn({ err, pool: w.id }, `could not move the prepared worktree to ${baseCommit}: ${reasonOf(err)}`);
        fits = false;
      }
    }
    if (fits && (await createBranchAt(repo, branch, baseCommit))) return true;
    this.ctx.log.info({ pool: w.id, branch, base: baseCommit, prepared: prepared.commit }, "the warm sandbox's prepared worktree does not fit this fork; adding the fork's own");
    await this.dropWorktree(e);
    return false;
  }

  /** A fork's claim succeeded: the sandbox is its workspace's now, and its (emptied) pool dir goes. Never throws. */
  async claimed(w: WarmSandbox): Promise<void> {
    this.entries.delete(w.id);
    await removeDir(this.ctx.paths.warm(w.id)).catch((err: unknown) => this.ctx.log.warn({ err, pool: w.id }, 'could not remove a claimed warm sandbox dir'));
  }

  /** A fork that took it failed or fell back to a cold start: never handed out again. Never throws. */
  async release(w: WarmSandbox): Promise<void> {
    const e = this.entries.get(w.id);
    if (e) await this.discard(e);
    else await this.removeWarm(w.id);
  }

  /** Make room for a workspace that needs a slot a warm sandbox holds: starting ones go first, then ready ones. */
  async giveWay(): Promise<void> {
    if (this.count() === 0) return;
    const c = await this.ctx.store.capacity(this.ctx.opts.maxRunning);
    let over = c.running + c.creating + this.count() - c.cap;
    const order = [...this.entries.values()].filter((e) => e.state !== 'taken').sort((a, b) => (a.state === b.state ? 0 : a.state === 'starting' ? -1 : 1));
    for (const e of order) {
      if (over <= 0) return;
      this.ctx.log.info({ pool: e.id, ...c }, 'warm sandbox gives way to a workspace');
      await this.discard(e);
      over--;
    }
  }

  /** Start making warm sandboxes in the background while slots allow. Never throws. */
  refill(): void {
    if (!this.enabled || this.closed) return;
    if (this.filling) {
      this.again = true;
      return;
    }
    this.filling = this.fill()
      .catch((e: unknown) => this.ctx.log.warn({ err: e }, `warm pool refill failed: ${reasonOf(e)}`))
      .finally(() => {
        this.filling = null;
        if (!this.again) return;
        this.again = false;
        this.refill();
      });
  }

  /**
   * At reconcile, before anything else: every warm sandbox a previous process left (it may have been half claimed) is
   * removed with its dirs, never handed out. Claimed ones are workspaces' and reconcile's like any.
   */
  async recycle(): Promise<number> {
    const { ctx } = this;
    if (!ctx.runtime.warmPool) return 0;
    let n = 0;
    for (const w of await ctx.runtime.listWarm()) {
      if (w.claimed || this.entries.has(w.pool)) continue;
      await ctx.runtime.discardWarm(w.pool);
      n++;
    }
    const names = await readdir(ctx.paths.poolRoot).catch(() => [] as string[]);
    for (const name of names) {
      if (warmIdSchema.safeParse(name).success && this.entries.has(name)) continue;
      const dir = under(ctx.paths.poolRoot, name);
      // A disk image mounted there (its server died, the mount stayed) is unmounted before its dir goes.
      await ctx.volumes?.destroyWarm(join(dir, 'volume'));
      await removeDir(dir);
    }
    if (n > 0) ctx.log.info({ recycled: n }, 'warm sandboxes of a previous run removed');
    return n;
  }

  /** Stop refilling and remove the warm sandboxes (a workspace is never one of them). */
  async close(): Promise<void> {
    this.closed = true;
    this.unsubscribe();
    for (const e of this.entries.values()) e.abort.abort(new Error('server shutting down'));
    await this.filling;
    await Promise.allSettled([...this.entries.values()].filter((e) => e.state !== 'taken').map((e) => this.discard(e)));
  }

  private onEvent(e: GroveEvent): void {
    if (!REFILL_ON.has(e.type)) return;
    if (e.type === 'workspace.registered') this.target = parseSlug(e.slug).project;
    this.refill();
  }

  private async fill(): Promise<void> {
    const { ctx } = this;
    for (;;) {
      if (this.closed || ctx.closed) return;
      const project = this.target ?? (await ctx.store.projects())[0]?.name ?? null;
      if (!project) return;
      // Warm ones for another project hold slots the next fork cannot use.
      for (const e of this.entries.values()) if (e.state !== 'taken' && e.project !== project) await this.discard(e);
      if (this.count() >= this.size) return;
      const c = await ctx.store.capacity(ctx.opts.maxRunning);
      if (c.running + c.creating + this.count() >= c.cap || c.queued > 0) return;
      await ctx.runtime.ping();
      if (!(await this.make(project))) return;
    }
  }

  /** One warm sandbox for `project`, ready when this resolves true; false when it could not be (logged, removed). */
  private async make(project: string): Promise<boolean> {
    const { ctx } = this;
    const { paths } = ctx;
    const config = await projects.readConfig(ctx, project);
    if (await this.mountsOverlay(project, config)) {
      if (!this.skipped.has(project)) ctx.log.info({ project }, 'no warm sandbox for this project: its read-only overlay files are mounted when a sandbox starts');
      this.skipped.add(project);
      return false;
    }
    this.skipped.delete(project);
    const env = sandboxEnv(ctx, config);
    const id = randomBytes(6).toString('hex');
    const entry: Entry = { id, project, env: JSON.stringify(env), state: 'starting', abort: new AbortController(), prepared: null };
    this.entries.set(id, entry);
    const t0 = Date.now();
    try {
      const d = this.dirsOf(id);
      // Host-only like <home>/tmp: the sandbox sees its dirs through its mounts, nobody else sees the pool.
      await mkdir(paths.poolRoot, { recursive: true, mode: 0o700 });
      await mkdir(paths.warm(id), { mode: 0o700 });
      // The sandbox hides <repo>/worktrees under an empty tmpfs; before the project's first worktree there is no such
      // dir to mount on, and the read-only common dir cannot get one inside the container. Git makes it the same way.
      await mkdir(join(paths.repo(project), 'worktrees'), { recursive: true, mode: 0o755 });
      // As a fork makes a workspace's: the agent's three (in its own disk image under a quota), and the backend's two
      // (root's, 0700).
      const disk = ctx.volumes ? await ctx.volumes.makeWarm(this.volumeOf(id)) : null;
      if (!disk) await ensureDirs([d.worktree, d['sandbox-git'], d.state], canChown() ? OWNER : undefined);
      await ensureDirs([d.run, d.thread]);
      if (canChown()) for (const dir of [d.run, d.thread]) await chmod(dir, 0o700);
      // The next fork's worktree, checked out now rather than while that fork waits (takeWorktree), before the
      // container starts: nothing has run in the sandbox while the host writes and chowns it.
      entry.prepared = await this.prepareWorktree(project, disk?.worktree ?? d.worktree);
      const spec: WarmSpec = {
        pool: id,
        project,
        worktreePath: disk?.worktree ?? d.worktree,
        sandboxGitDir: disk?.git ?? d['sandbox-git'],
        gitCommonDir: paths.repo(project),
        threadDir: d.thread,
        stateDir: disk?.state ?? d.state,
        runDir: d.run,
        env,
        limits: ctx.limits,
        overlay: [],
      };
      await ctx.runtime.startWarm(spec, { signal: entry.abort.signal });
      if (entry.state !== 'starting' || !this.entries.has(id)) {
        // Gave way while it started: its removal may have run before the container (or its prepared worktree) existed.
        await this.removeWarm(id, entry);
        return false;
      }
      entry.state = 'ready';
      ctx.log.info({ pool: id, project, ms: Date.now() - t0 }, 'warm sandbox ready');
      return true;
    } catch (e) {
      ctx.log.warn({ err: e, pool: id, project }, `warm sandbox could not be made: ${reasonOf(e)}`);
      await this.discard(entry);
      return false;
    }
  }

  /** Remove a warm sandbox that is not (or no longer) to be handed out: its container and its dirs. Never throws. */
  private async discard(e: Entry): Promise<void> {
    this.entries.delete(e.id);
    e.abort.abort(new Error('warm sandbox discarded'));
    await this.removeWarm(e.id, e);
  }

  private async removeWarm(id: string, e?: Entry): Promise<void> {
    try {
      await this.ctx.runtime.discardWarm(id);
      // Its prepared worktree's admin dir, unless a fork took the worktree (its admin dir is that workspace's now).
      const prepared = e?.prepared;
      if (e && prepared) await this.ctx.lock.withLock(e.project, () => this.dropAdminDir(e, prepared));
      // Its disk image (if a claim did not take it) is unmounted before the dir goes: rm -r must not reach into it.
      await this.ctx.volumes?.destroyWarm(this.volumeOf(id));
      await removeDir(this.ctx.paths.warm(id));
    } catch (err) {
      this.ctx.log.warn({ err, pool: id }, `could not remove warm sandbox ${id}: ${reasonOf(err)}`);
    }
  }

  /**
   * The project's default branch checked out detached into dir (empty, the warm sandbox's worktree dir), handed to the
   * agent's user as a fork's is. Null when it cannot be (logged): the warm sandbox serves with an empty worktree dir.
   */
  private async prepareWorktree(project: string, dir: string): Promise<PreparedWorktree | null> {
    const { ctx } = this;
    try {
      return await ctx.lock.withLock(project, async () => {
        const p = await ctx.store.project(project);
        const repo = ctx.paths.repo(project);
        const commit = p ? await resolveCommit(repo, p.defaultBranch) : null;
        if (!commit) return null;
        const adminDir = await addDetachedWorktree(repo, dir, commit);
        await chownTree(dir, OWNER.uid, OWNER.gid);
        return { commit, adminDir };
      });
    } catch (err) {
      ctx.log.warn({ err, project }, `warm sandbox without a prepared worktree: ${reasonOf(err)}`);
      await emptyDir(dir);
      return null;
    }
  }

  /** A prepared worktree no fork takes: its dir emptied in place (the container mounts it) and its admin dir removed. */
  private async dropWorktree(e: Entry): Promise<void> {
    const prepared = e.prepared;
    if (!prepared) return;
    await emptyDir(this.worktreeDirOf(e.id));
    await this.dropAdminDir(e, prepared);
  }

  /** The admin dir of a prepared worktree still in the pool (its gitdir names the pool's path). Under the lock. */
  private async dropAdminDir(e: Entry, prepared: PreparedWorktree): Promise<void> {
    const root = this.ctx.paths.warm(e.id);
    const real = await realpath(root).catch(() => root);
    const gitdir = (await readRegularFile(join(prepared.adminDir, 'gitdir'), 4096))?.toString('utf8').trim() ?? null;
    if (gitdir !== null && !gitdir.startsWith(`${root}/`) && !gitdir.startsWith(`${real}/`)) return;
    await rm(prepared.adminDir, { recursive: true, force: true });
    e.prepared = null;
  }

  /** Whether the project has read-only overlay files (read only: no write to the repository outside its lock). */
  private async mountsOverlay(project: string, config: ProjectConfig): Promise<boolean> {
    return (await listOverlay(this.ctx.paths.overlay(project), overlaySettings(config))).some((f) => !f.writable);
  }

  /** Where the warm sandbox's worktree is while it is the pool's: in its disk image, or its own dir. */
  private worktreeDirOf(id: string): string {
    return this.ctx.volumes ? join(this.volumeOf(id), 'fs', 'worktree') : this.dirsOf(id).worktree;
  }

  /** <id>/volume: the warm sandbox's disk image and its mount point, under a quota. */
  private volumeOf(id: string): string {
    return join(this.ctx.paths.warm(id), 'volume');
  }

  private dirsOf(id: string): Record<WarmDir, string> {
    const root = this.ctx.paths.warm(id);
    return { worktree: join(root, 'worktree'), 'sandbox-git': join(root, 'sandbox-git'), run: join(root, 'run'), thread: join(root, 'thread'), state: join(root, 'state') };
  }
}

/**
 * Every entry of `from` renamed into `to` (empty); on a failure the ones moved go back (as many as can: the caller
 * looks at what is left in `to`) and the error is thrown.
 */
async function moveEntries(from: string, to: string): Promise<void> {
  const moved: string[] = [];
  try {
    for (const name of await readdir(from)) {
      await rename(join(from, name), join(to, name));
      moved.push(name);
    }
  } catch (e) {
    for (const name of moved) await rename(join(to, name), join(from, name)).catch(() => undefined);
    throw e;
  }
}

/** Remove what is in dir, keeping dir itself (a container may have it mounted); rm never follows a link. */
async function emptyDir(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) await rm(join(dir, name), { recursive: true, force: true });
}
