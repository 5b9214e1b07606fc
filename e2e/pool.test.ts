// Warm sandboxes (GROVE_WARM_POOL) on the real engine: a fork claims the ready one, the pool refills, two forks never
// share one, a fork at the cap makes the warm one give way, a claimed workspace lives like any other, and a restart
// recycles what the previous process left. GROVE_WARM_POOL=0 makes none.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Capacity, GroveEvent, ListWorkspacesResponse, Workspace } from '@grove/contracts';
import { listCommand } from '../packages/sandbox/src/test-support.ts';
import { TEST_RUNTIME, cleanup, containerOf, dockerExec, makeHome, startServer, waitFor, waitRunning } from './harness.ts';
import type { RunningServer } from './harness.ts';

const CAP = 4;
const home = makeHome('pool');
const src = fs.mkdtempSync(path.join(home, '..', 'grove-pool-src-'));
let s: RunningServer | undefined;

const server = (): RunningServer => {
  if (!s) throw new Error('server not started');
  return s;
};
const boot = async (): Promise<RunningServer> => (s = await startServer({ home, env: { GROVE_WARM_POOL: '1', GROVE_MAX_RUNNING: String(CAP) } }));

/** The warm sandboxes not yet claimed: named `grove-<instance>_warm-<id>`, labelled grove.pool. */
function warmIds(instance: string): string[] {
  const out = execFileSync('docker', ['ps', '-a', '--filter', `label=grove.instance=${instance}`, '--filter', 'label=grove.pool', '--format', '{{.ID}} {{.Names}}'], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes(`grove-${instance}_warm-`))
    .map((l) => l.split(' ')[0] ?? '');
}

/** Full id of the container of a slug (containerOf finds a claimed warm sandbox, which has no grove.slug label). */
function containerNamed(instance: string, slug: string): string | null {
  const id = containerOf(instance, slug);
  return id ? fullId(id) : null;
}

function fullId(id: string): string {
  return execFileSync('docker', ['inspect', '--format', '{{.Id}}', id], { encoding: 'utf8' }).trim();
}

async function capacity(on = server()): Promise<Capacity> {
  return (await on.api<ListWorkspacesResponse>('GET', '/api/workspaces')).body.capacity;
}

/** One warm sandbox ready (capacity says so, and the engine has it): its full id. */
async function readyWarm(on = server()): Promise<string> {
  return waitFor('a ready warm sandbox', async () => {
    const ids = warmIds(on.instance);
    return (await capacity(on)).warm === 1 && ids.length === 1 ? fullId(ids[0] ?? '') : null;
  });
}

const repo = (): string => path.join(home, 'repos', 'demo');

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim();
}

/** A commit on the demo project's origin (<home>/demo-src): the primary clone gets it with the fetch before the next fork. */
function commitInSource(file: string, text: string): void {
  const origin = path.join(home, 'demo-src');
  fs.writeFileSync(path.join(origin, file), text);
  execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', '-C', origin, 'add', file]);
  execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', '-C', origin, 'commit', '-q', '-m', `add ${file}`]);
}

async function fork(project: string, name: string): Promise<{ status: number; body: { workspace: Workspace } }> {
  return server().api<{ workspace: Workspace }>('POST', '/api/workspaces', { project, name });
}

async function events(slug: string, on = server()): Promise<GroveEvent[]> {
  return (await on.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${encodeURIComponent(slug)}`)).body.events;
}

/** The scripted agent writes a file; the host sees it in the workspace's worktree (the mounts followed the rename). */
async function agentWrites(slug: string, name: string, file: string, text: string, on = server()): Promise<void> {
  expect((await on.api('POST', `/w/${slug}/messages`, { text: `write ${file} ${text}` })).status).toBe(202);
  const at = path.join(on.home, 'worktrees', 'demo', name, file);
  await waitFor(`${file} in ${slug}'s worktree`, async () => fs.existsSync(at) && fs.readFileSync(at, 'utf8') === text);
}

beforeAll(async () => {
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', ...args], { cwd: src, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(src, 'README.md'), '# app\n');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  await boot();
  await waitRunning(server(), 'demo');
});

afterAll(async () => {
  await s?.stop().catch(() => undefined);
  cleanup(home);
  fs.rmSync(src, { recursive: true, force: true });
});

describe('warm pool', () => {
  it('hands the ready warm sandbox to a fork, which serves as that workspace, and refills', async () => {
    const warm = await readyWarm();
    // As hardened as any sandbox: the same flags and limits as the default workspace's, only the identity differs.
    const inspect = (id: string) => JSON.parse(execFileSync('docker', ['inspect', id], { encoding: 'utf8' }))[0] as { HostConfig: Record<string, unknown>; Config: { Labels: Record<string, string> } };
    const w = inspect(warm);
    const cold = inspect(containerNamed(server().instance, 'demo') ?? '');
    for (const k of ['NetworkMode', 'ReadonlyRootfs', 'CapDrop', 'CapAdd', 'SecurityOpt', 'Privileged', 'PidsLimit', 'Memory', 'MemorySwap', 'NanoCpus', 'Runtime', 'Init']) {
      expect(w.HostConfig[k], k).toEqual(cold.HostConfig[k]);
    }
    expect(w.Config.Labels['grove.slug']).toBeUndefined();
    // Its claim socket is the backend's alone: the agent's user can neither list /run/grove nor connect there.
    const listRun = dockerExec(warm, ['sh', '-c', listCommand('/run/grove', TEST_RUNTIME)]);
    expect(listRun.code).not.toBe(0);
    expect(listRun.out).toMatch(/permission denied/i);
    const connect = dockerExec(warm, ['node', '-e', "require('net').connect('/run/grove/backend.sock').on('connect',()=>process.exit(0)).on('error',(e)=>{console.log(e.code);process.exit(3)})"]);
    expect(connect.code).toBe(3);
    expect(connect.out).toContain('EACCES');
    // The next fork's worktree is checked out already (detached at the default branch, the agent's user's), but no
    // branch is made for it and nothing else of a workspace is there before a claim.
    const listed = dockerExec(warm, ['sh', '-c', listCommand('/workspace', TEST_RUNTIME)]);
    expect(listed.code).toBe(0);
    expect(listed.out).toContain('README.md');
    expect(dockerExec(warm, ['stat', '-c', '%u', '/workspace/README.md']).out.trim()).toBe('1000');
    expect(git(repo(), 'branch', '--list', 'grove/a')).toBe('');

    const r = await fork('demo', 'a');
    expect(r.status).toBe(201);
    expect(r.body.workspace.state).toBe('running');
    expect(containerNamed(server().instance, 'demo~a')).toBe(warm);
    const started = (await events('demo~a')).find((e) => e.type === 'sandbox.started');
    expect(started?.data).toMatchObject({ containerId: warm, warm: true });
    const health = await server().api<{ slug: string }>('GET', '/w/demo~a/health');
    expect(health.status).toBe(200);
    expect(health.body.slug).toBe('demo~a');
    await agentWrites('demo~a', 'a', 'hello.txt', 'from-a');
    // git inside works on the worktree added into the sandbox's (empty, already mounted) dir, on the fork's branch.
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'status', '--porcelain']).code).toBe(0);
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'rev-parse', '--abbrev-ref', 'HEAD']).out.trim()).toBe('grove/a');
    expect(dockerExec(warm, ['cat', '/workspace/README.md']).code).toBe(0);
    // On the host: the fork's branch at the base, its worktree listed at the workspace's path, none left in the pool's dir.
    expect(git(repo(), 'merge-base', 'main', 'grove/a')).toBe(git(repo(), 'rev-parse', 'main'));
    const worktrees = git(repo(), 'worktree', 'list', '--porcelain');
    expect(worktrees).toContain(`worktree ${path.join(fs.realpathSync(home), 'worktrees', 'demo', 'a')}\nHEAD `);
    expect(worktrees).toContain('branch refs/heads/grove/a');
    // Its admin dir is named as `git worktree add` names a cold fork's (after the worktree), not after the pool's dir.
    expect(fs.readFileSync(path.join(repo(), 'worktrees', 'a', 'gitdir'), 'utf8').trim()).toBe(path.join(fs.realpathSync(home), 'worktrees', 'demo', 'a', '.git'));

    const next = await readyWarm();
    expect(next).not.toBe(warm);
    expect(git(repo(), 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree ') && l.includes(`${path.sep}pool${path.sep}`))).toHaveLength(1);
  });

  it('moves the prepared worktree to the base when the base moved since it was prepared, files the agent can write', async () => {
    const warm = await readyWarm();
    const prepared = git(repo(), 'rev-parse', 'main');
    commitInSource('moved.txt', 'moved\n');
    const r = await fork('demo', 'm');
    expect(r.status).toBe(201);
    expect(containerNamed(server().instance, 'demo~m')).toBe(warm);
    // The fetch before the fork moved main: the fork starts there, not at the commit the warm worktree was made at.
    const moved = git(repo(), 'rev-parse', 'main');
    expect(moved).not.toBe(prepared);
    expect(git(repo(), 'rev-parse', 'grove/m')).toBe(moved);
    expect(dockerExec(warm, ['cat', '/workspace/moved.txt']).out).toBe('moved\n');
    expect(dockerExec(warm, ['stat', '-c', '%u', '/workspace/moved.txt']).out.trim()).toBe('1000');
    expect(dockerExec(warm, ['sh', '-c', 'echo more >> /workspace/moved.txt']).code).toBe(0);
    expect(fs.existsSync(path.join(repo(), 'worktrees', 'm'))).toBe(true);
    // Moved, not dropped and added anew.
    expect(server().logs.some((l) => l.includes('does not fit this fork') && l.includes('grove/m'))).toBe(false);
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'status', '--porcelain']).out.trim()).toBe('M moved.txt');
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'rev-parse', 'HEAD']).out.trim()).toBe(moved);
    expect((await server().api('DELETE', '/api/workspaces/demo~m')).status).toBe(200);
    // The next warm sandbox is prepared at the new tip and serves the next fork with it.
    await readyWarm();
  });

  it('never gives one warm sandbox to two concurrent forks', async () => {
    const warm = await readyWarm();
    const [b, c] = await Promise.all([fork('demo', 'b'), fork('demo', 'c')]);
    expect([b.status, c.status]).toEqual([201, 201]);
    const ib = containerNamed(server().instance, 'demo~b');
    const ic = containerNamed(server().instance, 'demo~c');
    expect(ib).not.toBeNull();
    expect(ib).not.toBe(ic);
    expect([ib, ic].filter((id) => id === warm)).toHaveLength(1);
    for (const slug of ['demo~b', 'demo~c']) expect((await server().api<{ slug: string }>('GET', `/w/${slug}/health`)).body.slug).toBe(slug);
    // demo, a, b, c: the cap is reached, so no warm sandbox is made.
    expect(await capacity()).toMatchObject({ running: CAP, creating: 0, warm: 0 });
    expect(warmIds(server().instance)).toEqual([]);
    expect((await server().api('DELETE', '/api/workspaces/demo~c')).status).toBe(200);
    // A slot is free again: the pool takes it back.
    await readyWarm();
  });

  it('makes the warm sandbox give way to a fork that needs its slot', async () => {
    const warm = await readyWarm();
    expect(await capacity()).toMatchObject({ running: CAP - 1, warm: 1 });
    // A fork of another project cannot use demo's warm sandbox, and the cap is reached by running + warm.
    expect((await server().api('POST', '/api/projects', { name: 'app', source: src })).status).toBe(201);
    const r = await fork('app', 'x');
    expect(r.status).toBe(201);
    expect(r.body.workspace.state).toBe('running');
    expect(containerNamed(server().instance, 'app~x')).not.toBe(warm);
    expect(warmIds(server().instance)).toEqual([]);
    expect(await capacity()).toMatchObject({ running: CAP, warm: 0 });
    expect((await server().api('DELETE', '/api/workspaces/app~x')).status).toBe(200);
  });

  it('stops, reopens and tears down a claimed workspace like any other', async () => {
    const warm = await readyWarm();
    expect((await server().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~a/stop')).body.workspace.state).toBe('stopped');
    const reopened = await server().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~a/start');
    expect(reopened.status).toBe(200);
    expect(reopened.body.workspace.state).toBe('running');
    // Under disk quotas (this server's default) a reopen starts cold: the work is in the workspace's own disk image,
    // which a warm sandbox's mounts (dirs of its own image) cannot be moved onto (pool.ts's takeForReopen).
    expect((await events('demo~a')).filter((e) => e.type === 'sandbox.started').at(-1)?.data.warm).toBeUndefined();
    expect(warmIds(server().instance).map(fullId)).toEqual([warm]);
    expect((await server().api<{ slug: string }>('GET', '/w/demo~a/health')).body.slug).toBe('demo~a');
    const id = containerNamed(server().instance, 'demo~a') ?? '';
    expect(dockerExec(id, ['cat', '/workspace/hello.txt']).out).toBe('from-a');
    await agentWrites('demo~a', 'a', 'again.txt', 'after-reopen');

    expect((await server().api('DELETE', '/api/workspaces/demo~a')).status).toBe(200);
    expect(containerNamed(server().instance, 'demo~a')).toBeNull();
    expect(fs.existsSync(path.join(home, 'worktrees', 'demo', 'a'))).toBe(false);
  });

  it('recycles the warm sandbox a killed server left and makes a fresh one; claimed workspaces keep running', async () => {
    const old = await readyWarm();
    const b = containerNamed(server().instance, 'demo~b');
    await server().kill();
    // Left behind by the SIGKILL: a graceful stop would have removed it.
    expect(warmIds(server().instance).map(fullId)).toEqual([old]);
    await boot();
    const fresh = await readyWarm();
    expect(fresh).not.toBe(old);
    expect(execFileSync('docker', ['ps', '-aq', '--no-trunc'], { encoding: 'utf8' })).not.toContain(old);
    expect(fs.readdirSync(path.join(home, 'pool'))).toHaveLength(1);
    // The old one's prepared worktree is gone from the project's worktrees too (pruned at reconcile).
    expect(git(repo(), 'worktree', 'list', '--porcelain').split('\n').filter((l) => l.startsWith('worktree ') && l.includes(`${path.sep}pool${path.sep}`))).toHaveLength(1);
    // The workspace that claimed a warm sandbox before the restart is reconciled as running, in its own container.
    expect((await server().api<{ workspace: Workspace }>('GET', '/api/workspaces/demo~b')).body.workspace.state).toBe('running');
    expect(containerNamed(server().instance, 'demo~b')).toBe(b);
    expect((await server().api<{ slug: string }>('GET', '/w/demo~b/health')).body.slug).toBe('demo~b');
    // The fresh one serves the next fork of its project (after a restart: the first registered project's).
    const project = execFileSync('docker', ['inspect', '--format', '{{index .Config.Labels "grove.project"}}', fresh], { encoding: 'utf8' }).trim();
    const r = await fork(project, 'd');
    expect(r.status).toBe(201);
    expect(containerNamed(server().instance, `${project}~d`)).toBe(fresh);
  });
  it('starts cold on the same dirs when the claim fails, and removes the warm sandbox', async () => {
    const warm = await readyWarm();
    const project = execFileSync('docker', ['inspect', '--format', '{{index .Config.Labels "grove.project"}}', warm], { encoding: 'utf8' }).trim();
    // Dead behind the pool's back: the fork takes it, its claim fails, and the fork must still succeed.
    execFileSync('docker', ['kill', warm], { stdio: 'ignore' });
    const r = await fork(project, 'e');
    expect(r.status).toBe(201);
    expect(r.body.workspace.state).toBe('running');
    const slug = `${project}~e`;
    const id = containerNamed(server().instance, slug);
    expect(id).not.toBeNull();
    expect(id).not.toBe(warm);
    expect(execFileSync('docker', ['ps', '-aq', '--no-trunc'], { encoding: 'utf8' })).not.toContain(warm);
    const started = (await events(slug)).find((e) => e.type === 'sandbox.started');
    expect(started?.data.warm).toBeUndefined();
    expect((await server().api<{ slug: string }>('GET', `/w/${slug}/health`)).body.slug).toBe(slug);
    expect((await server().api('DELETE', `/api/workspaces/${slug}`)).status).toBe(200);
  });
});

describe('GROVE_WARM_POOL=0', () => {
  // Made when the block runs, so a filtered run (-t) leaves no empty home behind.
  let offHome = '';
  let off: RunningServer | undefined;
  beforeAll(async () => {
    offHome = makeHome('pool-off');
    off = await startServer({ home: offHome, env: { GROVE_WARM_POOL: '0', GROVE_MAX_RUNNING: String(CAP) } });
    await waitRunning(off, 'demo');
  });
  afterAll(async () => {
    await off?.stop().catch(() => undefined);
    if (offHome) cleanup(offHome);
  });

  it('keeps no warm sandbox: forks start their own and capacity shows none', async () => {
    if (!off) throw new Error('server not started');
    const r = await off.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name: 'x' });
    expect(r.status).toBe(201);
    const started = (await off.api<{ events: GroveEvent[] }>('GET', '/api/events?slug=demo~x')).body.events.find((e) => e.type === 'sandbox.started');
    expect(started?.data.warm).toBeUndefined();
    expect((await off.api('DELETE', '/api/workspaces/demo~x')).status).toBe(200);
    const cap = (await off.api<ListWorkspacesResponse>('GET', '/api/workspaces')).body.capacity;
    expect(cap.warm).toBeUndefined();
    expect(warmIds(off.instance)).toEqual([]);
    expect(fs.existsSync(path.join(offHome, 'pool'))).toBe(false);
  });
});

describe('reopening through the pool (no disk quotas)', () => {
  let rHome = '';
  let r: RunningServer | undefined;
  const on = (): RunningServer => {
    if (!r) throw new Error('server not started');
    return r;
  };
  beforeAll(async () => {
    rHome = makeHome('pool-reopen');
    r = await startServer({ home: rHome, env: { GROVE_WARM_POOL: '1', GROVE_MAX_RUNNING: String(CAP), GROVE_DISK_QUOTA: '0' } });
    await waitRunning(r, 'demo');
  });
  afterAll(async () => {
    await r?.stop().catch(() => undefined);
    if (rHome) cleanup(rHome);
  });

  it('reopens a stopped workspace in the ready warm sandbox, with its worktree, thread and agent state, and refills', async () => {
    await readyWarm(on());
    expect((await on().api('POST', '/api/workspaces', { project: 'demo', name: 'r' })).status).toBe(201);
    await agentWrites('demo~r', 'r', 'kept.txt', 'before-stop', on());
    const thread = async () => (await on().api<{ lines: Array<{ kind: string }> }>('GET', '/w/demo~r/thread')).body.lines;
    const before = await waitFor('the turn in the thread', async () => {
      const lines = await thread();
      return lines.some((l) => l.kind === 'turn_end') ? lines : null;
    });
    const state = path.join(rHome, 'state', 'demo~r');
    fs.writeFileSync(path.join(state, 'agent-note'), 'agent state\n');
    const branch = git(path.join(rHome, 'repos', 'demo'), 'rev-parse', 'grove/r');

    const warm = await readyWarm(on());
    expect((await on().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~r/stop')).body.workspace.state).toBe('stopped');
    const reopened = await on().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~r/start');
    expect(reopened.status).toBe(200);
    expect(reopened.body.workspace.state).toBe('running');
    const started = (await events('demo~r', on())).filter((e) => e.type === 'sandbox.started').at(-1);
    expect(started?.data).toMatchObject({ containerId: warm, warm: true });
    expect(containerNamed(on().instance, 'demo~r')).toBe(warm);
    expect((await on().api<{ slug: string }>('GET', '/w/demo~r/health')).body.slug).toBe('demo~r');
    // The work is there, inside the warm sandbox: the worktree's file, git on the workspace's branch, the agent's
    // state dir, and the thread as it was.
    expect(dockerExec(warm, ['cat', '/workspace/kept.txt']).out).toBe('before-stop');
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'rev-parse', '--abbrev-ref', 'HEAD']).out.trim()).toBe('grove/r');
    expect(dockerExec(warm, ['git', '-C', '/workspace', 'rev-parse', 'HEAD']).out.trim()).toBe(branch);
    expect(dockerExec(warm, ['cat', '/home/grove/.claude/agent-note']).out).toBe('agent state\n');
    expect(await thread()).toEqual(before);
    // Where the host keeps them, nothing is left in the pool's dir, and the agent goes on working.
    expect(fs.readFileSync(path.join(rHome, 'worktrees', 'demo', 'r', 'kept.txt'), 'utf8')).toBe('before-stop');
    await agentWrites('demo~r', 'r', 'after.txt', 'after-reopen', on());
    const next = await readyWarm(on());
    expect(next).not.toBe(warm);
    expect(fs.readdirSync(path.join(rHome, 'pool'))).toHaveLength(1);

    // A warm sandbox that dies behind the pool's back after the dirs moved into it: the reopen starts cold on them,
    // with the work where it was.
    const dead = next;
    expect((await on().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~r/stop')).body.workspace.state).toBe('stopped');
    execFileSync('docker', ['kill', dead], { stdio: 'ignore' });
    const again = await on().api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~r/start');
    expect(again.status).toBe(200);
    expect(again.body.workspace.state).toBe('running');
    const cold = containerNamed(on().instance, 'demo~r') ?? '';
    expect(cold).not.toBe(dead);
    // It was taken (the dirs moved into it) and its claim failed: not a reopen that never tried.
    expect(on().logs.some((l) => l.includes('"slug":"demo~r"') && l.includes('claiming the warm sandbox failed'))).toBe(true);
    expect((await events('demo~r', on())).filter((e) => e.type === 'sandbox.started').at(-1)?.data.warm).toBeUndefined();
    expect(dockerExec(cold, ['cat', '/workspace/after.txt']).out).toBe('after-reopen');
    expect(dockerExec(cold, ['cat', '/home/grove/.claude/agent-note']).out).toBe('agent state\n');
    expect((await thread()).length).toBeGreaterThan(before.length);
    expect(execFileSync('docker', ['ps', '-aq', '--no-trunc'], { encoding: 'utf8' })).not.toContain(dead);

    // And it tears down like any workspace.
    expect((await on().api('DELETE', '/api/workspaces/demo~r')).status).toBe(200);
    expect(fs.existsSync(path.join(rHome, 'worktrees', 'demo', 'r'))).toBe(false);
  });
});
