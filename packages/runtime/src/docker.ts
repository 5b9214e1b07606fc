// The Docker runtime: a hardened container per workspace (@grove/sandbox's driver), its egress gate, host.sock and
// the credential relay on the host, the image check, the readiness wait and the death watch.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { GroveError, poolWaitingSchema } from '@grove/contracts';
import type { EgressPolicy } from '@grove/contracts';
import { BACKEND_GID, BACKEND_UID } from '@grove/sandbox';
import type { SandboxDriver, SandboxSpec, WarmInfo, WarmSandboxSpec } from '@grove/sandbox';
import type { Logger } from 'pino';
import { EgressGates, PROXY_ENV } from './egress-gates.ts';
import type { EgressGateOptions } from './egress-gates.ts';
import { getOverSocket, overSocket, probeHealth } from './health.ts';
import { HostServices } from './host-services.ts';
import type { Readiness, RuntimeHub, StartOptions, StartedWorkspace, WarmSpec, WorkspaceRuntime, WorkspaceSpec, WorkspaceStatus } from './types.ts';

const DEFAULT_HEALTH_TIMEOUT_MS = 30_000;
/** A running workspace's backend answers within this at reconcile, or it is taken for broken. */
const PROBE_MAX_MS = 5_000;
const HEALTH_POLL_MS = 50;
/** Check whether the container died every this many health polls (fail fast instead of waiting out the timeout). */
const INSPECT_EVERY = 5;

export interface DockerRuntimeOptions {
  /** The container driver: createDockerDriver in the server; tests may pass one honouring the same contract. */
  driver: SandboxDriver;
  /** Sandbox image tag, e.g. grove-sandbox:latest. */
  image: string;
  logger: Logger;
  /** How long to wait for a new sandbox's backend to answer /health. Default 30 s. */
  healthTimeoutMs?: number;
  /**
   * The credential relay (provider.sock in every sandbox's run dir): requests go to `upstream` with
   * `apiKey` added on the host. Absent: agents have no way to reach a provider API.
   */
  providerRelay?: { upstream: string; apiKey: string | null };
  /** How each workspace's egress gate resolves, connects and audits. */
  egress?: EgressGateOptions;
}

/** "exited with code 137 (out of memory)": how a dead sandbox ended, for reasons users read. */
export function exitSummary(info: { exitCode: number | null; oomKilled?: boolean }): string {
  const code = info.exitCode === null ? '' : ` with code ${info.exitCode}`;
  return `exited${code}${info.oomKilled ? ' (out of memory)' : ''}`;
}

function reasonOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function failure(reason: string): GroveError {
  return new GroveError('spawn_failed', reason);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The claim is one small local call; a backend that does not take it in this long is not worth waiting for. */
const CLAIM_TIMEOUT_MS = 5_000;
const CLAIM_POLL_MS = 5;

/** The driver's warm-pool part, all of it present. */
type WarmDriver = Required<Pick<SandboxDriver, 'ensureWarm' | 'claimWarm' | 'removeWarm' | 'listWarm'>>;

class DockerRuntime implements WorkspaceRuntime {
  readonly name = 'docker';
  private hub: RuntimeHub | null = null;
  private gates: EgressGates | null = null;
  private host: HostServices | null = null;
  private readonly driver: SandboxDriver;
  private readonly healthTimeoutMs: number;
  private readonly log: Logger;

  constructor(private readonly o: DockerRuntimeOptions) {
    this.driver = o.driver;
    this.healthTimeoutMs = o.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    this.log = o.logger;
  }

  bind(hub: RuntimeHub): void {
    if (this.hub) throw new Error('this runtime is already bound to a hub');
    this.hub = hub;
    // Only the backend (root in the sandbox) connects; the run dir is 0700 and the sockets 0660 root's.
    const socketOwner = process.getuid?.() === 0 ? { uid: BACKEND_UID, gid: BACKEND_GID } : undefined;
    const relay = this.o.providerRelay;
    this.host = new HostServices({
      logger: this.log,
      runDir: (slug) => hub.runDir(slug),
      onTurnEnded: (slug, req) => hub.onTurnEnded(slug, req),
      providerRelay: relay && { upstream: new URL(relay.upstream), apiKey: relay.apiKey },
      ...(socketOwner ? { socketOwner } : {}),
    });
    this.gates = new EgressGates({
      logger: this.log,
      socketPath: (slug) => join(hub.runDir(slug), 'egress.sock'),
      emit: (slug, type, data) => hub.emit(slug, type, data),
      options: this.o.egress,
      ...(socketOwner ? { socketOwner } : {}),
    });
  }

  ping(): Promise<void> {
    return this.driver.ping();
  }

  async start(spec: WorkspaceSpec, o: StartOptions): Promise<StartedWorkspace> {
    const { slug } = spec;
    const { gates, host, hub } = this.bound();
    o.onStep?.('egress');
    await gates.ensure(slug, spec.egressPolicy);

    o.onStep?.('image');
    if (!(await this.driver.imageExists(this.o.image))) {
      throw failure(`sandbox image "${this.o.image}" is not present; build it with scripts/setup.sh (docker/build-image.sh)`);
    }

    o.onStep?.('container');
    const t0 = Date.now();
    const socketPath = this.socketOf(slug);
    // A socket file left by the previous run would only refuse connections; remove it so health waits for the new one.
    if (!(await this.driver.inspect(slug))?.running) await rm(socketPath, { force: true });
    // host.sock and provider.sock exist before the container does, so its backend finds them at once.
    await host.ensure(slug);
    const info = await this.driver.ensure(this.sandboxSpec(spec, hub.runDir(slug)));
    await o.onSandbox?.({ id: info.id, image: this.o.image, ms: Date.now() - t0 });
    checkAbort(o.signal);

    o.onStep?.('health');
    await this.waitHealthy(slug, o.signal);
    return { id: info.id, backend: { socketPath } };
  }

  async attach(slug: string, o: { egressPolicy: EgressPolicy }): Promise<void> {
    const { gates, host } = this.bound();
    // Both are tried: a gate that cannot start does not keep the after-turn hook away, nor the other way round.
    const results = await Promise.allSettled([gates.ensure(slug, o.egressPolicy), host.ensure(slug)]);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async detach(slug: string): Promise<void> {
    const { gates, host } = this.bound();
    await host.close(slug);
    await gates.close(slug);
  }

  async stop(slug: string): Promise<void> {
    await this.driver.stop(slug);
    await this.detach(slug);
  }

  async remove(slug: string): Promise<void> {
    try {
      await this.driver.remove(slug);
    } finally {
      await this.detach(slug);
    }
  }

  poll(slug: string): Promise<WorkspaceStatus | null> {
    return this.driver.inspect(slug);
  }

  async probe(slug: string): Promise<Readiness> {
    const deadline = Date.now() + Math.min(this.healthTimeoutMs, PROBE_MAX_MS);
    for (;;) {
      const probe = await probeHealth(this.socketOf(slug), 1_000);
      if (probe.ok) return { ok: true };
      if (Date.now() >= deadline) return { ok: false, error: probe.error };
      await sleep(HEALTH_POLL_MS * 4);
    }
  }

  list(): Promise<WorkspaceStatus[]> {
    return this.driver.list();
  }

  watch(onEvent: Parameters<WorkspaceRuntime['watch']>[0], onError?: (err: unknown) => void): () => void {
    return this.driver.watch(onEvent, onError);
  }

  logs(slug: string, tail?: number): Promise<string> {
    return this.driver.logs(slug, tail);
  }

  async setPolicy(slug: string, policy: EgressPolicy): Promise<boolean> {
    const { gates } = this.bound();
    await gates.setPolicy(slug, policy);
    return gates.running(slug);
  }

  async close(): Promise<void> {
    if (!this.hub) return;
    const { gates, host } = this.bound();
    await host.closeAll();
    await gates.closeAll();
  }

  get warmPool(): boolean {
    return this.warm() !== null;
  }

  async startWarm(spec: WarmSpec, o: { signal: AbortSignal }): Promise<{ id: string }> {
    const driver = this.warmDriver();
    if (!(await this.driver.imageExists(this.o.image))) {
      throw failure(`sandbox image "${this.o.image}" is not present; build it with scripts/setup.sh (docker/build-image.sh)`);
    }
    const socket = join(spec.runDir, 'backend.sock');
    await rm(socket, { force: true });
    // The pool's identity instead of a slug: the backend answers only its claim until a fork gives it one. The proxy
    // variables as for any sandbox; there is no gate behind them until the claim starts one.
    const sandbox: WarmSandboxSpec = { ...spec, image: this.o.image, env: { ...spec.env, ...PROXY_ENV, GROVE_POOL: spec.pool, GROVE_PROJECT: spec.project } };
    const info = await driver.ensureWarm(sandbox);
    await this.waitWaiting(spec.pool, socket, o.signal);
    return { id: info.id };
  }

  async claimWarm(pool: string, spec: WorkspaceSpec, o: StartOptions): Promise<StartedWorkspace> {
    const driver = this.warmDriver();
    const { slug } = spec;
    const { gates, host } = this.bound();
    o.onStep?.('egress');
    await gates.ensure(slug, spec.egressPolicy);
    o.onStep?.('container');
    const t0 = Date.now();
    // In the run dir the hub moved here: the backend finds them once it serves as the workspace.
    await host.ensure(slug);
    const info = await driver.claimWarm(pool, slug);
    await o.onSandbox?.({ id: info.id, image: this.o.image, ms: Date.now() - t0 });
    checkAbort(o.signal);
    const socketPath = this.socketOf(slug);
    let answer: { status: number; body: unknown };
    try {
      answer = await overSocket(socketPath, { method: 'POST', path: '/claim', body: { slug }, timeoutMs: CLAIM_TIMEOUT_MS });
    } catch (e) {
      throw failure(`the warm sandbox ${pool} did not take its claim: ${reasonOf(e)}`);
    }
    if (answer.status !== 202) throw failure(`the warm sandbox ${pool} refused its claim (${answer.status})`);
    o.onStep?.('health');
    // The backend is already up and only reopens its socket as the workspace: polled closer than a cold start is.
    await this.waitHealthy(slug, o.signal, CLAIM_POLL_MS);
    return { id: info.id, backend: { socketPath } };
  }

  async discardWarm(pool: string): Promise<void> {
    await this.warmDriver().removeWarm(pool);
  }

  async listWarm(): Promise<WarmInfo[]> {
    return (await this.warm()?.listWarm()) ?? [];
  }

  private warm(): WarmDriver | null {
    const d = this.driver;
    if (!d.ensureWarm || !d.claimWarm || !d.removeWarm || !d.listWarm) return null;
    return { ensureWarm: d.ensureWarm.bind(d), claimWarm: d.claimWarm.bind(d), removeWarm: d.removeWarm.bind(d), listWarm: d.listWarm.bind(d) };
  }

  private warmDriver(): WarmDriver {
    const w = this.warm();
    if (!w) throw failure('this sandbox driver keeps no warm sandboxes');
    return w;
  }

  /** Wait until a warm sandbox's backend answers GET /pool as that pool id; fail fast when its container died. */
  private async waitWaiting(pool: string, socket: string, signal: AbortSignal): Promise<void> {
    await this.waitFor({
      signal,
      pollMs: HEALTH_POLL_MS,
      ask: async () => {
        const { status, body } = await getOverSocket(socket, '/pool', 1_000);
        const parsed = poolWaitingSchema.safeParse(body);
        if (status === 200 && parsed.success && parsed.data.pool === pool) return null;
        return status === 200 ? '/pool answered an unexpected body' : `/pool answered ${status}`;
      },
      dead: async () => {
        const w = (await this.warmDriver().listWarm()).find((x) => x.pool === pool);
        if (!w) return `the warm sandbox ${pool} disappeared while starting`;
        return w.running ? null : `the warm sandbox ${pool} exited before its backend waited for a claim`;
      },
      timedOut: (last) => `the warm sandbox ${pool} did not wait for its claim within ${this.healthTimeoutMs} ms (${last})`,
    });
  }

  /**
   * The one readiness loop (a cold start's /health, a claim's /health, a warm sandbox's /pool): ask until the answer is
   * right (null), check every few polls whether the container died (dead: a reason), give up at the timeout.
   */
  private async waitFor(o: {
    signal: AbortSignal;
    pollMs: number;
    ask: () => Promise<string | null>;
    dead: () => Promise<string | null>;
    timedOut: (lastError: string) => Promise<string> | string;
  }): Promise<void> {
    const deadline = Date.now() + this.healthTimeoutMs;
    // The same few inspects a second whatever the poll: each is a call to the engine.
    const inspectEvery = Math.ceil((INSPECT_EVERY * HEALTH_POLL_MS) / o.pollMs);
    let lastError = 'no answer yet';
    for (let i = 0; ; i++) {
      checkAbort(o.signal);
      try {
        const wrong = await o.ask();
        if (wrong === null) return;
        lastError = wrong;
      } catch (e) {
        // A GroveError is the answer itself (e.g. the wrong slug): no use asking again.
        if (e instanceof GroveError) throw e;
        lastError = reasonOf(e);
      }
      if (i % inspectEvery === 0) {
        const died = await o.dead();
        if (died) throw failure(died);
      }
      if (Date.now() >= deadline) throw failure(await o.timedOut(lastError));
      await sleep(o.pollMs);
    }
  }

  private bound(): { hub: RuntimeHub; gates: EgressGates; host: HostServices } {
    if (!this.hub || !this.gates || !this.host) throw new Error('the runtime is not bound to a hub yet');
    return { hub: this.hub, gates: this.gates, host: this.host };
  }

  private socketOf(slug: string): string {
    return join(this.bound().hub.runDir(slug), 'backend.sock');
  }

  private sandboxSpec(spec: WorkspaceSpec, runDir: string): SandboxSpec {
    const { egressPolicy: _policy, ...rest } = spec;
    return {
      ...rest,
      image: this.o.image,
      runDir,
      // Identity last, so the hub's env cannot make a backend claim another workspace's slug. The proxy variables
      // after it too: every process in the sandbox goes out through the gate.
      env: { ...spec.env, ...PROXY_ENV, GROVE_SLUG: spec.slug, GROVE_PROJECT: spec.project },
    };
  }

  private async lastLogs(slug: string): Promise<string> {
    try {
      const text = (await this.driver.logs(slug, 20)).trim();
      return text ? `; last output:\n${text}` : '; no output';
    } catch (e) {
      return `; logs unavailable (${reasonOf(e)})`;
    }
  }

  /** Wait for the backend's /health over its socket; fail fast (exit code + last logs) when the container dies. */
  private async waitHealthy(slug: string, signal: AbortSignal, pollMs = HEALTH_POLL_MS): Promise<void> {
    const socket = this.socketOf(slug);
    await this.waitFor({
      signal,
      pollMs,
      ask: async () => {
        const probe = await probeHealth(socket, 1_000);
        if (!probe.ok) return probe.error;
        if (probe.health.slug !== slug) throw failure(`the backend on ${slug}'s socket says it serves "${probe.health.slug}"`);
        return null;
      },
      dead: async () => {
        const info = await this.driver.inspect(slug);
        if (!info) return 'the sandbox container disappeared while starting';
        return info.running ? null : `the sandbox ${exitSummary(info)} before its backend answered /health${await this.lastLogs(slug)}`;
      },
      timedOut: async (last) => `the backend did not answer /health within ${this.healthTimeoutMs} ms (${last})${await this.lastLogs(slug)}`,
    });
  }
}

function checkAbort(signal: AbortSignal): void {
  if (signal.aborted) throw failure(reasonOf(signal.reason));
}

/** The Docker runtime. Bind it to a hub (createGrove does) before use. */
export function createDockerRuntime(o: DockerRuntimeOptions): WorkspaceRuntime {
  return new DockerRuntime(o);
}
