// The runtime's side of the egress floor (DESIGN.md section 6): one gate per workspace, started before its
// sandbox and stopped with it, its decisions written to the hub's audit trail at a bounded rate.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { EgressDecision, EgressPolicy, EventType } from '@grove/contracts';
import { createGate } from '@grove/egress';
import type { Connector, Gate, Resolver } from '@grove/egress';
import type { Logger } from 'pino';

/** Every process in a sandbox finds the gate through these (the backend relays 127.0.0.1:3128 to it). */
export const PROXY_URL = 'http://127.0.0.1:3128';
export const PROXY_ENV: Readonly<Record<string, string>> = {
  HTTPS_PROXY: PROXY_URL,
  HTTP_PROXY: PROXY_URL,
  https_proxy: PROXY_URL,
  http_proxy: PROXY_URL,
  // The backend and the credential relay live on the sandbox's own loopback: never through the gate.
  NO_PROXY: 'localhost,127.0.0.1',
  no_proxy: 'localhost,127.0.0.1',
};

/** How the Docker runtime builds each workspace's gate (tests: a fixed resolver, loopback only). */
export interface EgressGateOptions {
  /** Name resolution on the host (tests: a fixed table). Default: the system resolver. */
  resolver?: Resolver;
  /** Upstream connector (tests: loopback only). Default: a TCP connection to the checked address. */
  connect?: Connector;
  connectTimeoutMs?: number;
  maxTunnels?: number;
  /** Audit rate limits, per workspace and window: decisions past the budget are folded into one summary event. */
  audit?: { windowMs?: number; allowedPerWindow?: number; deniedPerWindow?: number };
}

type Emit = (slug: string, type: EventType, data: Record<string, unknown>) => void;

interface Window {
  startedAt: number;
  written: { allow: number; deny: number };
  /** Decisions over budget, folded per (decision, method, host, port, rule). */
  folded: Map<string, EgressDecision & { count: number }>;
  timer: NodeJS.Timeout | null;
}

const AUDIT_DEFAULTS = { windowMs: 10_000, allowedPerWindow: 20, deniedPerWindow: 50 };

/**
 * Writes gate decisions as egress.allowed / egress.denied events. Within each window a workspace gets a
 * budget of individual events per kind; the rest are folded into one summary per (host, port, rule)
 * with a count and summed bytes, written when the window ends or the gate stops. So a sandbox looping
 * on a denied host costs a few rows, not one per attempt, and nothing is dropped from the totals.
 */
export class EgressAudit {
  private readonly windows = new Map<string, Window>();
  private readonly o: typeof AUDIT_DEFAULTS;

  constructor(
    private readonly emit: Emit,
    opts: EgressGateOptions['audit'] = {},
  ) {
    this.o = { ...AUDIT_DEFAULTS, ...opts };
  }

  record(d: EgressDecision): void {
    const w = this.window(d.slug);
    const kind = d.decision;
    const budget = kind === 'allow' ? this.o.allowedPerWindow : this.o.deniedPerWindow;
    if (w.written[kind] < budget) {
      w.written[kind]++;
      this.write(d);
      return;
    }
    const key = `${d.decision} ${d.method} ${d.host} ${d.port} ${d.rule}`;
    const f = w.folded.get(key);
    if (f) {
      f.count++;
      f.bytesIn += d.bytesIn;
      f.bytesOut += d.bytesOut;
      f.durationMs += d.durationMs;
      f.address = d.address ?? f.address;
      f.status = d.status;
      if (d.error) f.error = d.error;
    } else {
      w.folded.set(key, { ...d, count: 1 });
    }
    w.timer ??= setTimeout(() => this.flush(d.slug), Math.max(1, w.startedAt + this.o.windowMs - Date.now()));
    w.timer.unref();
  }

  /** Write the folded summaries of a workspace now (its gate stops, or the window ended). */
  flush(slug: string): void {
    const w = this.windows.get(slug);
    if (!w) return;
    this.windows.delete(slug);
    if (w.timer) clearTimeout(w.timer);
    for (const f of w.folded.values()) this.write(f);
  }

  flushAll(): void {
    for (const slug of [...this.windows.keys()]) this.flush(slug);
  }

  private window(slug: string): Window {
    const now = Date.now();
    let w = this.windows.get(slug);
    if (w && now - w.startedAt >= this.o.windowMs) {
      this.flush(slug);
      w = undefined;
    }
    if (!w) {
      w = { startedAt: now, written: { allow: 0, deny: 0 }, folded: new Map(), timer: null };
      this.windows.set(slug, w);
    }
    return w;
  }

  private write(d: EgressDecision): void {
    const { slug, ...data } = d;
    this.emit(slug, d.decision === 'allow' ? 'egress.allowed' : 'egress.denied', data);
  }
}

export interface EgressGatesOptions {
  logger: Logger;
  /** <home>/run/<slug>/egress.sock */
  socketPath(slug: string): string;
  emit: Emit;
  options?: EgressGateOptions;
  socketOwner?: { uid: number; gid: number };
}

/** The running gates of this process, one per workspace. */
export class EgressGates {
  private readonly gates = new Map<string, Promise<Gate>>();
  readonly audit: EgressAudit;

  constructor(private readonly o: EgressGatesOptions) {
    this.audit = new EgressAudit(o.emit, o.options?.audit);
  }

  running(slug: string): boolean {
    return this.gates.has(slug);
  }

  /** Start the slug's gate with this policy, or apply the policy to the one already running. Idempotent. */
  async ensure(slug: string, policy: EgressPolicy): Promise<void> {
    const existing = this.gates.get(slug);
    if (existing) {
      (await existing).setPolicy(policy);
      return;
    }
    const started = this.start(slug, policy);
    this.gates.set(slug, started);
    try {
      await started;
    } catch (e) {
      if (this.gates.get(slug) === started) this.gates.delete(slug);
      throw e;
    }
  }

  /** Applies at once to a running gate (open tunnels it no longer allows are cut); no-op when none runs. */
  async setPolicy(slug: string, policy: EgressPolicy): Promise<void> {
    const g = this.gates.get(slug);
    if (g) (await g).setPolicy(policy);
  }

  /** Stop the slug's gate (its open tunnels are cut and audited) and write its pending audit summaries. */
  async close(slug: string): Promise<void> {
    const g = this.gates.get(slug);
    this.gates.delete(slug);
    if (g) await (await g.catch(() => null))?.close();
    this.audit.flush(slug);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.gates.keys()].map((s) => this.close(s)));
    this.audit.flushAll();
  }

  private async start(slug: string, policy: EgressPolicy): Promise<Gate> {
    const socketPath = this.o.socketPath(slug);
    await mkdir(dirname(socketPath), { recursive: true });
    const opts = this.o.options ?? {};
    const gate = createGate({
      slug,
      socketPath,
      policy,
      audit: (d) => this.audit.record(d),
      ...(opts.resolver ? { resolver: opts.resolver } : {}),
      ...(opts.connect ? { connect: opts.connect } : {}),
      ...(opts.connectTimeoutMs ? { connectTimeoutMs: opts.connectTimeoutMs } : {}),
      ...(opts.maxTunnels ? { maxTunnels: opts.maxTunnels } : {}),
      ...(this.o.socketOwner ? { socketOwner: this.o.socketOwner } : {}),
      onError: (err, context) => this.o.logger.warn({ err, slug }, `egress gate: ${context}`),
    });
    await gate.listen();
    this.o.logger.info({ slug, socketPath, rules: policy.rules.length }, 'egress gate listening');
    return gate;
  }
}
