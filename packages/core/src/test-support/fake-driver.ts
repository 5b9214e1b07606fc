// Test helper: an in-memory SandboxDriver whose "containers" are HTTP servers on the workspace's real
// backend socket, so the Docker runtime's health wait, core's socket paths and rollbacks run for real without Docker.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { GroveError } from '@grove/contracts';
import type { SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec } from '@grove/sandbox';

export interface FakeContainer {
  id: string;
  spec: SandboxSpec;
  running: boolean;
  exitCode: number | null;
  server: Server | null;
  logs: string[];
}

export interface FakeBehaviour {
  /** ping/ensure throw docker_unavailable. */
  down: boolean;
  images: Set<string>;
  /** When false, the backend never listens (health times out). */
  listen: boolean;
  /** When set, the container "exits" with this code right after it starts. */
  crashWith: number | null;
  /** Delay before the backend listens. */
  listenDelayMs: number;
  agentSessionId: string | null;
  /** What /status says about a turn in progress. */
  busy: boolean;
  /** When set, ensure waits for it before making the container (an operation held mid-way). */
  ensureGate?: Promise<void>;
  /** When set, stop waits for it before stopping (a stop or teardown held mid-way). */
  stopGate?: Promise<void>;
}

export class FakeDriver implements SandboxDriver {
  readonly containers = new Map<string, FakeContainer>();
  readonly calls: string[] = [];
  readonly behave: FakeBehaviour = { down: false, images: new Set(['grove-sandbox:test']), listen: true, crashWith: null, listenDelayMs: 0, agentSessionId: null, busy: false };
  private seq = 0;
  private readonly watchers = new Set<(e: SandboxEvent) => void>();

  private check(): void {
    if (this.behave.down) throw new GroveError('docker_unavailable', 'cannot reach the Docker engine (fake)');
  }

  async ping(): Promise<void> {
    this.check();
  }

  async imageExists(image: string): Promise<boolean> {
    this.check();
    return this.behave.images.has(image);
  }

  async ensure(spec: SandboxSpec): Promise<SandboxInfo> {
    this.check();
    this.calls.push(`ensure ${spec.slug}`);
    await this.behave.ensureGate;
    let c = this.containers.get(spec.slug);
    if (!c) {
      c = { id: `fake-${++this.seq}`, spec, running: false, exitCode: null, server: null, logs: [] };
      this.containers.set(spec.slug, c);
    }
    if (!c.running) await this.boot(c);
    return this.info(c);
  }

  private async boot(c: FakeContainer): Promise<void> {
    c.running = true;
    c.exitCode = null;
    c.logs.push(`backend starting for ${c.spec.slug}`);
    if (this.behave.crashWith !== null) {
      c.running = false;
      c.exitCode = this.behave.crashWith;
      c.logs.push('fatal: GROVE_PROVIDER is not valid');
      return;
    }
    if (!this.behave.listen) return;
    const socket = join(c.spec.runDir, 'backend.sock');
    const slug = c.spec.slug;
    const behave = this.behave;
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/health') res.end(JSON.stringify({ ok: true, slug, provider: 'scripted' }));
      else if (req.url === '/status') res.end(JSON.stringify({ slug, agentSessionId: behave.agentSessionId, busy: behave.busy }));
      else {
        res.statusCode = 404;
        res.end('{}');
      }
    });
    c.server = server;
    const listen = (): void => {
      if (c.server !== server || !c.running) return;
      rmSync(socket, { force: true });
      server.listen(socket);
    };
    if (this.behave.listenDelayMs > 0) setTimeout(listen, this.behave.listenDelayMs);
    else await new Promise<void>((r) => server.listen(socket, r));
  }

  private async halt(c: FakeContainer): Promise<void> {
    c.running = false;
    c.exitCode = 0;
    const s = c.server;
    c.server = null;
    if (s?.listening) await new Promise((r) => s.close(r));
  }

  async inspect(slug: string): Promise<SandboxInfo | null> {
    this.check();
    const c = this.containers.get(slug);
    return c ? this.info(c) : null;
  }

  async stop(slug: string): Promise<void> {
    this.check();
    this.calls.push(`stop ${slug}`);
    await this.behave.stopGate;
    const c = this.containers.get(slug);
    if (c) await this.halt(c);
  }

  async remove(slug: string): Promise<void> {
    this.check();
    this.calls.push(`remove ${slug}`);
    const c = this.containers.get(slug);
    if (!c) return;
    await this.halt(c);
    this.containers.delete(slug);
  }

  async list(): Promise<SandboxInfo[]> {
    this.check();
    return [...this.containers.values()].map((c) => this.info(c));
  }

  async logs(slug: string): Promise<string> {
    return this.containers.get(slug)?.logs.join('\n') ?? '';
  }

  /** Simulate a container dying on its own (OOM, crash) while the registry thinks it runs. */
  async kill(slug: string, code = 137): Promise<void> {
    const c = this.containers.get(slug);
    if (!c) return;
    await this.halt(c);
    c.exitCode = code;
    for (const w of this.watchers) w({ slug, kind: 'died', exitCode: code });
  }

  watch(onEvent: (e: SandboxEvent) => void): () => void {
    this.watchers.add(onEvent);
    return () => this.watchers.delete(onEvent);
  }

  async closeAll(): Promise<void> {
    for (const c of this.containers.values()) await this.halt(c);
  }

  private info(c: FakeContainer): SandboxInfo {
    return { id: c.id, slug: c.spec.slug, project: c.spec.project, running: c.running, exitCode: c.exitCode, oomKilled: false };
  }
}
