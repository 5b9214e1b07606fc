import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_GIT_SETTINGS, GroveError, threadLineSchema } from '@grove/contracts';
import type { CheckpointRequest, CheckpointResponse, DiffResponse, PublishRequest, ProjectConfig, PublishResponse, PullRequest, PullRequestResponse } from '@grove/contracts';
import type { ProjectRow, WorkspaceRow } from '@grove/db';
import { aheadBehind, commitsNotIn, diffFiles, diffPatch, mergeBase, resolveCommit, worktreeAdminDir } from './git.ts';
import { changedPaths, checkpointWorktree, snapshotWorktree } from './git-snapshot.ts';
import { openStore } from './git-store.ts';
import { createForge } from './forge.ts';
import type { ForgePull } from './forge.ts';
import { RemoteGitError, deleteRemoteBranch, fetchPrune, fetchPullHead, originUrl, pullHeadRef, pushBranch } from './remote.ts';
import type { PushResult } from './remote.ts';
import { reasonOf, requireAny, requireLive, requireProject } from './context.ts';
import type { GroveContext } from './context.ts';
import { loadProject, readConfig } from './projects.ts';
import { LIVE_STATES } from './registry.ts';

/**
 * Merge-back through pull requests (docs/git-flow.md): host checkpoints, the diff against the fork point,
 * fetching the primary clone before a fork, and publish (checkpoint, push, pull request). Everything git
 * does here runs on the host; a sandbox never holds a credential.
 */

export const DEFAULT_DIFF_BYTES = 1024 * 1024;
/** A fetch of an unreachable remote must not hold the repository lock (and block forks) for long. */
const FETCH_BEFORE_FORK_MS = 20_000;
/** A thread larger than this is not read for a commit subject. */
const MAX_THREAD_BYTES = 16 * 1024 * 1024;

/** What git flow needs beyond the shared context: the server's forge token and ssh command, and who owns worktree files. */
export interface GitFlowOptions {
  forgeToken: string | null;
  /** GROVE_GIT_SSH_COMMAND, validated; null: plain ssh with the server user's ~/.ssh. */
  sshCommand: string | null;
  /** Owner of the worktree's index after a checkpoint (the sandbox uid), when the host may chown. */
  owner: { uid: number; gid: number } | null;
}

const PUSH_HINT: Record<string, string> = {
  non_fast_forward: 'the remote branch has commits this branch does not (someone else pushed to it); nothing was overwritten',
  remote_rejected: 'the remote refused the branch (a protected branch or a hook)',
  auth: 'the remote refused this host\'s credentials (its ssh key, or GROVE_FORGE_TOKEN for an https remote on the forge\'s host)',
  unreachable: 'the remote could not be reached',
  not_a_repository: 'there is no repository at the project\'s remote any more',
  other: 'see the message',
};

function pushError(e: unknown, branch: string): GroveError {
  if (!(e instanceof RemoteGitError)) return new GroveError('git_failed', `pushing ${branch}: ${reasonOf(e)}`, { cause: e });
  const message = `pushing ${branch} failed: ${PUSH_HINT[e.reason] ?? ''} (${e.message})`;
  const code = e.reason === 'non_fast_forward' || e.reason === 'remote_rejected' ? 'push_rejected' : 'remote_failed';
  return new GroveError(code, message, { details: { reason: e.reason, branch } });
}

/** The watcher's verdict on one workspace: its pull request ended and nothing holds it, so it is to be torn down. */
export interface CleanupDecision {
  slug: string;
  reason: string;
}

/** One pass of the watcher: what it saw, and the cleanups it decided, which the caller (the lifecycle) carries out. */
export interface WatchPass {
  result: WatchResult;
  cleanup: CleanupDecision[];
}

export interface WatchResult {
  fetched: string[];
  /** Projects whose fetch failed, with the reason (their workspaces were still checked). */
  fetchFailed: Array<{ project: string; reason: string }>;
  /** held: why a merged or closed one was kept instead of cleaned up (work the cleanup would remove). */
  changed: Array<{ slug: string; from: string; to: string; cleaned: boolean; held?: string }>;
}

export class GitFlow {
  /** When (performance.now()) the last fetch that succeeded started, per project: a fork asked for after it shares it. */
  private readonly fetchedAt = new Map<string, number>();

  constructor(
    private readonly ctx: GroveContext,
    private readonly o: GitFlowOptions,
  ) {}

  /** The ssh remote git runs (GROVE_GIT_SSH_COMMAND), for the clone of a new project too. */
  get sshCommand(): string | null {
    return this.o.sshCommand;
  }

  /**
   * One pass of the scheduled work: fetch --prune every project's primary clone, then derive each published
   * workspace's pull-request state from the remote — the forge's answer, or, when the forge cannot say (none
   * configured, no token, unreachable), whether the branch's tip is contained in the default branch after the
   * fetch (merged). A merged or closed one is torn down (the branch is kept) unless keepCheckoutOnClose says
   * otherwise (the workspace's, else the project's) or cleanup would remove work: uncommitted changes, or commits
   * after the head the pull request took in. Then it is kept, and cleanupHeld says why; later passes look again
   * and clean up once nothing holds it. The teardowns are not done here: the pass returns them as decisions.
   */
  async watch(): Promise<WatchPass> {
    const result: WatchResult = { fetched: [], fetchFailed: [], changed: [] };
    const cleanup: CleanupDecision[] = [];
    for (const p of await this.ctx.store.projects()) {
      const repo = this.ctx.paths.repo(p.name);
      try {
        if (!(await originUrl(repo))) continue;
        await this.ctx.lock.withLock(p.name, async () => {
          const started = performance.now();
          await fetchPrune(repo, { timeoutMs: FETCH_BEFORE_FORK_MS, sshCommand: this.o.sshCommand });
          this.fetchedAt.set(p.name, started);
        });
        result.fetched.push(p.name);
      } catch (e) {
        result.fetchFailed.push({ project: p.name, reason: reasonOf(e) });
        this.ctx.log.warn({ project: p.name }, `scheduled fetch of ${p.name} failed: ${reasonOf(e)}`);
      }
    }
    for (const row of await this.ctx.store.rows({ states: LIVE_STATES })) {
      if (!row.prNumber || !row.prState) continue;
      // Open ones for their state; ended ones that were kept for work, to see whether it is still there.
      if (row.prState !== 'open' && row.cleanupHeld === null) continue;
      if (row.state !== 'running' && row.state !== 'stopped') continue;
      try {
        const change = await this.check(row);
        if (change) result.changed.push(change);
        if (change?.cleaned) cleanup.push({ slug: row.slug, reason: `pull request #${row.prNumber} ${change.to}` });
      } catch (e) {
        this.ctx.log.warn({ slug: row.slug }, `pull-request check of ${row.slug} failed: ${reasonOf(e)}`);
      }
    }
    return { result, cleanup };
  }

  private async check(row: WorkspaceRow): Promise<WatchResult['changed'][number] | null> {
    const { project, config } = await loadProject(this.ctx, row.project);
    const number = row.prNumber ?? 0;
    let state: PullRequest['state'] | null = null;
    let source = 'forge';
    let headSha: string | null = null;
    if (config.forge && this.o.forgeToken) {
      try {
        const pr = await createForge(config.forge, this.o.forgeToken).getPullRequest(number);
        state = pr.state;
        headSha = pr.headSha;
      } catch (e) {
        this.ctx.log.warn({ slug: row.slug }, `forge could not say the state of #${number}; checking the branch instead: ${reasonOf(e)}`);
      }
    }
    if (state === null) {
      source = 'branch';
      const repo = this.ctx.paths.repo(row.project);
      const contained = await this.ctx.lock.withLock(row.project, async () => {
        const tip = await resolveCommit(repo, `refs/heads/${row.branch}`);
        const main = await resolveCommit(repo, `refs/heads/${project.defaultBranch}`);
        return tip !== null && main !== null && (await mergeBase(repo, tip, main)) === tip;
      });
      state = contained ? 'merged' : 'open';
    }
    const changed = state !== row.prState;
    const from = row.prState ?? 'open';
    if (changed) await this.savePullRequest(row.id, { url: row.prUrl ?? '', number, state });
    if (state === 'open') {
      if (!changed) return null;
      await this.ctx.emit(row.slug, 'workspace.pr_state', { workspaceId: row.id, number, from, to: state, source, cleanup: false });
      return { slug: row.slug, from, to: state, cleaned: false };
    }
    const keep = (row.keepCheckoutOnClose ?? config.keepCheckoutOnClose) === true;
    const held = keep ? null : await this.holdReason(row, project, headSha);
    const cleaned = !keep && held === null;
    if (changed) await this.ctx.emit(row.slug, 'workspace.pr_state', { workspaceId: row.id, number, from, to: state, source, cleanup: cleaned, ...(held ? { held } : {}) });
    if (held !== null) {
      // Recorded once, when the hold starts; later passes only refresh the reason the card shows.
      if (row.cleanupHeld === null) await this.ctx.emit(row.slug, 'workspace.kept', { workspaceId: row.id, reason: held, pr: number, state });
      if (held !== row.cleanupHeld) await this.setCleanupHeld(row.id, held);
      if (!changed) return null;
      return { slug: row.slug, from, to: state, cleaned: false, held };
    }
    if (row.cleanupHeld !== null) await this.setCleanupHeld(row.id, null);
    if (!changed && !cleaned) return null;
    return { slug: row.slug, from, to: state, cleaned };
  }

  /**
   * What a cleanup after the pull request ended would remove, or null when nothing: uncommitted changes in the
   * worktree (teardown would only save them to a recovery ref), and commits on the branch that neither the
   * default branch nor the head the forge says the pull request took in contains. A head the primary clone does
   * not have (pushed from elsewhere) cannot vouch for anything, so only the default branch counts then: this
   * errs towards keeping.
   */
  private async holdReason(row: WorkspaceRow, project: ProjectRow, headSha: string | null): Promise<string | null> {
    const repo = this.ctx.paths.repo(row.project);
    const worktree = this.ctx.paths.worktree(row.project, row.name);
    return this.ctx.lock.withLock(row.project, async () => {
      const tip = await resolveCommit(repo, `refs/heads/${row.branch}`);
      if (!tip) return `its branch ${row.branch} is missing`;
      const bases: string[] = [];
      for (const ref of [`refs/heads/${project.defaultBranch}`, headSha]) {
        const commit = ref ? await resolveCommit(repo, ref) : null;
        if (commit) bases.push(commit);
      }
      const why: string[] = [];
      if (existsSync(worktree)) {
        // Into the workspace's private store: uncommitted work never lands in the primary every sandbox reads.
        const objects = this.ctx.paths.workspaceObjects(row.slug);
        await openStore(repo, objects, row.slug);
        const snap = await snapshotWorktree(repo, { worktree, parent: tip, objects });
        const files = snap.unchanged ? 0 : (await changedPaths(objects, tip, snap.tree)).length;
        if (files > 0) why.push(`${files} ${files === 1 ? 'file' : 'files'} changed since`);
      }
      const after = bases.length > 0 ? await commitsNotIn(repo, tip, bases) : 1;
      if (after > 0) why.push(`${after} ${after === 1 ? 'commit' : 'commits'} after the pull request's head`);
      return why.length > 0 ? why.join(', ') : null;
    });
  }

  /**
   * git fetch --prune of the primary clone before a fork, under the caller's repository lock. Never throws: an
   * unreachable remote leaves the fork to start from what the clone holds, and the reason is recorded.
   * `askedAt` (performance.now() when the fork was asked for): a fetch of the project that started after it (another
   * fork's, while this one waited for the lock) is as fresh as this fork's own would be, so none is run (shared).
   */
  async fetchBeforeFork(project: string, slug: string, askedAt?: number): Promise<{ ok: boolean; reason?: string; shared?: boolean }> {
    const repo = this.ctx.paths.repo(project);
    const last = this.fetchedAt.get(project);
    if (askedAt !== undefined && last !== undefined && last >= askedAt) return { ok: true, shared: true };
    if (!(await originUrl(repo))) return { ok: true };
    try {
      const started = performance.now();
      await fetchPrune(repo, { timeoutMs: FETCH_BEFORE_FORK_MS, sshCommand: this.o.sshCommand });
      this.fetchedAt.set(project, started);
      return { ok: true };
    } catch (e) {
      const reason = reasonOf(e);
      this.ctx.log.warn({ project, slug }, `fetch of ${project} before forking ${slug} failed; forking from what the clone holds: ${reason}`);
      await this.ctx.emit(slug, 'project.fetch_failed', { project, reason });
      return { ok: false, reason };
    }
  }

  /**
   * The base of a fork from pull request n, under the caller's repository lock: its head fetched from origin
   * into pullHeadRef(n), or — when it cannot be (no remote, no such pull request, unreachable) — the default
   * branch, with workspace.base_fallback saying why. Never throws.
   */
  async pullRequestBase(project: string, slug: string, o: { workspaceId: number; n: number }): Promise<string> {
    const repo = this.ctx.paths.repo(project);
    const fallback = (await requireProject(this.ctx, project)).defaultBranch;
    let reason: string;
    try {
      if (await originUrl(repo)) {
        await fetchPullHead(repo, o.n, { timeoutMs: FETCH_BEFORE_FORK_MS });
        if (await resolveCommit(repo, pullHeadRef(o.n))) return pullHeadRef(o.n);
        reason = `the remote's refs/pull/${o.n}/head is not a commit`;
      } else {
        reason = `project "${project}" has no remote to fetch pull requests from`;
      }
    } catch (e) {
      reason = `pull request #${o.n}'s head could not be fetched: ${reasonOf(e)}`;
    }
    this.ctx.log.warn({ project, slug }, `fork of ${slug} starts at ${fallback} instead of pull request #${o.n}: ${reason}`);
    await this.ctx.emit(slug, 'workspace.base_fallback', { workspaceId: o.workspaceId, wanted: `pull request #${o.n}`, base: fallback, reason });
    return fallback;
  }

  async checkpoint(slug: string, req: CheckpointRequest = {}): Promise<CheckpointResponse> {
    await requireLive(this.ctx, slug);
    return this.ctx.slugs.run(slug, () => this.checkpointNow(slug, req.message));
  }

  /**
   * The checkpoint after a turn that changed files, unless the project's git.checkpointAfterTurn is false. Runs
   * from the after-turn hook, under the repository lock but not the slug's mutex (a long publish must not hold
   * up the backend's turn); teardown removes worktrees under the same lock, so the two never overlap. Never
   * throws: a failed checkpoint is logged and the work stays in the worktree.
   */
  async checkpointAfterTurn(slug: string, turn: string, files: string[], config?: ProjectConfig): Promise<void> {
    await this.checkpointQuietly(slug, turn, files, { undo: false, config });
  }

  /**
   * After an undo put a turn's files back: the same checkpoint commits the undo, so the branch holds what the
   * worktree and thread show. The turn's own checkpoint stays in the history (it may already be pushed; a
   * branch is never rewritten under a pull request).
   */
  async checkpointAfterUndo(slug: string, turn: string, files: string[], config?: ProjectConfig): Promise<void> {
    await this.checkpointQuietly(slug, turn, files, { undo: true, config });
  }

  /** `config`: the project's, when the caller read it already (the after-turn hook does). */
  private async checkpointQuietly(slug: string, turn: string, files: string[], o: { undo: boolean; config: ProjectConfig | undefined }): Promise<void> {
    try {
      const row = await requireLive(this.ctx, slug);
      const config = o.config ?? (await readConfig(this.ctx, row.project));
      if (!(config.git ?? DEFAULT_GIT_SETTINGS).checkpointAfterTurn) return;
      await this.checkpointNow(slug, await this.turnMessage(slug, turn, files, o.undo), config);
    } catch (e) {
      this.ctx.log.warn({ slug, turn }, `checkpoint after ${turn} of ${slug} failed; the work stays in the worktree: ${reasonOf(e)}`);
    }
  }

  /**
   * "<first line of the turn's user message>" (cut to 72 characters; "Undo: " before it for an undo) with the turn and its files in the body.
   * The thread is written by the sandbox: it is only read (bounded) and parsed, and its text only ever becomes
   * a commit message argument.
   */
  private async turnMessage(slug: string, turn: string, files: string[], undo: boolean): Promise<string> {
    let subject = `grove: ${turn} of ${slug}`;
    try {
      const file = join(this.ctx.paths.thread(slug), 'thread.jsonl');
      if ((await stat(file)).size <= MAX_THREAD_BYTES) {
        for (const text of (await readFile(file, 'utf8')).split('\n')) {
          if (!text.includes(`"${turn}"`)) continue;
          let parsed;
          try {
            parsed = threadLineSchema.safeParse(JSON.parse(text));
          } catch {
            continue;
          }
          if (!parsed.success || parsed.data.kind !== 'user' || parsed.data.turn !== turn) continue;
          // eslint-disable-next-line no-control-regex
          const first = parsed.data.text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '').split('\n').find((l) => l.trim())?.trim();
          if (first) subject = first.length > 72 ? `${first.slice(0, 71)}…` : first;
          break;
        }
      }
    } catch {
      // No thread (yet): the generic subject.
    }
    const listed = files.slice(0, 50).join('\n');
    const more = files.length > 50 ? `\n… and ${files.length - 50} more` : '';
    const head = undo ? `Undo: ${subject}\n\nGrove undid ${turn} in ${slug}, which changed:` : `${subject}\n\nGrove ${turn} in ${slug} changed:`;
    return `${head}\n${listed}${more}\n`;
  }

  /** Under the slug's mutex, or the after-turn hook (see checkpointAfterTurn). `config`: the project's, if read already. */
  private async checkpointNow(slug: string, message: string | undefined, config?: ProjectConfig): Promise<CheckpointResponse> {
    const row = await requireLive(this.ctx, slug);
    if (row.state !== 'running' && row.state !== 'stopped') {
      throw new GroveError('invalid_state', `cannot checkpoint workspace "${slug}": it is ${row.state}`, { details: { slug, state: row.state } });
    }
    const worktree = this.ctx.paths.worktree(row.project, row.name);
    if (!existsSync(worktree)) {
      throw new GroveError('invalid_state', `workspace "${slug}" has no worktree; start it (POST /api/workspaces/${slug}/start) to bring it back`, { details: { slug } });
    }
    const who = (config ?? (await readConfig(this.ctx, row.project))).git ?? DEFAULT_GIT_SETTINGS;
    const repo = this.ctx.paths.repo(row.project);
    const sandboxGit = this.ctx.paths.sandboxGit(slug);
    const cp = await this.ctx.lock.withLock(row.project, async () =>
      checkpointWorktree(repo, {
        worktree,
        // The index the sandbox's git uses (its own git dir), else (a workspace not started since it got one) the host's
        // admin index, found from the host side: never through the worktree's .git, which the agent writes.
        indexPath: existsSync(sandboxGit) ? join(sandboxGit, 'index') : join(await worktreeAdminDir(repo, worktree), 'index'),
        scratch: this.ctx.paths.scratchRoot,
        branch: row.branch,
        message: message ?? `grove: checkpoint of ${slug}`,
        identity: { name: who.authorName, email: who.authorEmail },
        owner: this.o.owner,
      }),
    );
    if (cp.embedded.length > 0) this.ctx.log.info({ slug, embedded: cp.embedded }, `the checkpoint of ${slug} leaves out embedded repositories (kept as the branch has them): ${cp.embedded.join(', ')}`);
    if (cp.commit) await this.ctx.emit(slug, 'workspace.checkpoint', { workspaceId: row.id, branch: row.branch, commit: cp.commit, files: cp.files.length });
    return { commit: cp.commit, branch: row.branch, files: cp.files };
  }

  /** The workspace against its fork point: the worktree's content when it has one (checkpointed or not), else the branch. */
  async diff(slug: string, o: { maxBytes?: number } = {}): Promise<DiffResponse> {
    const row = await requireAny(this.ctx, slug);
    const project = await requireProject(this.ctx, row.project);
    const repo = this.ctx.paths.repo(row.project);
    const worktree = this.ctx.paths.worktree(row.project, row.name);
    const live = row.state !== 'gone' && row.state !== 'failed' && existsSync(worktree);
    return this.ctx.lock.withLock(row.project, async () => {
      const head = await resolveCommit(repo, `refs/heads/${row.branch}`);
      if (!head) throw new GroveError('not_found', `branch ${row.branch} of workspace "${slug}" does not exist`, { details: { slug } });
      const main = await resolveCommit(repo, `refs/heads/${project.defaultBranch}`);
      if (!main) throw new GroveError('git_failed', `default branch ${project.defaultBranch} of project "${row.project}" does not exist`);
      const base = (await mergeBase(repo, main, head)) ?? main;
      let to = head;
      let uncommitted = false;
      // The snapshot of uncommitted work goes into the workspace's private store, which also sees every object of
      // the primary (alternates): the diff is read there.
      let readFrom = repo;
      if (live) {
        const objects = this.ctx.paths.workspaceObjects(row.slug);
        await openStore(repo, objects, row.slug);
        const snap = await snapshotWorktree(repo, { worktree, parent: head, objects });
        uncommitted = !snap.unchanged;
        to = snap.tree;
        readFrom = objects;
      }
      const counts = await aheadBehind(repo, main, head);
      const files = await diffFiles(readFrom, base, to);
      const { patch, truncated } = await diffPatch(readFrom, base, to, o.maxBytes ?? DEFAULT_DIFF_BYTES);
      return { branch: row.branch, defaultBranch: project.defaultBranch, base, head, uncommitted, ...counts, files, patch, truncated };
    });
  }

  /**
   * The workspace's pull request as its forge reports it now: its state and the checks (CI) of its head commit, for
   * the Review view; and what the end of the pull request does to the workspace. Before a publish the pull request
   * is null and the forge is not asked. Only reads: a state the forge reports differently from the stored one is
   * left to the watcher, which also does the cleanup. A forge that is not configured is not_configured; one that
   * fails is forge_failed (502) with the reason.
   */
  async pullRequest(slug: string): Promise<PullRequestResponse> {
    const row = await requireAny(this.ctx, slug);
    const config = await readConfig(this.ctx, row.project);
    const cleanup = {
      keepCheckout: (row.keepCheckoutOnClose ?? config.keepCheckoutOnClose) === true,
      setBy: row.keepCheckoutOnClose === null || row.keepCheckoutOnClose === undefined ? ('project' as const) : ('workspace' as const),
      held: row.cleanupHeld,
    };
    if (!row.prNumber) return { pullRequest: null, checks: null, cleanup };
    if (!config.forge) {
      throw new GroveError('not_configured', `project "${row.project}" has no forge to read pull request #${row.prNumber} from; add forge {kind, baseUrl, owner, repo} with PUT /api/projects/${row.project}/config`, {
        details: { missing: 'forge' },
      });
    }
    if (!this.o.forgeToken) {
      throw new GroveError('not_configured', 'the server has no forge token; set GROVE_FORGE_TOKEN in its environment and restart it', { details: { missing: 'token' } });
    }
    const forge = createForge(config.forge, this.o.forgeToken);
    const pr = await forge.getPullRequest(row.prNumber);
    const checks = pr.headSha ? await forge.getChecks(pr.headSha) : null;
    return { pullRequest: { url: pr.url, number: pr.number, state: pr.state, headSha: pr.headSha }, checks, cleanup };
  }

  /**
   * Checkpoint, push the branch to origin, open (or refresh) its pull request. Everything that can be checked
   * is checked before anything changes; a pull request that cannot be opened undoes the push when the push
   * created the remote branch, and publish.failed records the step, the reason and what was undone.
   */
  async publish(slug: string, req: PublishRequest = {}): Promise<PublishResponse> {
    const first = await requireLive(this.ctx, slug);
    const { project, config } = await loadProject(this.ctx, first.project);
    if (!config.forge) {
      throw new GroveError('not_configured', `project "${first.project}" has no forge to open pull requests on; add forge {kind, baseUrl, owner, repo} with PUT /api/projects/${first.project}/config`, {
        details: { missing: 'forge' },
      });
    }
    if (!this.o.forgeToken) {
      throw new GroveError('not_configured', 'the server has no forge token; set GROVE_FORGE_TOKEN in its environment and restart it', { details: { missing: 'token' } });
    }
    const repo = this.ctx.paths.repo(first.project);
    const origin = await originUrl(repo);
    if (!origin) throw new GroveError('not_configured', `project "${first.project}" has no remote (origin) to push to`, { details: { missing: 'remote' } });
    const forge = createForge(config.forge, this.o.forgeToken);
    return this.ctx.slugs.run(slug, async () => {
      const checkpoint = await this.checkpointNow(slug, req.message, config);
      const row = await requireLive(this.ctx, slug);
      const commit = await this.ctx.lock.withLock(row.project, () => resolveCommit(repo, `refs/heads/${row.branch}`));
      const main = await this.ctx.lock.withLock(row.project, () => resolveCommit(repo, `refs/heads/${project.defaultBranch}`));
      if (!commit || !main) throw new GroveError('git_failed', `branch ${row.branch} or ${project.defaultBranch} is missing from the primary clone`);
      const { ahead } = await aheadBehind(repo, main, commit);
      if (ahead === 0) {
        throw new GroveError('invalid_state', `nothing to publish: ${row.branch} has no commits beyond ${project.defaultBranch}`, { details: { slug, branch: row.branch } });
      }
      const header = forge.gitAuthHeader(origin) ?? undefined;
      // The header carries the token base64-encoded: both forms are blanked out of anything git says.
      const auth = { header, redact: [this.o.forgeToken ?? '', ...(header ? [header.replace(/^Authorization: Basic /, '')] : [])], sshCommand: this.o.sshCommand };
      let pushed: PushResult;
      try {
        pushed = await pushBranch(repo, row.branch, auth);
      } catch (e) {
        const err = pushError(e, row.branch);
        await this.ctx.emit(slug, 'publish.failed', { workspaceId: row.id, step: 'push', code: err.code, reason: err.message, pushed: false });
        throw err;
      }
      await this.ctx.emit(slug, 'workspace.pushed', { workspaceId: row.id, branch: row.branch, commit, created: pushed.created, upToDate: pushed.upToDate });
      let pr: ForgePull;
      try {
        const known = row.prNumber ? await forge.getPullRequest(row.prNumber) : null;
        pr =
          known?.state === 'open'
            ? known
            : await forge.openPullRequest({
                head: row.branch,
                base: project.defaultBranch,
                title: req.title ?? `${row.name} (from Grove workspace ${slug})`,
                body: req.body ?? `Opened by Grove from workspace \`${slug}\`, branch \`${row.branch}\`.`,
              });
      } catch (e) {
        let undone: string | null = null;
        if (pushed.created) {
          // The branch exists on the remote only because of this publish: take it back (only while it is still ours).
          try {
            await deleteRemoteBranch(repo, row.branch, commit, auth);
            undone = 'deleted the branch this publish created on the remote';
          } catch (err) {
            undone = `could not delete the pushed branch: ${reasonOf(err)}`;
          }
        }
        await this.ctx.emit(slug, 'publish.failed', { workspaceId: row.id, step: 'pull-request', reason: reasonOf(e), pushed: true, undone });
        throw e;
      }
      await this.savePullRequest(row.id, pr);
      await this.ctx.emit(slug, 'workspace.published', { workspaceId: row.id, forge: forge.kind, number: pr.number, url: pr.url, state: pr.state, head: row.branch, base: project.defaultBranch, commit });
      return { checkpoint, pushed: { branch: row.branch, commit }, pullRequest: { url: pr.url, number: pr.number, state: pr.state } };
    });
  }

  /** Stores the pull request; an open one also clears cleanupHeld (a re-publish starts over). */
  private async savePullRequest(id: number, pr: PullRequest): Promise<void> {
    await this.ctx.store.update(id, { prUrl: pr.url, prNumber: pr.number, prState: pr.state, ...(pr.state === 'open' ? { cleanupHeld: null } : {}) });
  }

  /** Why the watcher keeps this workspace after its pull request ended (null: nothing holds it). */
  private async setCleanupHeld(id: number, reason: string | null): Promise<void> {
    await this.ctx.store.update(id, { cleanupHeld: reason });
  }
}
