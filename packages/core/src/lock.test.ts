import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RepoLock, parseHolder, pidAlive } from './lock.ts';

let dir: string;
const children: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'grove-lock-'));
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.pid) process.kill(c.pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A pid that certainly belonged to a process that has exited (and been reaped). */
async function deadPid(): Promise<number> {
  const c = spawn(process.execPath, ['-e', '']);
  const pid = c.pid;
  await new Promise((r) => c.on('exit', r));
  if (!pid) throw new Error('no pid');
  return pid;
}

describe('RepoLock', () => {
  it('never lets two concurrent callers overlap, and releases the file afterwards', async () => {
    const a = new RepoLock({ dir, timeoutMs: 5_000 });
    const b = new RepoLock({ dir, timeoutMs: 5_000 }); // a second instance in the same process
    let inside = 0;
    let maxInside = 0;
    const order: number[] = [];
    const work = (lock: RepoLock, i: number): Promise<void> =>
      lock.withLock('demo', async () => {
        inside++;
        maxInside = Math.max(maxInside, inside);
        expect(existsSync(join(dir, 'demo.lock'))).toBe(true);
        expect(parseHolder(readFileSync(join(dir, 'demo.lock'), 'utf8'))?.pid).toBe(process.pid);
        await sleep(5 + (i % 3) * 5);
        order.push(i);
        inside--;
      });
    await Promise.all(Array.from({ length: 12 }, (_, i) => work(i % 2 ? a : b, i)));
    expect(maxInside).toBe(1);
    expect(order).toHaveLength(12);
    expect(existsSync(join(dir, 'demo.lock'))).toBe(false);
  });

  it('keeps different keys independent', async () => {
    const lock = new RepoLock({ dir, timeoutMs: 5_000 });
    let both = false;
    let inA = false;
    await Promise.all([
      lock.withLock('a', async () => {
        inA = true;
        await sleep(50);
        inA = false;
      }),
      lock.withLock('b', async () => {
        await sleep(10);
        both = inA;
      }),
    ]);
    expect(both).toBe(true);
  });

  it('releases the lock when fn throws', async () => {
    const lock = new RepoLock({ dir, timeoutMs: 1_000 });
    await expect(lock.withLock('demo', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(existsSync(join(dir, 'demo.lock'))).toBe(false);
    await expect(lock.withLock('demo', async () => 7)).resolves.toBe(7);
  });

  it('heals a lock left by a dead pid', async () => {
    const pid = await deadPid();
    expect(pidAlive(pid)).toBe(false);
    writeFileSync(join(dir, 'demo.lock'), JSON.stringify({ pid, at: new Date().toISOString() }));
    const lock = new RepoLock({ dir, timeoutMs: 300 });
    const t0 = Date.now();
    await expect(lock.withLock('demo', async () => 'ran')).resolves.toBe('ran');
    expect(Date.now() - t0).toBeLessThan(300);
    expect(existsSync(join(dir, 'demo.lock'))).toBe(false);
  });

  it('releaseStale() removes dead holders and keeps live ones', async () => {
    const pid = await deadPid();
    writeFileSync(join(dir, 'dead.lock'), JSON.stringify({ pid, at: 'x' }));
    writeFileSync(join(dir, 'live.lock'), JSON.stringify({ pid: process.pid, at: 'x' }));
    const lock = new RepoLock({ dir, timeoutMs: 300 });
    expect(await lock.releaseStale()).toEqual([join(dir, 'dead.lock')]);
    expect(existsSync(join(dir, 'live.lock'))).toBe(true);
  });

  it('fails with git_busy after the timeout while a live process holds the lock', async () => {
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    children.push(holder);
    writeFileSync(join(dir, 'demo.lock'), JSON.stringify({ pid: holder.pid, at: new Date().toISOString() }));
    const lock = new RepoLock({ dir, timeoutMs: 250 });
    const t0 = Date.now();
    let ran = false;
    const err = await lock
      .withLock('demo', async () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    const waited = Date.now() - t0;
    expect(ran).toBe(false);
    expect(err).toMatchObject({ code: 'git_busy', status: 503 });
    expect((err as Error).message).toContain(`pid ${holder.pid}`);
    expect(waited).toBeGreaterThanOrEqual(240);
    expect(waited).toBeLessThan(2_000);
    // The live holder's file is untouched.
    expect(parseHolder(readFileSync(join(dir, 'demo.lock'), 'utf8'))?.pid).toBe(holder.pid);
  });

  it('is blocked by another process holding it through the same code, and gets it once released', async () => {
    const script = fileURLToPath(new URL('./test-support/hold-lock.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', script, dir, 'demo', '700'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 15_000;
    while (!out.includes('locked') && Date.now() < deadline) await sleep(20);
    expect(out).toContain('locked');

    // A short timeout gives up while the child holds it...
    await expect(new RepoLock({ dir, timeoutMs: 100 }).withLock('demo', async () => undefined)).rejects.toMatchObject({ code: 'git_busy' });
    // ...a longer one waits for the release and then runs strictly after it.
    const got = await new RepoLock({ dir, timeoutMs: 10_000 }).withLock('demo', async () => Date.now());
    await new Promise((r) => (child.exitCode === null ? child.on('exit', r) : r(null)));
    const released = Number(/releasing (\d+)/.exec(out)?.[1]);
    expect(Number.isFinite(released)).toBe(true);
    expect(got).toBeGreaterThanOrEqual(released);
    expect(child.exitCode).toBe(0);
  });

  it('a corrupt lock file is trusted briefly, then healed', async () => {
    writeFileSync(join(dir, 'demo.lock'), '');
    const quick = new RepoLock({ dir, timeoutMs: 100 });
    await expect(quick.withLock('demo', async () => undefined)).rejects.toMatchObject({ code: 'git_busy' });
    const patient = new RepoLock({ dir, timeoutMs: 5_000 });
    await expect(patient.withLock('demo', async () => 'ok')).resolves.toBe('ok');
  });
});
