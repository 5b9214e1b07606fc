// SIGKILL during a fork, then restart: the half-done fork is cleaned up; nothing orphaned or duplicated.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GroveEvent, ListWorkspacesResponse, Workspace } from '@grove/contracts';
import { containerOf, git, useServer, waitFor, workspaceContainersOf } from './harness.ts';

const fx = useServer('crash');
const { home } = fx;

describe('crash during a fork', () => {
  it.each(['workspace.reserved', 'workspace.prepared', 'sandbox.started'])('SIGKILL after %s, then restart: finished or cleaned up', async (point) => {
    const name = `crash-${point.split('.')[1]}`;
    const slug = `demo~${name}`;
    const r = await fx.s.api('POST', '/api/workspaces?wait=false', { project: 'demo', name });
    expect(r.status).toBe(202);
    await waitFor(`event ${point}`, async () => {
      const ev = await fx.s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${slug}`);
      return ev.body.events.some((e) => e.type === point);
    }, 30_000);
    await fx.s.kill();

    await fx.restart();
    const after = await fx.s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${slug}`);
    const worktree = path.join(home, 'worktrees', 'demo', name);
    if (after.status === 200 && after.body.workspace.state === 'running') {
      expect(containerOf(fx.s.instance, slug)).toBeDefined();
      expect(fs.existsSync(worktree)).toBe(true);
    } else {
      if (after.status === 200) expect(after.body.workspace.state).toBe('failed');
      expect(containerOf(fx.s.instance, slug)).toBeUndefined();
      expect(fs.existsSync(worktree)).toBe(false);
      expect(git(path.join(home, 'repos', 'demo'), 'worktree', 'list')).not.toContain(name);
    }
    const all = await fx.s.api<ListWorkspacesResponse>('GET', '/api/workspaces?all=1');
    const live = all.body.workspaces.filter((w) => w.slug === slug && ['creating', 'running', 'stopped', 'tearing-down'].includes(w.state));
    expect(live.length).toBeLessThanOrEqual(1);
    expect(all.body.capacity.creating).toBe(0);
    // Every container of this Grove belongs to a live workspace (or is a warm sandbox, with GROVE_WARM_POOL on).
    const liveSlugs = all.body.workspaces.filter((w) => w.state === 'running' || w.state === 'stopped').map((w) => w.slug);
    expect(workspaceContainersOf(fx.s.instance).length).toBe(liveSlugs.filter((sl) => containerOf(fx.s.instance, sl)).length);
    // The name can be used (again) afterwards.
    if (live.length === 0) expect((await fx.s.api('POST', '/api/workspaces', { project: 'demo', name })).status).toBe(201);
    await fx.s.api('DELETE', `/api/workspaces/${slug}`);
  });
});
