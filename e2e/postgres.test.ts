// Two real server processes on one PostgreSQL registry (DATABASE_URL, a throwaway cluster on a Unix socket), sharing
// the home and the Docker engine as docs/architecture.md (Registry) says they should: forks sent to both at once never
// exceed the cap between them, one name is created once, and refusals leave nothing behind. Real Docker and git.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startTestPostgres } from '@grove/db';
import type { TestPostgres } from '@grove/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ListWorkspacesResponse, Workspace } from '@grove/contracts';
import { cleanup, containersOf, makeHome, startServer } from './harness.ts';
import type { RunningServer } from './harness.ts';

const CAP = 3;
let cluster: TestPostgres | undefined;
const home = makeHome('pg');
const src = makeHome('pg-src');
const servers: RunningServer[] = [];

beforeAll(async () => {
  cluster = await startTestPostgres();
  const url = await cluster.createDatabase('e2e');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', ...args], { cwd: src, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  fs.writeFileSync(path.join(src, 'README.md'), '# app\n');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  // One after the other, before any workspace exists: a server's reconcile at start takes every live row for its own.
  for (let i = 0; i < 2; i++) servers.push(await startServer({ home, env: { DATABASE_URL: url, GROVE_MAX_RUNNING: String(CAP), GROVE_DEMO: 'false' } }));
  for (const s of servers) expect(s.logs.some((l) => l.includes('"registry":"postgres"'))).toBe(true);
  expect((await server(0).api('POST', '/api/projects', { name: 'app', source: src })).status).toBe(201);
  // The other server sees the project at once (the same registry) and refuses it as a duplicate.
  expect((await server(1).api('POST', '/api/projects', { name: 'app', source: src })).status).toBe(409);
});

afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => undefined);
  cleanup(home);
  fs.rmSync(src, { recursive: true, force: true });
  await cluster?.stop();
});

const fork = (s: RunningServer, name: string) => s.api<{ workspace?: Workspace; code?: string }>('POST', '/api/workspaces', { project: 'app', name });
const server = (i: number): RunningServer => {
  const s = servers[i % servers.length];
  if (!s) throw new Error('server not started');
  return s;
};

describe('two servers on one PostgreSQL registry', () => {
  it('never run more than the cap between them; the refused forks leave nothing behind', async () => {
    const names = Array.from({ length: 10 }, (_, i) => `burst-${i}`);
    const results = await Promise.all(names.map((name, i) => fork(server(i), name)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(CAP);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused.map((r) => [r.status, r.body.code])).toEqual(Array(10 - CAP).fill([429, 'capacity_reached']));

    // Both see the same registry.
    for (const s of servers) {
      const list = await s.api<ListWorkspacesResponse>('GET', '/api/workspaces');
      expect(list.body.capacity).toEqual({ running: CAP, creating: 0, cap: CAP, queued: 0 });
      expect(list.body.workspaces.filter((w) => w.state === 'running')).toHaveLength(CAP);
    }
    const names201 = results.flatMap((r) => (r.status === 201 && r.body.workspace ? [r.body.workspace.name] : []));
    expect(containersOf(servers[0]?.instance ?? '').length).toBe(CAP);
    expect(fs.readdirSync(path.join(home, 'worktrees', 'app')).sort()).toEqual(names201.sort());

    // Each torn down by the server that forked it (its egress gate and host sockets live in that process).
    for (const [i, r] of results.entries()) {
      if (r.status === 201) expect((await server(i).api('DELETE', `/api/workspaces/${r.body.workspace?.slug ?? ''}`)).status).toBe(200);
    }
    expect((await server(1).api<ListWorkspacesResponse>('GET', '/api/workspaces')).body.capacity).toMatchObject({ running: 0, creating: 0 });
  });

  it('create one name once when both are asked for it at the same time', async () => {
    const [a, b] = await Promise.all([fork(server(0), 'same'), fork(server(1), 'same')]);
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    expect([a, b].find((r) => r.status === 409)?.body.code).toBe('workspace_exists');
    expect(containersOf(servers[0]?.instance ?? '')).toHaveLength(1);
    expect((await (a.status === 201 ? server(0) : server(1)).api('DELETE', '/api/workspaces/app~same')).status).toBe(200);
    expect(containersOf(servers[0]?.instance ?? '')).toHaveLength(0);
  });
});
