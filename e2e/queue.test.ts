// The line for a sandbox slot against the real server, real Docker and the real CLI: queued forks start in
// order as slots free (stop, teardown, idle auto-stop), a cancelled one never starts, and a restart keeps
// the line and its order.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { eventsResponseSchema, forkQueuedResponseSchema, listWorkspacesResponseSchema, workspaceResponseSchema } from '@grove/contracts';
import type { RunningServer } from './harness.ts';
import { TOKEN, cleanup, containerOf, makeHome, startServer, waitFor, waitRunning } from './harness.ts';

const exec = promisify(execFile);
const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../apps/cli/bin/grove.mjs');
const homes: string[] = [];
const servers: RunningServer[] = [];

afterAll(async () => {
  for (const s of servers) await s.stop();
  for (const h of homes) cleanup(h);
});

async function serve(home: string, env: Record<string, string>): Promise<RunningServer> {
  const s = await startServer({ home, env });
  servers.push(s);
  return s;
}

async function line(s: RunningServer): Promise<Array<[string, number | null]>> {
  const r = await s.api('GET', '/api/workspaces');
  const list = listWorkspacesResponseSchema.parse(r.body);
  return list.workspaces.filter((w) => w.state === 'queued').map((w) => [w.name, w.queuePosition]);
}

async function types(s: RunningServer, slug: string): Promise<string[]> {
  const r = await s.api('GET', `/api/events?slug=${encodeURIComponent(slug)}&limit=1000`);
  return eventsResponseSchema.parse(r.body).events.map((e) => e.type);
}

describe('queue', () => {
  it('cap 1: queued forks start one after another in order; a cancelled one never starts; a restart keeps the line', async () => {
    const home = makeHome('queue');
    homes.push(home);
    const env = { GROVE_MAX_RUNNING: '1', GROVE_IDLE_STOP: 'off' };
    let s = await serve(home, env);
    await waitRunning(s, 'demo'); // the default workspace holds the one slot

    // Without queue the API still refuses.
    const refused = await s.api<{ code: string; cap: number }>('POST', '/api/workspaces', { project: 'demo', name: 'q0' });
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'capacity_reached', cap: 1 });

    for (const [i, name] of ['q1', 'q2', 'q3'].entries()) {
      const r = await s.api('POST', '/api/workspaces', { project: 'demo', name, queue: true });
      expect(r.status).toBe(202);
      const body = forkQueuedResponseSchema.parse(r.body);
      expect(body).toMatchObject({ position: i + 1, workspace: { slug: `demo~${name}`, state: 'queued', queuePosition: i + 1 } });
    }
    // A queued workspace holds its name.
    expect((await s.api<{ code: string }>('POST', '/api/workspaces', { project: 'demo', name: 'q2', queue: true })).body.code).toBe('workspace_exists');
    const { stdout } = await exec(process.execPath, [bin, 'ls'], { env: { ...process.env, GROVE_URL: s.base, GROVE_TOKEN: TOKEN } });
    expect(stdout).toMatch(/demo~q3\s+queued \(#3\)/);
    expect(stdout).toContain('1 / 1 sandboxes running, 3 waiting in line');

    // Cancel q2: it leaves the line, the others keep their order.
    const cancelled = await s.api('DELETE', '/api/workspaces/demo~q2');
    expect(cancelled.status).toBe(200);
    expect(workspaceResponseSchema.parse(cancelled.body).workspace.state).toBe('gone');
    expect(await line(s)).toEqual([
      ['q1', 1],
      ['q3', 2],
    ]);

    // The line survives a restart, in order.
    await s.stop();
    s = await serve(home, env);
    await waitRunning(s, 'demo');
    expect(await line(s)).toEqual([
      ['q1', 1],
      ['q3', 2],
    ]);

    // Slots free: first q1, then q3.
    expect((await s.api('POST', '/api/workspaces/demo/stop')).status).toBe(200);
    await waitRunning(s, 'demo~q1');
    expect(await line(s)).toEqual([['q3', 1]]);
    expect((await s.api('DELETE', '/api/workspaces/demo~q1')).status).toBe(200);
    await waitRunning(s, 'demo~q3');
    expect(await line(s)).toEqual([]);
    const list = listWorkspacesResponseSchema.parse((await s.api('GET', '/api/workspaces')).body);
    expect(list.capacity).toEqual({ running: 1, creating: 0, cap: 1, queued: 0 });

    // q2 never started: no container, nothing after its cancellation.
    expect(await types(s, 'demo~q2')).toEqual(['workspace.queued', 'workspace.cleaned']);
    expect(containerOf(s.instance, 'demo~q2')).toBeUndefined();
    expect((await types(s, 'demo~q1')).slice(0, 3)).toEqual(['workspace.queued', 'workspace.promoted', 'workspace.reserved']);
  });

  it('idle auto-stop: an idle workspace stops itself (reason idle) and its slot goes to the first in line', async () => {
    const home = makeHome('idle');
    homes.push(home);
    const s = await serve(home, { GROVE_MAX_RUNNING: '1', GROVE_IDLE_STOP: '3s' });
    await waitRunning(s, 'demo');
    const r = await s.api('POST', '/api/workspaces', { project: 'demo', name: 'next', queue: true });
    expect(r.status).toBe(202);
    await waitFor('demo stopped as idle', async () => {
      const r = await s.api('GET', '/api/events?slug=demo&limit=1000');
      return eventsResponseSchema.parse(r.body).events.find((e) => e.type === 'workspace.stopped' && e.data.reason === 'idle');
    });
    await waitFor('demo~next started', async () => (await types(s, 'demo~next')).includes('workspace.registered'), 90_000);
  });
});
