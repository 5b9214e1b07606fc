/** Public shapes of @grove/core: what apps/server, the CLI and tests program against. */
import type { Capacity, ForkRequest, GroveEvent, LastMessage, RestoreRequest, UpdateWorkspaceRequest, Workspace } from '@grove/contracts';
import type { CheckpointRequest, ProjectConfigPatch, PublishRequest, PutOverlayFileRequest } from '@grove/contracts';
import type { ProjectConfig, ProjectConfigInput, TeardownPreview, TurnDiffResponse, TurnSummary, UndoResponse } from '@grove/contracts';
import type { CheckpointResponse, DiffResponse, OverlayListResponse, Project, PublishResponse, PullRequestResponse } from '@grove/contracts';
import type { WorkspaceLimits, WorkspaceRuntime } from '@grove/runtime';
import type { Logger } from 'pino';
import type { EgressPolicy, EgressResponse } from '@grove/contracts';
import type { EgressOptions } from './egress.ts';
import type { WatchResult } from './git-flow.ts';
import type { VolumeQuota } from './volume.ts';

export interface GroveOptions {
  /** State root (GROVE_HOME). Created if missing. */
  home: string;
  /**
   * A PostgreSQL registry (DATABASE_URL, postgres://…) that several servers may share; absent: SQLite at
   * <home>/grove.db. Slot reservations are atomic across every server using it.
   */
  databaseUrl?: string | null;
  /**
   * Where workspaces run (createDockerRuntime of @grove/runtime): sandboxes, their egress gates, host sockets,
   * the credential relay, the image check and the readiness wait. Bound to this Grove, closed with it.
   */
  runtime: WorkspaceRuntime;
  /** Concurrency cap: running + creating never exceeds it. */
  maxRunning: number;
  logger: Logger;
  /** How long a git caller waits for the per-repository lock before git_busy. Default 30 s. */
  gitLockTimeoutMs?: number;
  limits?: Partial<WorkspaceLimits>;
  /** Extra env for every sandbox backend (never secrets), e.g. GROVE_PROVIDER. */
  sandboxEnv?: Record<string, string>;
  /**
   * How many warm sandboxes to keep ready for the next fork (GROVE_WARM_POOL); 0 or absent: none, every fork starts
   * cold. They hold slots only while no workspace needs them (pool.ts).
   */
  warmPool?: number;
  /** The egress floor's project default rules (the gates themselves are the runtime's). */
  egress?: EgressOptions;
  /**
   * Stop running workspaces idle (no proxied request, no turn in progress) for this long; the freed slot
   * goes to the first in line. 0 or absent: never (GROVE_IDLE_STOP in the server, default 30 min).
   */
  idleStopMs?: number;
  /**
   * The forge API token publish uses (GROVE_FORGE_TOKEN): sent only in the Authorization header of forge API
   * calls and of git over https to the forge's host; never written to a config, remote URL, log or thread.
   */
  forgeToken?: string | null;
  /**
   * The ssh remote git runs (GROVE_GIT_SSH_COMMAND, checked by gitSshCommandSchema), e.g. with `-i <key> -o
   * UserKnownHostsFile=<file>`; absent: ssh with the server user's keys and known_hosts. Always in BatchMode.
   */
  gitSshCommand?: string | null;
  /**
   * How often, once reconcile() has run, every project is fetched and published workspaces' pull requests are
   * checked (merged or closed → torn down unless keepCheckoutOnClose). Default 5 minutes; 0 turns it off.
   */
  watchIntervalMs?: number;
  /**
   * Each workspace's disk and inode quota (GROVE_DISK_QUOTA, GROVE_INODE_QUOTA in the server): a sparse ext4 image
   * per workspace holding its worktree and agent state dir, loop-mounted on the host (needs root; without it a
   * warning and no quota). Absent or null: no quota.
   */
  diskQuota?: VolumeQuota | null;
  /** How often running workspaces' disks are read for workspace.disk_full. Default 15 s. */
  diskWatchMs?: number;
}

export interface AddProjectOptions {
  name: string;
  /** Local path or URL of the repository to clone (bare) into <home>/repos/<name>. */
  source: string;
  /** Create and start the default workspace (slug = name). Default true. */
  createDefault?: boolean;
  /** Write this as the project's config (<home>/config/<name>.json; validated). Absent: the file there, if any, is validated. */
  config?: ProjectConfigInput;
  /** Refuse (project_exists) when a project of this name is registered; default false (idempotent, as for the demo). */
  failIfExists?: boolean;
}

export interface Grove {
  /** Reconcile containers, rows and locks with reality; call once at server start. */
  reconcile(): Promise<void>;
  /**
   * Clone source bare into <home>/repos/<name> (hardened: docs/git-flow.md), detect its default branch and
   * register it. A failed clone leaves nothing behind.
   */
  addProject(opts: AddProjectOptions): Promise<Project>;
  /**
   * The project's default workspace (its one conversation): the live one in whatever state, or one begun now
   * (created: true; not waited for, queued at the cap). Concurrent callers get the same one.
   */
  ensureDefault(project: string): Promise<{ workspace: Workspace; created: boolean }>;
  listProjects(): Promise<Array<{ name: string; defaultBranch: string; createdAt: string }>>;
  list(filter?: { project?: string; includeGone?: boolean }): Promise<{ workspaces: Workspace[]; capacity: Capacity }>;
  capacity(): Promise<Capacity>;
  /** Throws workspace_not_found. */
  get(slug: string): Promise<Workspace>;
  /**
   * Reserve a slot (429 capacity_reached), add the worktree, start the sandbox, wait for health, register.
   * wait=true: resolves with the running workspace or rejects with spawn_failed after rolling back.
   * wait=false: resolves right after the reservation (state creating); the rest continues in the background.
   * req.queue=true: when no slot is free (or others wait), resolves at once with the workspace queued at the
   * end of the line (queuePosition); it is forked when a slot frees. Cancel with teardown.
   */
  fork(req: ForkRequest, opts?: { wait?: boolean }): Promise<Workspace>;
  /** Stop a running workspace; the freed slot goes to the first in line. */
  stop(slug: string): Promise<Workspace>;
  /**
   * Reopen a stopped workspace: same worktree, thread and agent session. opts.queue: when no slot is free (or
   * others wait), resolves at once with it queued (queuePosition); it reopens when a slot frees.
   */
  start(slug: string, opts?: { queue?: boolean }): Promise<Workspace>;
  /**
   * A queued workspace just leaves the line (nothing was made for it; the others keep their order).
   * Otherwise: container and worktree removed, thread archived, branch kept. Uncommitted work (changes, staged or not, and
   * untracked files that are not ignored) is first saved to refs/grove/<slug>/teardown/<n>.
   */
  teardown(slug: string): Promise<Workspace>;
  /** PATCH /api/workspaces/:slug: the workspace's own settings; keepCheckoutOnClose null goes back to the project's. */
  update(slug: string, req: UpdateWorkspaceRequest): Promise<Workspace>;
  /** The recovery refs of a slug (live or gone), oldest first. */
  savedWork(slug: string): Promise<Array<{ ref: string; n: number; commit: string }>>;
  /** Fork a new workspace (req.name) from a recovery ref of slug: the newest, or number req.n. Like fork otherwise. */
  restore(slug: string, req: RestoreRequest, opts?: { wait?: boolean }): Promise<Workspace>;
  /**
   * The last thing said in the workspace's thread (user or agent), read from the host's thread dir, so it works
   * while the workspace is stopped; null when nothing was said. Throws workspace_not_found.
   */
  lastMessage(slug: string): Promise<LastMessage | null>;
  /** The newest things said in its thread, oldest first (RECENT_MESSAGES at most, line breaks kept), read like lastMessage. */
  recentMessages(slug: string): Promise<LastMessage[]>;
  /** The project's config (agent, allowed paths); {} when it has none. */
  projectConfig(project: string): Promise<ProjectConfig>;
  /**
   * Replace a project's config with `config` as given (checked by the caller against projectConfigSchema; defaults
   * are applied when it is read, never stored); it applies to containers created afterwards.
   */
  setProjectConfig(project: string, config: ProjectConfigInput): Promise<ProjectConfig>;
  /** Change some keys of the stored config (null removes one); the rest stays as stored. */
  patchProjectConfig(project: string, patch: ProjectConfigPatch): Promise<ProjectConfig>;
  /** The project's config-parity overlay files (docs/git-flow.md). */
  overlayFiles(project: string): Promise<OverlayListResponse>;
  /** Set one overlay file; its path must be named by the config's overlay.files. Forks and starts after this see it. */
  putOverlayFile(project: string, req: PutOverlayFileRequest): Promise<OverlayListResponse>;
  /** Remove one overlay file; no error when it is absent. */
  deleteOverlayFile(project: string, path: string): Promise<OverlayListResponse>;
  /**
   * Put the worktree back to how it was before the last turn that changed files (repeatable), and mark
   * it in the thread. 409 while a turn runs or when there is nothing to undo; workspace_stopped when stopped.
   */
  undo(slug: string): Promise<UndoResponse>;
  /**
   * The turns that changed files or had changes put back, newest first, with the one undo would
   * restore marked. Works while the workspace is stopped. workspace_not_found.
   */
  turns(slug: string): Promise<TurnSummary[]>;
  /** The unified diff of turn n, size-capped. not_found when turn n recorded no changes. */
  turnDiff(slug: string, n: number): Promise<TurnDiffResponse>;
  events(query?: { slug?: string; after?: number; limit?: number; type?: string }): Promise<GroveEvent[]>;
  /** The workspace's egress policy, whether it is the project default, and its latest decisions (newest first). */
  egress(slug: string, opts?: { limit?: number }): Promise<EgressResponse>;
  /** Replace the workspace's egress policy (parsed by the caller: egressPolicySchema); applied at once to its running gate. */
  setEgressPolicy(slug: string, policy: EgressPolicy): Promise<EgressPolicy>;
  /** Drop the workspace's own policy: back to the project default, applied at once; records an egress.policy event. */
  resetEgressPolicy(slug: string): Promise<EgressPolicy>;
  /** What a teardown would keep (branch, recovery ref for the uncommitted work) and remove, read now on the host. */
  teardownPreview(slug: string): Promise<TeardownPreview>;
  /** Subscribe to audit events as they are written (live UI). Returns an unsubscribe function. */
  onEvent(listener: (e: GroveEvent) => void): () => void;
  /**
   * The backend socket of a workspace for the proxy. Throws workspace_not_found, or workspace_stopped
   * (409) when it is not running. Marks the workspace active.
   */
  socketFor(slug: string): Promise<string>;
  /**
   * Commit the worktree (changes, staged or not, untracked files that are not ignored) onto the workspace's
   * branch from the host, as the project's git identity. commit null: nothing to commit (the branch did not move).
   */
  checkpoint(slug: string, req?: CheckpointRequest): Promise<CheckpointResponse>;
  /** The workspace against its fork point (merge-base with the default branch), with ahead/behind; no sandbox needed. */
  diff(slug: string, opts?: { maxBytes?: number }): Promise<DiffResponse>;
  /** Checkpoint, push the branch to origin and open its pull request on the project's forge. */
  publish(slug: string, req?: PublishRequest): Promise<PublishResponse>;
  /**
   * The pull request as the forge reports it now (state, the checks of its head commit), null before a publish,
   * and what its end does to the workspace (keepCheckoutOnClose, a hold). not_configured, forge_failed.
   */
  pullRequest(slug: string): Promise<PullRequestResponse>;
  /**
   * One pass of the scheduled work now: fetch every project, then the pull-request state of every published
   * workspace (the forge's, else whether its branch is contained in the default branch); a merged or closed
   * one is torn down unless the project sets keepCheckoutOnClose.
   */
  watchPullRequests(): Promise<WatchResult>;
  /** Release resources (db handle, timers). */
  close(): Promise<void>;
}
