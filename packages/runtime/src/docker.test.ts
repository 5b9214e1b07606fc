// The Docker runtime's contract (types.ts) with a stub driver: real gate, host.sock and backend sockets in a temp
// dir, no Docker. The real engine runs under it in core's *.docker.test.ts files and the e2e suite.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GroveError } from '@grove/contracts';
import type { SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WarmInfo, WarmSandboxSpec } from '@grove/sandbox';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDockerRuntime } from './docker.ts';
import type { WorkspaceRuntime, WorkspaceSpec } from './types.ts';

let dir: string;
let runtimes: WorkspaceRuntime[];

class StubDriver implements SandboxDriver {
  readonly calls: string[] = [];
  readonly specs = new Map<string, SandboxSpec>();
  readonly servers = new Map<string, Server>();
  running = new Set<string>();
  failRemove = false;
  images = new Set(['img:test']);

  async ping(): Promise<void> {}
  async imageExists(image: string): Promise<boolean> {
    return this.images.has(image);
  }
  async ensure(spec: SandboxSpec): Promise<SandboxInfo> {
    this.calls.push(`ensure ${spec.slug}`);
    this.specs.set(spec.slug, spec);
    if (!this.running.has(spec.slug)) {
      const server = createServer((_req, res) => res.end(JSON.stringify({ ok: true, slug: spec.slug, provider: 'scripted' })));
      await new Promise<void>((r) => server.listen(join(spec.runDir, 'backend.sock'), r));
      this.servers.set(spec.slug, server);
      this.running.add(spec.slug);
    }
    return this.info(spec.slug)!;
  }
  async inspect(slug: string): Promise<SandboxInfo | null> {
    return this.info(slug);
  }
  async stop(slug: string): Promise<void> {
    this.calls.push(`stop ${slug}`);
    await this.halt(slug);
  }
  async remove(slug: string): Promise<void> {
    this.calls.push(`remove ${slug}`);
    if (this.failRemove) throw new Error('engine said no');
    await this.halt(slug);
    this.specs.delete(slug);
  }
  async list(): Promise<SandboxInfo[]> {
    return [...this.specs.keys()].map((s) => this.info(s)!);
  }
  async logs(): Promise<string> {
    return '';
  }
  watch(_onEvent: (e: SandboxEvent) => void): () => void {
    return () => undefined;
  }
  private async halt(slug: string): Promise<void> {
    this.running.delete(slug);
    const s = this.servers.get(slug);
    this.servers.delete(slug);
    if (s) await new Promise((r) => s.close(r));
  }
  private info(slug: string): SandboxInfo | null {
    const spec = this.specs.get(slug);
    return spec ? { id: `id-${slug}`, slug, project: spec.project, running: this.running.has(slug), exitCode: this.running.has(slug) ? null : 0, oomKilled: false } : null;
  }
}

/** A driver whose warm sandboxes start and then die at once, never answering /pool: the death must be noticed. */
class DyingWarmDriver extends StubDriver {
  readonly warm = new Map<string, boolean>();
  /** Removed as soon as it is made (`--rm`, or someone else's `docker rm`). */
  vanish = false;
  async ensureWarm(spec: WarmSandboxSpec): Promise<SandboxInfo> {
    this.calls.push(`ensureWarm ${spec.pool}`);
    if (!this.vanish) this.warm.set(spec.pool, false);
    return { id: `id-${spec.pool}`, slug: '', project: spec.project, running: false, exitCode: 1, oomKilled: false };
  }
  async claimWarm(): Promise<SandboxInfo> {
    throw new Error('not claimable');
  }
  async removeWarm(pool: string): Promise<void> {
    this.warm.delete(pool);
  }
  async listWarm(): Promise<WarmInfo[]> {
    return [...this.warm].map(([pool, running]) => ({ pool, id: `id-${pool}`, running, claimed: false }));
  }
}

function runtimeWith(driver: SandboxDriver, o: { image?: string } = {}): WorkspaceRuntime {
  const rt = createDockerRuntime({ driver, image: o.image ?? 'img:test', logger: pino({ level: 'silent' }), healthTimeoutMs: 2_000 });
  rt.bind({ runDir: (slug) => join(dir, 'run', slug), onTurnEnded: async () => ({ events: [] }), emit: () => undefined });
  runtimes.push(rt);
  return rt;
}

function spec(slug: string): WorkspaceSpec {
  mkdirSync(join(dir, 'run', slug), { recursive: true });
  return {
    slug,
    project: 'demo',
    worktreePath: join(dir, 'wt'),
    sandboxGitDir: join(dir, 'git'),
    gitCommonDir: join(dir, 'repo'),
    threadDir: join(dir, 'thread'),
    stateDir: join(dir, 'state'),
    env: { GROVE_PROVIDER: 'scripted', GROVE_SLUG: 'someone-else', HTTPS_PROXY: 'http://evil' },
    limits: { memoryBytes: 1, nanoCpus: 1, pids: 1 },
    overlay: [],
    egressPolicy: { rules: [] },
  };
}

const sockets = (slug: string): string[] => ['egress.sock', 'host.sock', 'backend.sock'].filter((f) => existsSync(join(dir, 'run', slug, f)));

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-runtime-'));
  runtimes = [];
});
afterEach(async () => {
  for (const rt of runtimes) await rt.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the Docker runtime', () => {
  it('starts gate, host.sock and sandbox in order, answers where the backend is, and stamps identity and proxy last', async () => {
    const driver = new StubDriver();
    const rt = runtimeWith(driver);
    const steps: string[] = [];
    const seen: string[] = [];
    const started = await rt.start(spec('demo~a'), {
      signal: new AbortController().signal,
      onStep: (s) => steps.push(s),
      onSandbox: async (s) => void seen.push(`${s.id} ${s.image}`),
    });
    expect(steps).toEqual(['egress', 'image', 'container', 'health']);
    expect(seen).toEqual(['id-demo~a img:test']);
    expect(started).toEqual({ id: 'id-demo~a', backend: { socketPath: join(dir, 'run', 'demo~a', 'backend.sock') } });
    expect(sockets('demo~a')).toEqual(['egress.sock', 'host.sock', 'backend.sock']);
    const env = driver.specs.get('demo~a')?.env;
    expect(env).toMatchObject({ GROVE_SLUG: 'demo~a', GROVE_PROJECT: 'demo', HTTPS_PROXY: 'http://127.0.0.1:3128' });
    expect(driver.specs.get('demo~a')).toMatchObject({ image: 'img:test', runDir: join(dir, 'run', 'demo~a') });
    expect(await rt.setPolicy('demo~a', { rules: [] })).toBe(true);
    // start again on a running workspace: no second sandbox.
    await rt.start(spec('demo~a'), { signal: new AbortController().signal });
    expect(driver.calls.filter((c) => c === 'ensure demo~a')).toHaveLength(2);
    expect(await rt.probe('demo~a')).toEqual({ ok: true });
  });

  it('a missing image is spawn_failed naming the image, before any sandbox is made', async () => {
    const driver = new StubDriver();
    const rt = runtimeWith(driver, { image: 'img:missing' });
    const err = await rt.start(spec('demo~b'), { signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GroveError);
    expect(err).toMatchObject({ code: 'spawn_failed', message: expect.stringContaining('img:missing') as string });
    expect(driver.calls).toEqual([]);
  });

  it('an aborted start throws with the abort reason before waiting for health', async () => {
    const driver = new StubDriver();
    const rt = runtimeWith(driver);
    const abort = new AbortController();
    const p = rt.start(spec('demo~c'), { signal: abort.signal, onSandbox: async () => abort.abort(new Error('cancelled by teardown')) });
    await expect(p).rejects.toMatchObject({ code: 'spawn_failed', message: 'cancelled by teardown' });
  });

  it('stop, remove and detach are idempotent; remove detaches even when the engine fails; attach never touches the sandbox', async () => {
    const driver = new StubDriver();
    const rt = runtimeWith(driver);
    await rt.stop('demo~none');
    await rt.remove('demo~none');
    await rt.detach('demo~none');
    expect(await rt.poll('demo~none')).toBeNull();

    await rt.start(spec('demo~d'), { signal: new AbortController().signal });
    await rt.stop('demo~d');
    expect(sockets('demo~d')).toEqual([]);
    expect(await rt.setPolicy('demo~d', { rules: [] })).toBe(false);
    expect((await rt.poll('demo~d'))?.running).toBe(false);

    const before = driver.calls.length;
    await rt.attach('demo~d', { egressPolicy: { rules: [] } });
    expect(driver.calls.length).toBe(before);
    expect(sockets('demo~d')).toEqual(['egress.sock', 'host.sock']);

    driver.failRemove = true;
    await expect(rt.remove('demo~d')).rejects.toThrow('engine said no');
    expect(sockets('demo~d')).toEqual([]);
    expect((await rt.list()).map((s) => s.slug)).toEqual(['demo~d']);
  });

  it('a warm sandbox that dies before it waits for a claim fails as dead, not as a timeout', async () => {
    const driver = new DyingWarmDriver();
    const rt = runtimeWith(driver);
    const runDir = join(dir, 'run', 'pool-1');
    mkdirSync(runDir, { recursive: true });
    const { slug: _slug, egressPolicy: _policy, ...rest } = spec('demo~w');
    const p = rt.startWarm({ ...rest, pool: 'aaaaaaaaaaaa', runDir }, { signal: new AbortController().signal });
    await expect(p).rejects.toMatchObject({ code: 'spawn_failed', message: 'the warm sandbox aaaaaaaaaaaa exited before its backend waited for a claim' });
    driver.vanish = true;
    await expect(rt.startWarm({ ...rest, pool: 'bbbbbbbbbbbb', runDir }, { signal: new AbortController().signal })).rejects.toMatchObject({
      message: 'the warm sandbox bbbbbbbbbbbb disappeared while starting',
    });
  });

  it('is bound to one hub', () => {
    const rt = runtimeWith(new StubDriver());
    expect(() => rt.bind({ runDir: () => dir, onTurnEnded: async () => ({ events: [] }), emit: () => undefined })).toThrow('already bound');
  });
});
