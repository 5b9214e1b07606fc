// The concurrency cap is enforced atomically and never leaks: refused forks leave nothing behind.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ListWorkspacesResponse, Workspace } from '@grove/contracts';
import { containersOf, useServer } from './harness.ts';

const fx = useServer('cap', { GROVE_MAX_RUNNING: '3' });

const worktrees = () => {
  const dir = path.join(fx.home, 'worktrees', 'demo');
  return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [];
};

describe('concurrency cap', () => {
  it('refuses the fork past the cap with 429 and creates nothing', async () => {
    // The default workspace holds one of the three slots.
    for (const name of ['one', 'two']) {
      expect((await fx.s.api('POST', '/api/workspaces', { project: 'demo', name })).status).toBe(201);
    }
    const list = await fx.s.api<ListWorkspacesResponse>('GET', '/api/workspaces');
    expect(list.body.capacity).toEqual({ running: 3, creating: 0, cap: 3, queued: 0 });

    const refused = await fx.s.api<{ code: string; running: number; cap: number; message: string }>('POST', '/api/workspaces', { project: 'demo', name: 'three' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'capacity_reached', running: 3, cap: 3 });
    expect(refused.body.message.length).toBeGreaterThan(10);
    expect((await fx.s.api('GET', '/api/workspaces/demo~three')).status).toBe(404);
    expect(worktrees()).not.toContain('three');
    expect(containersOf(fx.s.instance).length).toBe(3);

    // Stopping frees a slot; a stopped workspace cannot start again while the cap is full.
    expect((await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces/demo~two/stop')).body.workspace.state).toBe('stopped');
    expect((await fx.s.api('POST', '/api/workspaces', { project: 'demo', name: 'three' })).status).toBe(201);
    const restart = await fx.s.api<{ code: string }>('POST', '/api/workspaces/demo~two/start');
    expect(restart.status).toBe(429);
    expect(restart.body.code).toBe('capacity_reached');

    for (const slug of ['demo~one', 'demo~two', 'demo~three']) expect((await fx.s.api('DELETE', `/api/workspaces/${slug}`)).status).toBe(200);
    expect((await fx.s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
  });

  it('lets exactly cap of 10 concurrent forks run; the other 7 get 429 and leak nothing', async () => {
    const names = Array.from({ length: 10 }, (_, i) => `burst-${i}`);
    const results = await Promise.all(names.map((name) => fx.s.api<{ workspace?: Workspace; code?: string }>('POST', '/api/workspaces', { project: 'demo', name })));
    const ok = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 429);
    expect(ok.length).toBe(3);
    expect(refused.length).toBe(7);
    for (const r of refused) expect(r.body.code).toBe('capacity_reached');

    const list = await fx.s.api<ListWorkspacesResponse>('GET', '/api/workspaces');
    expect(list.body.capacity).toEqual({ running: 3, creating: 0, cap: 3, queued: 0 });
    const live = list.body.workspaces.filter((w) => w.name.startsWith('burst-'));
    expect(live.length).toBe(3);
    expect(live.every((w) => w.state === 'running')).toBe(true);
    expect(worktrees().filter((n) => n.startsWith('burst-')).sort()).toEqual(live.map((w) => w.name).sort());
    expect(containersOf(fx.s.instance, false).length).toBe(3);
  });
});
