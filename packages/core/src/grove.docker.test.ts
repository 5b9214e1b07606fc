// The lifecycle for real: git repos in temp dirs, a SQLite file, the Docker driver and the grove-sandbox image.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backendHealthSchema, isGroveError } from '@grove/contracts';
import type { GroveEvent } from '@grove/contracts';
import { createDockerDriver, LABELS } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { TestGroveOptions } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { branches, makeSourceRepo } from './test-support/repo.ts';
import { volumesSupported } from './volume.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `core-${randomBytes(4).toString('hex')}`;

function dockerReady(): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', IMAGE], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const ready = dockerReady();
/** Every workspace here lives in its own disk image when the host can loop-mount (root): the lifecycle with the quota on. */
const QUOTA = volumesSupported().ok && existsSync('/dev/loop-control') ? { bytes: 64 * 1024 * 1024, inodes: 4_096 } : null;

function mountsUnder(root: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((p) => p.startsWith(`${root}/`));
}

let tmp: string;
let source: string;
const groves: Grove[] = [];

beforeAll(() => {
  // Fail loudly rather than skip: these are the tests that prove the lifecycle works for real.
  if (!ready) throw new Error(`Docker image ${IMAGE} is missing or the engine is down; run \`npm run setup\``);
  tmp = mkdtempSync(join(tmpdir(), 'grove-coredk-'));
  source = makeSourceRepo(join(tmp, 'src'));
});
afterEach(async () => {
  for (const g of groves.splice(0)) await g.close();
});
afterAll(() => {
  if (!ready) return;
  removeContainers();
  // A failed test may leave disk images mounted: unmount them (newest first) so no loop device outlives the file.
  for (const p of mountsUnder(tmp).reverse()) execFileSync('umount', ['--', p]);
  rmSync(tmp, { recursive: true, force: true });
});

/** Containers of this test file's instance (optionally one slug), running or not. */
function containers(slug?: string): string[] {
  const filters = ['--filter', `label=${LABELS.instance}=${INSTANCE}`];
  if (slug) filters.push('--filter', `label=${LABELS.slug}=${slug}`);
  const out = execFileSync('docker', ['ps', '-aq', ...filters], { encoding: 'utf8' }).trim();
  return out ? out.split('\n') : [];
}

function removeContainers(): void {
  const ids = containers();
  if (ids.length) execFileSync('docker', ['rm', '-f', ...ids], { stdio: 'ignore' });
}

function running(slug: string): boolean {
  const [id] = containers(slug);
  if (!id) return false;
  return execFileSync('docker', ['inspect', '-f', '{{.State.Running}}', id], { encoding: 'utf8' }).trim() === 'true';
}

function ls(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir) : [];
}

function http(socketPath: string, opts: { method?: string; path: string; body?: unknown }): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = request(
      { socketPath, path: opts.path, method: opts.method ?? 'GET', agent: false, headers: body ? { 'content-type': 'application/json' } : {} },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text ? (JSON.parse(text) as unknown) : null }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function freshHome(over: Partial<TestGroveOptions> = {}): Promise<{ grove: Grove; home: string }> {
  const home = mkdtempSync(join(tmp, 'home-'));
  const grove = await createTestGrove({
    home,
    driver: createDockerDriver({ instance: INSTANCE }),
    image: IMAGE,
    maxRunning: 3,
    logger: pino({ level: process.env.GROVE_TEST_LOG ?? 'silent' }),
    healthTimeoutMs: 30_000,
    diskQuota: QUOTA,
    ...over,
  });
  groves.push(grove);
  await grove.addProject({ name: 'demo', source, createDefault: false });
  return { grove, home };
}

describe('lifecycle with the Docker driver', () => {
  it('fork -> running (health over the socket) -> stop -> start -> teardown; the branch survives', async () => {
    const { grove, home } = await freshHome();
    const ws = await grove.fork({ project: 'demo', name: 'life' });
    expect(ws.state).toBe('running');
    const socket = await grove.socketFor('demo~life');
    const health = await http(socket, { path: '/health' });
    expect(health.status).toBe(200);
    expect(backendHealthSchema.parse(health.json)).toMatchObject({ ok: true, slug: 'demo~life' });
    expect(running('demo~life')).toBe(true);

    // The sandbox sees the worktree and git works inside it (common dir read-only, admin dir writable).
    const [id] = containers('demo~life');
    const status = execFileSync('docker', ['exec', '-u', '1000:1000', id ?? '', 'git', 'status', '--porcelain=v1', '--branch'], { encoding: 'utf8' });
    expect(status).toContain('## grove/life');

    // A message lands in the thread, which must survive stop/start.
    const posted = await http(socket, { method: 'POST', path: '/messages', body: { text: 'remember me' } });
    expect(posted.status).toBeLessThan(300);
    // The scripted agent's reply ends its turn, which core records; stop after that so the events' order is fixed.
    await expect
      .poll(async () => (await grove.events({ slug: 'demo~life', limit: 100 })).some((e) => e.type === 'turn.ended'), { timeout: 30_000 })
      .toBe(true);

    const stopped = await grove.stop('demo~life');
    expect(stopped.state).toBe('stopped');
    expect(containers('demo~life')).toHaveLength(1);
    expect(running('demo~life')).toBe(false);
    await expect(grove.socketFor('demo~life')).rejects.toMatchObject({ code: 'workspace_stopped' });

    const started = await grove.start('demo~life');
    expect(started.state).toBe('running');
    const again = await http(await grove.socketFor('demo~life'), { path: '/thread' });
    expect(JSON.stringify(again.json)).toContain('remember me');

    const gone = await grove.teardown('demo~life');
    expect(gone.state).toBe('gone');
    expect(containers('demo~life')).toEqual([]);
    expect(mountsUnder(home)).toEqual([]);
    expect(existsSync(join(home, 'volumes', 'demo~life'))).toBe(false);
    expect(existsSync(join(home, 'worktrees', 'demo', 'life'))).toBe(false);
    expect(ls(join(home, 'repos', 'demo', 'worktrees'))).toEqual([]);
    expect(branches(join(home, 'repos', 'demo'))).toContain('grove/life');
    const [archive] = ls(join(home, 'archive'));
    expect(ls(join(home, 'archive', archive ?? '', 'thread'))).toContain('thread.jsonl');
    expect((await grove.events({ slug: 'demo~life', limit: 100 })).map((e) => e.type)).toEqual([
      'workspace.reserved',
      'workspace.prepared',
      'sandbox.started',
      'workspace.registered',
      'turn.ended',
      'workspace.stopped',
      'workspace.reserved',
      'sandbox.started',
      'workspace.started',
      'workspace.teardown',
      'workspace.cleaned',
    ]);
  });

  it('10 concurrent forks with cap 3: exactly 3 run, 7 get capacity_reached, nothing left for the refused', async () => {
    const { grove, home } = await freshHome({ maxRunning: 3 });
    const names = Array.from({ length: 10 }, (_, i) => `c${i}`);
    const results = await Promise.allSettled(names.map((name) => grove.fork({ project: 'demo', name })));
    const ok = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const errs = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    expect(ok).toHaveLength(3);
    expect(ok.every((w) => w.state === 'running')).toBe(true);
    expect(errs).toHaveLength(7);
    for (const e of errs) {
      expect(isGroveError(e) && e.code).toBe('capacity_reached');
      expect(isGroveError(e) && e.details).toMatchObject({ cap: 3 });
    }
    expect(await grove.capacity()).toEqual({ running: 3, creating: 0, cap: 3, queued: 0 });
    const rows = (await grove.list({ includeGone: true })).workspaces;
    expect(rows.map((w) => w.slug).sort()).toEqual(ok.map((w) => w.slug).sort());
    expect(ls(join(home, 'worktrees', 'demo')).sort()).toEqual(ok.map((w) => w.name).sort());
    expect(containers()).toHaveLength(3);
    for (const w of ok) await grove.teardown(w.slug);
    expect(containers()).toEqual([]);
  });

  describe('a fork that fails midway leaves a spawn_failed event, a failed row and nothing else', () => {
    async function expectNothingLeft(grove: Grove, home: string, slug: string, step: string): Promise<GroveEvent | undefined> {
      const ws = await grove.get(slug);
      expect(ws.state).toBe('failed');
      expect(ws.failureReason).toBeTruthy();
      const failed = (await grove.events({ slug })).find((e) => e.type === 'spawn_failed');
      expect(failed?.data).toMatchObject({ step, reason: ws.failureReason });
      expect(containers(slug)).toEqual([]);
      expect(ls(join(home, 'worktrees', 'demo'))).toEqual([]);
      expect(ls(join(home, 'repos', 'demo', 'worktrees'))).toEqual([]);
      expect(ls(join(home, 'run'))).toEqual([]);
      expect(branches(join(home, 'repos', 'demo'))).toEqual(['feature', 'main']);
      expect(await grove.capacity()).toMatchObject({ running: 0, creating: 0 });
      return failed;
    }

    it('bad base ref', async () => {
      const { grove, home } = await freshHome();
      await expect(grove.fork({ project: 'demo', name: 'badbase', from: 'no/such-ref' })).rejects.toMatchObject({
        code: 'spawn_failed',
        message: expect.stringContaining('no/such-ref') as string,
      });
      await expectNothingLeft(grove, home, 'demo~badbase', 'worktree');
    });

    it('missing image', async () => {
      const { grove, home } = await freshHome({ image: `grove-sandbox:missing-${INSTANCE}` });
      await expect(grove.fork({ project: 'demo', name: 'noimage' })).rejects.toMatchObject({ code: 'spawn_failed', details: { step: 'image' } });
      await expectNothingLeft(grove, home, 'demo~noimage', 'image');
    });

    it('a backend that exits at start: fails fast with the exit code and its output', async () => {
      const { grove, home } = await freshHome({ sandboxEnv: { GROVE_PROVIDER: 'no-such-provider' } });
      const t0 = Date.now();
      const err = await grove.fork({ project: 'demo', name: 'crash' }).catch((e: unknown) => e);
      expect(Date.now() - t0).toBeLessThan(25_000);
      expect(err).toMatchObject({ code: 'spawn_failed', details: { step: 'health' } });
      expect((err as Error).message).toMatch(/exited with code [1-9]/);
      expect((err as Error).message).toContain('GROVE_PROVIDER');
      await expectNothingLeft(grove, home, 'demo~crash', 'health');
    });

    it('a backend that never answers on its socket: times out after healthTimeoutMs', async () => {
      const { grove, home } = await freshHome({ healthTimeoutMs: 3_000, sandboxEnv: { GROVE_SOCKET: '/tmp/elsewhere.sock' } });
      const err = await grove.fork({ project: 'demo', name: 'silent' }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'spawn_failed', details: { step: 'health' } });
      expect((err as Error).message).toContain('within 3000 ms');
      await expectNothingLeft(grove, home, 'demo~silent', 'health');
    });
  });

  it('reconcile after a SIGKILLed fork: no orphan container, worktree, branch or duplicate row', async () => {
    const { grove: first, home } = await freshHome();
    await first.close();
    groves.splice(0);
    const script = fileURLToPath(new URL('./test-support/fork-and-hang.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', script, home, INSTANCE, IMAGE, 'demo', 'killed', ...(QUOTA ? [JSON.stringify(QUOTA)] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 60_000;
    while (!out.includes('"sandbox.started"') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(out).toContain('"sandbox.started"');
    child.kill('SIGKILL');
    await new Promise((r) => (child.exitCode === null && child.signalCode === null ? child.on('exit', r) : r(null)));

    // What the crash left: a creating row, a worktree and a running container.
    expect(containers('demo~killed')).toHaveLength(1);
    expect(ls(join(home, 'worktrees', 'demo'))).toEqual(['killed']);
    if (QUOTA) expect(mountsUnder(home)).toHaveLength(4); // its image, and its worktree, state and git dir binds

    const grove = await createTestGrove({
      home,
      driver: createDockerDriver({ instance: INSTANCE }),
      image: IMAGE,
      maxRunning: 3,
      logger: pino({ level: 'silent' }),
      diskQuota: QUOTA,
    });
    groves.push(grove);
    expect((await grove.get('demo~killed')).state).toBe('creating');
    await grove.reconcile();

    expect(await grove.get('demo~killed')).toMatchObject({ state: 'failed', failureReason: 'interrupted by a server restart' });
    expect((await grove.list({ includeGone: true })).workspaces.filter((w) => w.slug === 'demo~killed')).toHaveLength(1);
    expect(containers('demo~killed')).toEqual([]);
    expect(ls(join(home, 'worktrees', 'demo'))).toEqual([]);
    expect(ls(join(home, 'repos', 'demo', 'worktrees'))).toEqual([]);
    expect(mountsUnder(home)).toEqual([]);
    expect(ls(join(home, 'volumes'))).toEqual([]);
    expect(branches(join(home, 'repos', 'demo'))).not.toContain('grove/killed');
    expect(await grove.capacity()).toMatchObject({ running: 0, creating: 0 });
    // The slug is usable again.
    expect((await grove.fork({ project: 'demo', name: 'killed' })).state).toBe('running');
    await grove.teardown('demo~killed');
  });
});
