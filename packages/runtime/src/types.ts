/**
 * The WorkspaceRuntime contract: everything about *where a workspace runs*, behind one interface shaped like
 * JupyterHub's Spawner (start, stop, poll) and OpenHands' Runtime. Core (the hub) decides what runs and records
 * it; a runtime makes it so. Core asks a runtime to start a workspace and gets back where its backend answers;
 * it never touches a container, a gate or a socket server itself.
 */
import type { EgressPolicy, EventType, TurnEndedRequest, TurnEndedResponse } from '@grove/contracts';
import type { SandboxEvent, SandboxInfo, SandboxLimits } from '@grove/sandbox';

/** How much of the machine one workspace may use. */
export type WorkspaceLimits = SandboxLimits;

/** What a runtime says about one workspace's sandbox (`null` from poll: there is none). */
export type WorkspaceStatus = SandboxInfo;

/** Something happened to a sandbox that the hub did not ask for (or did: a stop also ends in `died`). */
export type RuntimeEvent = SandboxEvent;

/**
 * What the hub wants running, in its own terms: no image, no container flags. The host dirs are the hub's
 * (it made them, it owns what is in them); a runtime exposes them to the workspace at the paths of SANDBOX_PATHS.
 */
export interface WorkspaceSpec {
  slug: string;
  project: string;
  /** The workspace's worktree (read-write at /workspace). */
  worktreePath: string;
  /** The sandbox's own git dir, which /workspace/.git names. */
  sandboxGitDir: string;
  /** The primary clone, read-only, as that git dir's commondir. */
  gitCommonDir: string;
  /** The backend's thread dir. */
  threadDir: string;
  /** The agent's own state dir. */
  stateDir: string;
  /** Environment for the backend (never secrets). The runtime adds its own wiring (proxy) and the identity after it. */
  env: Record<string, string>;
  limits: WorkspaceLimits;
  /** Config-parity overlay files, each exposed read-only at /workspace/<path>; the target file already exists. */
  overlay: Array<{ hostPath: string; path: string }>;
  /** The policy the workspace's egress gate applies from the first connection on. */
  egressPolicy: EgressPolicy;
}

/**
 * A warm sandbox the hub wants ready for a fork of `project` (its pool): a workspace's spec without the workspace. Its
 * dirs are the pool's own (<home>/pool/<id>/…) and become a workspace's when the hub renames them at a claim. It has
 * no egress gate and no host sockets until then (no process of an agent runs in it before), so it reaches nothing.
 */
export interface WarmSpec extends Omit<WorkspaceSpec, 'slug' | 'egressPolicy'> {
  /** The warm sandbox's id (warmIdSchema). */
  pool: string;
  /** Its run dir: its backend's socket appears there, and the hub renames it to the workspace's run dir at a claim. */
  runDir: string;
}

/** What the hub gives a runtime once, before anything else: where to report and what to call back. */
export interface RuntimeHub {
  /**
   * The host dir of a slug's sockets (<home>/run/<slug>, root's, 0700). The Docker runtime mounts it at
   * /run/grove, serves host.sock, provider.sock and egress.sock there and finds backend.sock there.
   */
  runDir(slug: string): string;
  /** A finished turn, reported by the backend over host.sock: the after-turn work, its answer appended to the thread. */
  onTurnEnded(slug: string, req: TurnEndedRequest): Promise<TurnEndedResponse>;
  /** Record an event in the audit trail (egress decisions). Called without waiting; must not throw. */
  emit(slug: string, type: EventType, data: Record<string, unknown>): void;
}

/** The steps of a start, in order, for the hub's failure report (spawn_failed's `step`). */
export type StartStep = 'egress' | 'image' | 'container' | 'health';

export interface StartOptions {
  /** Aborting makes start throw at its next step (the hub then removes what it made). */
  signal: AbortSignal;
  /** Called as each step begins. */
  onStep?(step: StartStep): void;
  /** Awaited once the sandbox exists, before the readiness wait: the hub records it (sandbox.started). */
  onSandbox?(sandbox: { id: string; image: string; ms: number }): Promise<void>;
}

/** Where the hub reaches a started workspace. */
export interface StartedWorkspace {
  id: string;
  backend: { socketPath: string };
}

export type Readiness = { ok: true } | { ok: false; error: string };

/**
 * One implementation per place workspaces can run (Docker today; gVisor is Docker with another OCI runtime; a
 * Kubernetes runtime would be a pod per workspace). What every implementation must honour:
 *
 * - Errors: an unreachable engine or cluster is GroveError('docker_unavailable') (503) from every method that
 *   needs it, so the hub can refuse before reserving anything; a workspace that cannot be started is
 *   GroveError('spawn_failed') whose message is the reason a user reads (missing image, exit code and last
 *   output, health timeout). Nothing else is thrown on purpose.
 * - Idempotence: start on a running workspace resumes waiting for it; stop, remove and detach on one that is
 *   already stopped, gone or never existed succeed and do nothing.
 * - Host-side pieces (egress gate, host sockets, credential relay) exist exactly while the hub wants the
 *   workspace running in this process: start and attach make them, stop, remove and detach end them. They do not
 *   survive the hub's process; sandboxes do (a restart re-attaches to them).
 * - No sandbox ever reaches the network except through its gate, and no secret enters its environment.
 */
export interface WorkspaceRuntime {
  /** A short name for logs and docs ("docker"). */
  readonly name: string;
  /** Called once by the hub before anything else; a second call throws. */
  bind(hub: RuntimeHub): void;
  /** Throws docker_unavailable when the engine cannot be reached. */
  ping(): Promise<void>;
  /**
   * Make the workspace run: its gate (with spec.egressPolicy), the image check, its host sockets, the sandbox
   * (created or restarted), then wait until its backend answers /health as this slug. Resolves only then.
   * On failure it throws and leaves what it made for the hub to remove (remove(slug)).
   */
  start(spec: WorkspaceSpec, o: StartOptions): Promise<StartedWorkspace>;
  /**
   * After a hub restart: the host side again (gate with this policy, host sockets) for a workspace whose
   * sandbox still runs. Never starts, stops or restarts the sandbox.
   */
  attach(slug: string, o: { egressPolicy: EgressPolicy }): Promise<void>;
  /** End the host side (gate, sockets) and leave the sandbox as it is. Idempotent. */
  detach(slug: string): Promise<void>;
  /** Stop the sandbox (its files stay; start runs it again), then detach. Idempotent. */
  stop(slug: string): Promise<void>;
  /** Stop and delete the sandbox (never the hub's dirs), then detach even when the delete failed. Idempotent. */
  remove(slug: string): Promise<void>;
  /** The slug's sandbox now, or null when there is none. */
  poll(slug: string): Promise<WorkspaceStatus | null>;
  /** One readiness check of a running workspace's backend, bounded by the runtime's own short deadline. Never throws. */
  probe(slug: string): Promise<Readiness>;
  /** Every sandbox of this hub (scoped to its home), running or not: what reconcile compares with the registry. */
  list(): Promise<WorkspaceStatus[]>;
  /** Follow sandboxes dying or hitting their memory limit; reconnects after an engine hiccup. Returns unfollow. */
  watch(onEvent: (e: RuntimeEvent) => void, onError?: (err: unknown) => void): () => void;
  /** The last lines of the sandbox's output. */
  logs(slug: string, tail?: number): Promise<string>;
  /** Apply a policy to the running gate at once (open tunnels it no longer allows are cut). True when a gate runs. */
  setPolicy(slug: string, policy: EgressPolicy): Promise<boolean>;
  /** End every host-side piece of this process (sandboxes keep running). */
  close(): Promise<void>;

  // ---- warm sandboxes (the hub's pool) ----

  /** Whether this runtime can keep warm sandboxes; when false the hub keeps none and every fork starts cold. */
  readonly warmPool: boolean;
  /**
   * Make a warm sandbox (same hardening, limits and image as any) and resolve once its backend waits to be claimed.
   * On failure it throws and leaves what it made for discardWarm.
   */
  startWarm(spec: WarmSpec, o: { signal: AbortSignal }): Promise<{ id: string }>;
  /**
   * Make a warm sandbox the workspace spec.slug, whose dirs the hub has already moved to the workspace's paths: the
   * gate with spec.egressPolicy and the host sockets, the sandbox renamed to the workspace's, its backend told its
   * slug, then the same /health wait as start. On failure it throws; the hub then removes it (remove(slug)), never
   * handing it out again.
   */
  claimWarm(pool: string, spec: WorkspaceSpec, o: StartOptions): Promise<StartedWorkspace>;
  /** Stop and delete an unclaimed warm sandbox. Idempotent. */
  discardWarm(pool: string): Promise<void>;
  /** Every warm sandbox of this hub, claimed (a workspace's now) or not. */
  listWarm(): Promise<Array<{ pool: string; claimed: boolean; running: boolean }>>;
}
