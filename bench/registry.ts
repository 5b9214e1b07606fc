// Benchmark: GET /api/workspaces latency and server start-up (with reconciliation) at 10, 100 and 1000 registered workspaces,
// with the registry in SQLite (the default) and in PostgreSQL (DATABASE_URL; a throwaway local cluster on a Unix
// socket, fsync off, so this compares the registry code paths, not a networked database).
// Rows (state stopped) are inserted straight into the registry with @grove/db before the real server starts, because
// forking 1000 real workspaces would take too long. Reconciliation with 20 running containers is measured by
// bench/density.ts, which has them.
// Run: npm run bench:registry -w @grove/bench   (env BENCH_SECONDS, BENCH_SIZES=10,100,1000, BENCH_REGISTRIES=sqlite,postgres)
import path from 'node:path';
import autocannon from 'autocannon';
import { openPostgres, openSqlite, pgTables, projects, startTestPostgres, workspaces } from '@grove/db';
import type { NewWorkspaceRow, TestPostgres } from '@grove/db';
import { TOKEN, cleanup, startServer } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { fmt, machineNote, mkTemp, onCleanup, reconcileLog, table } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const SIZES = (process.env.BENCH_SIZES ?? '10,100,1000').split(',').map(Number);
/** Gone rows stay as history after every teardown; one extra cell lists 10 live workspaces over this many gone ones. */
const GONE = Number(process.env.BENCH_GONE ?? 1000);
const REGISTRIES = (process.env.BENCH_REGISTRIES ?? 'sqlite,postgres').split(',').filter((r): r is 'sqlite' | 'postgres' => r === 'sqlite' || r === 'postgres');

function benchRows(home: string, n: number, gone: number): NewWorkspaceRow[] {
  const at = new Date().toISOString();
  return Array.from({ length: n + gone }, (_, i) => ({
      slug: `bench~w${i}`,
      project: 'bench',
      name: `w${i}`,
      isDefault: false,
      branch: `grove/w${i}`,
      baseRef: 'main',
      state: i < gone ? 'gone' : 'stopped',
      worktreePath: path.join(home, 'worktrees/bench', `w${i}`),
      createdAt: at,
      updatedAt: at,
      lastActivityAt: at,
  }));
}

// The project's repository does not exist: reconciliation then skips its worktrees, which is what we want
// (this measures the registry, not git).
const PROJECT = { name: 'bench', source: '/nonexistent', defaultBranch: 'main', createdAt: new Date().toISOString() };

function seedSqlite(home: string, n: number, gone: number): void {
  const { db, close } = openSqlite({ file: path.join(home, 'grove.db') });
  try {
    db.insert(projects).values(PROJECT).run();
    const rows = benchRows(home, n, gone);
    for (let i = 0; i < rows.length; i += 200) db.insert(workspaces).values(rows.slice(i, i + 200)).run();
  } finally {
    void close();
  }
}

async function seedPostgres(url: string, home: string, n: number, gone: number): Promise<void> {
  const { db, close } = await openPostgres({ url });
  try {
    await db.insert(pgTables.projects).values(PROJECT);
    const rows = benchRows(home, n, gone);
    for (let i = 0; i < rows.length; i += 200) await db.insert(pgTables.workspaces).values(rows.slice(i, i + 200));
  } finally {
    await close();
  }
}

async function load(s: RunningServer, connections: number): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const r = await autocannon({ url: `${s.base}/api/workspaces`, connections, duration: seconds, headers: { authorization: `Bearer ${TOKEN}` } });
  return { rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

async function main(): Promise<void> {
  console.log(`registry at scale: GET /api/workspaces, ${seconds} s per cell, autocannon; ${machineNote()}`);
  const rows: Array<Array<string | number>> = [];
  const p99At = new Map<string, number>();
  const sizes = [...SIZES.map((n) => ({ n, gone: 0 })), ...(GONE ? [{ n: 10, gone: GONE }] : [])];
  const cells = REGISTRIES.flatMap((registry) => sizes.map((c) => ({ ...c, registry })));
  let cluster: TestPostgres | undefined;
  const stopCluster = onCleanup(async () => {
    await cluster?.stop();
  });
  if (REGISTRIES.includes('postgres')) cluster = await startTestPostgres();
  try {
    for (const { n, gone, registry } of cells) {
      const home = mkTemp(`registry-${registry}-${n}`);
      let server: RunningServer | undefined;
      const done = onCleanup(async () => {
        await server?.stop().catch(() => undefined);
        cleanup(home);
      });
      try {
        const env: Record<string, string> = { GROVE_DEMO: 'false', LOG_LEVEL: 'info' };
        if (registry === 'postgres' && cluster) {
          env.DATABASE_URL = await cluster.createDatabase('bench');
          // Migrated by a first open, as a server would at its start, then seeded.
          await seedPostgres(env.DATABASE_URL, home, n, gone);
        } else {
          seedSqlite(home, n, gone);
        }
        const t0 = performance.now();
        server = await startServer({ home, env });
        const startMs = performance.now() - t0;
        const rec = reconcileLog(server);
        const res = await server.api<{ workspaces: unknown[] }>('GET', '/api/workspaces');
        if (res.body.workspaces.length !== n) throw new Error(`expected ${n} workspaces, got ${res.body.workspaces.length}`);
        const bytes = Buffer.byteLength(JSON.stringify(res.body));
        const one = await load(server, 1);
        const ten = await load(server, 10);
        if (!gone) p99At.set(`${registry} ${n}`, one.p99);
        rows.push([registry, gone ? `${n} (+${gone} gone)` : n, fmt(bytes / 1024, 1), one.rps, one.p50, one.p99, ten.rps, ten.p50, ten.p99, one.errors + ten.errors, fmt(startMs), rec ? rec.ms : '-']);
      } finally {
        await done();
      }
    }
  } finally {
    // Also when a cell fails: the cluster never outlives the benchmark.
    await stopCluster();
  }
  console.log('');
  table(['registry', 'workspaces', 'body KiB', '1 conn req/s', 'p50 ms', 'p99 ms', '10 conn req/s', 'p50 ms', 'p99 ms', 'errors', 'start-up ms', 'reconcile ms'], rows);
  for (const registry of REGISTRIES) {
    console.log(`\nsummary (${registry}): GET /api/workspaces p99 at 1 connection: ${SIZES.map((n) => `${n} → ${p99At.get(`${registry} ${n}`) ?? '-'} ms`).join(', ')}`);
  }
  console.log(`after: ${machineNote()}`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
