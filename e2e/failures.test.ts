// A fork that fails midway rolls back every step and leaves a spawn_failed event.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GroveEvent, Workspace } from '@grove/contracts';
import { cleanup, containerOf, git, makeHome, startServer, waitRunning, type RunningServer } from './harness.ts';

const servers: RunningServer[] = [];
const homes: string[] = [];
const SLEEPY = 'grove-e2e-sleepy:latest';

afterAll(async () => {
  for (const s of servers) await s.stop();
  for (const h of homes) cleanup(h);
  execFileSync('docker', ['rmi', '-f', SLEEPY], { stdio: 'ignore' });
});

async function serverWith(env: Record<string, string>) {
  const home = makeHome('fail');
  homes.push(home);
  const s = await startServer({ home, env });
  servers.push(s);
  return s;
}

async function expectNothingLeft(s: RunningServer, name: string) {
  const slug = `demo~${name}`;
  const r = await s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${slug}`);
  if (r.status === 200) expect(r.body.workspace.state).toBe('failed');
  else expect(r.status).toBe(404);
  expect(containerOf(s.instance, slug)).toBeUndefined();
  expect(fs.existsSync(path.join(s.home, 'worktrees', 'demo', name))).toBe(false);
  expect(git(path.join(s.home, 'repos', 'demo'), 'worktree', 'list')).not.toContain(name);
  const ev = await s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${slug}`);
  const failed = ev.body.events.find((e) => e.type === 'spawn_failed');
  expect(failed).toBeDefined();
  return failed as GroveEvent;
}

describe('fork failures roll back', () => {
  it('a bad base ref', async () => {
    const s = await serverWith({});
    await waitRunning(s, 'demo');
    const r = await s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name: 'badbase', from: 'no-such-branch' });
    expect(r.status).toBe(500);
    expect(r.body.code).toBe('spawn_failed');
    expect(r.body.message).toMatch(/no-such-branch/);
    await expectNothingLeft(s, 'badbase');
    // The name is free again and the cap slot was released.
    expect((await s.api('POST', '/api/workspaces', { project: 'demo', name: 'badbase' })).status).toBe(201);
  });

  it('a missing image', async () => {
    const s = await serverWith({ GROVE_IMAGE: 'grove-e2e-missing:nope' });
    const r = await s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name: 'noimage' });
    expect(r.status).toBe(500);
    expect(r.body.code).toBe('spawn_failed');
    expect(r.body.message).toMatch(/grove-e2e-missing/);
    await expectNothingLeft(s, 'noimage');
  });

  it('a sandbox that never becomes healthy', async () => {
    const ctx = makeHome('ctx');
    homes.push(ctx);
    fs.writeFileSync(path.join(ctx, 'Dockerfile'), 'FROM grove-sandbox:latest\nENTRYPOINT ["sleep", "3600"]\n');
    execFileSync('docker', ['build', '-q', '-t', SLEEPY, ctx], { env: { ...process.env, DOCKER_BUILDKIT: '0' }, stdio: 'ignore' });
    const s = await serverWith({ GROVE_IMAGE: SLEEPY, GROVE_HEALTH_TIMEOUT_MS: '2500' });
    const r = await s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name: 'sleepy' });
    expect(r.status).toBe(500);
    expect(r.body.code).toBe('spawn_failed');
    expect(r.body.message).toMatch(/health/i);
    await expectNothingLeft(s, 'sleepy');
  });
});

describe('Docker unavailable', () => {
  it('the server still starts; forks get 503 docker_unavailable and reserve nothing', async () => {
    const s = await serverWith({ GROVE_DOCKER_SOCKET: '/nonexistent/docker.sock' });
    expect((await fetch(`${s.base}/api/health`)).status).toBe(200);
    const r = await s.api<{ code: string; message: string }>('POST', '/api/workspaces', { project: 'demo', name: 'nodocker' });
    expect(r.status).toBe(503);
    expect(r.body.code).toBe('docker_unavailable');
    expect(r.body.message).toMatch(/Docker/);
    const list = await s.api<{ capacity: { running: number; creating: number } }>('GET', '/api/workspaces');
    expect(list.body.capacity).toMatchObject({ running: 0, creating: 0 });
    expect(fs.existsSync(path.join(s.home, 'worktrees', 'demo', 'nodocker'))).toBe(false);
  });
});
