/** The seam between core's lifecycle and whatever runs sandboxes (Docker today, Kubernetes later). */
import type { SandboxRuntime } from '@grove/contracts';

export interface SandboxLimits {
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
}

export interface SandboxSpec {
  slug: string;
  project: string;
  image: string;
  /** Host path of the workspace's worktree, mounted read-write at /workspace. */
  worktreePath: string;
  /**
   * Host <home>/sandbox-git/<slug>: the sandbox's own git dir (HEAD, index, commondir), mounted read-write at
   * SANDBOX_PATHS.gitDir, which /workspace/.git names. It is the agent's: host git never reads it.
   */
  sandboxGitDir: string;
  /**
   * Host path of the repository's common git dir (the bare primary clone), mounted read-only at
   * SANDBOX_PATHS.gitCommon with its worktrees/ (every workspace's host-side admin dir) hidden.
   */
  gitCommonDir: string;
  /**
   * Host <home>/run/<slug>, mounted at /run/grove: backend.sock and the host's sockets. Root's, mode 0700:
   * only the backend (root in the container) and the host reach it; the agent can neither list, unlink nor bind.
   */
  runDir: string;
  /** Host <home>/threads/<slug>, mounted at /var/lib/grove/thread (thread.jsonl lives here). Root's, like runDir. */
  threadDir: string;
  /** Host <home>/state/<slug>, the agent's own files, mounted at SANDBOX_PATHS.agentState. */
  stateDir: string;
  /** Extra environment for the backend (never secrets). */
  env: Record<string, string>;
  limits: SandboxLimits;
  /**
   * Config-parity overlay files (docs/git-flow.md), each mounted read-only at /workspace/<path>. hostPath is
   * a regular file the host keeps outside the worktree; path is repository-relative, never git plumbing.
   */
  overlay?: Array<{ hostPath: string; path: string }>;
}

/**
 * A warm sandbox (the hub's pool): everything of a SandboxSpec but the workspace's identity. It is made for a project
 * with dirs of its own, labelled grove.pool instead of grove.slug, and named for its pool id until a fork claims it
 * (claimWarm renames it to the workspace's name; its mounts follow the dirs the hub renamed).
 */
export interface WarmSandboxSpec extends Omit<SandboxSpec, 'slug'> {
  /** The warm sandbox's id (warmIdSchema). */
  pool: string;
}

/** One warm sandbox of this instance as the engine lists it. */
export interface WarmInfo {
  pool: string;
  id: string;
  running: boolean;
  /** Renamed to a workspace's name by a claim: it is that workspace's now, and list() reports it by that slug. */
  claimed: boolean;
}

export interface SandboxInfo {
  id: string;
  slug: string;
  project: string;
  running: boolean;
  /** Present when the container has exited. */
  exitCode: number | null;
  oomKilled: boolean;
}

/** Something happened to a sandbox that Grove did not ask for (or did: a stop also ends in `died`). */
export interface SandboxEvent {
  slug: string;
  /** `died`: the container's main process exited; `oom`: the kernel killed a process in it for memory. */
  kind: 'died' | 'oom';
  /** Exit code of the main process, for `died`. */
  exitCode: number | null;
}

export interface DockerDriverOptions {
  /**
   * Scopes every container to one Grove home: names are `grove-<instance>-<project>.<name>` and the
   * label `grove.instance` is set, so reconciliation and tests never touch another Grove's containers.
   */
  instance: string;
  /** Docker engine socket; default /var/run/docker.sock. */
  socketPath?: string;
  /**
   * The OCI runtime every sandbox of this driver runs on (HostConfig.Runtime); default `runc`. `runsc` needs the
   * engine's runtimes entry that scripts/setup.sh writes; ping() says so when it is missing.
   */
  runtime?: SandboxRuntime;
}

export interface SandboxDriver {
  /**
   * Throws GroveError('docker_unavailable') when the engine cannot be reached, or cannot run the driver's runtime
   * (runsc asked for, no such runtime configured).
   */
  ping(): Promise<void>;
  imageExists(image: string): Promise<boolean>;
  /** Create the container for spec.slug if absent, start it if not running. Idempotent. */
  ensure(spec: SandboxSpec): Promise<SandboxInfo>;
  inspect(slug: string): Promise<SandboxInfo | null>;
  /** Stop if running; no error when absent. */
  stop(slug: string): Promise<void>;
  /** Stop and remove; no error when absent. */
  remove(slug: string): Promise<void>;
  /** Every workspace's container: labelled grove.slug, or a warm sandbox a claim renamed to a workspace's name. */
  list(): Promise<SandboxInfo[]>;
  // The warm pool's part (optional: a driver without it has no warm sandboxes, and every fork starts cold).
  /** Create and start a warm sandbox (its name and labels from spec.pool, no slug). Idempotent like ensure. */
  ensureWarm?(spec: WarmSandboxSpec): Promise<SandboxInfo>;
  /**
   * Hand a running warm sandbox to a workspace: rename its container to the slug's name (refused when that name is
   * taken or the sandbox is not running). A claimed sandbox is never a warm one again.
   */
  claimWarm?(pool: string, slug: string): Promise<SandboxInfo>;
  /** Stop and remove an unclaimed warm sandbox; no error when absent. */
  removeWarm?(pool: string): Promise<void>;
  /** Every warm sandbox of this instance, claimed or not. */
  listWarm?(): Promise<WarmInfo[]>;
  /** The last lines of the container's output, for failure reasons and `grove logs`. */
  logs(slug: string, tail?: number): Promise<string>;
  /**
   * Follow this instance's sandboxes as they die or hit their memory limit, so core learns of a dead
   * sandbox when it happens, not at the next restart. Reconnects after an engine hiccup; the returned
   * function stops following.
   */
  watch(onEvent: (e: SandboxEvent) => void, onError?: (err: unknown) => void): () => void;
}

/** In-container paths, shared by the driver, the backend and the tests. */
export const SANDBOX_PATHS = {
  workspace: '/workspace',
  /** The sandbox's own git dir; /workspace/.git says `gitdir: <this>`. */
  gitDir: '/grove/git',
  /** The primary clone, read-only, as the sandbox git dir's commondir. */
  gitCommon: '/grove/common',
  run: '/run/grove',
  socket: '/run/grove/backend.sock',
  thread: '/var/lib/grove/thread',
  home: '/home/grove',
  agentState: '/home/grove/.claude',
} as const;

/** The agent's user: every process the agent runs, and the owner of everything it may write. */
export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
/**
 * The backend's user: root inside the container (no user namespace, so the host's uid 0) holding only
 * SANDBOX_CAPS, so that it is a principal the agent cannot signal, trace or impersonate. It starts every agent
 * process as SANDBOX_UID, which drops all of them (docs/security.md, "The backend is Grove's own").
 */
export const BACKEND_UID = 0;
export const BACKEND_GID = 0;
/** CAP_SETUID/CAP_SETGID to start agents as SANDBOX_UID; CAP_KILL to cancel a turn (signal the agent's group). */
export const SANDBOX_CAPS = ['SETUID', 'SETGID', 'KILL'] as const;
