// Benchmark: GET /api/workspaces latency and server start-up (with reconciliation) at 10, 100 and 1000 registered workspaces.
// Rows (state stopped) are inserted straight into a temp GROVE_HOME's grove.db with @grove/db before the real
// server starts, because forking 1000 real workspaces would take too long. Reconciliation with 20 running
// containers is measured by bench/density.ts, which has them.
// Run: npm run bench:registry -w @grove/bench   (env BENCH_SECONDS, BENCH_SIZES=10,100,1000)
import path from 'node:path';
import autocannon from 'autocannon';
import { openSqlite, projects, workspaces } from '@grove/db';
import type { NewWorkspaceRow } from '@grove/db';
import { TOKEN, cleanup, startServer } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { fmt, machineNote, mkTemp, onCleanup, reconcileLog, table } from './lib.ts';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const SIZES = (process.env.BENCH_SIZES ?? '10,100,1000').split(',').map(Number);
/** Gone rows stay as history after every teardown; one extra cell lists 10 live workspaces over this many gone ones. */
const GONE = Number(process.env.BENCH_GONE ?? 1000);

function seed(home: string, n: number, gone = 0): void {
  const { db, close } = openSqlite({ file: path.join(home, 'grove.db') });
  try {
    const at = new Date().toISOString();
    // The project's repository does not exist: reconciliation then skips its worktrees, which is what we want
    // (this measures the registry, not git).
    db.insert(projects).values({ name: 'bench', source: '/nonexistent', defaultBranch: 'main', createdAt: at }).run();
    const rows: NewWorkspaceRow[] = Array.from({ length: n + gone }, (_, i) => ({
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
    for (let i = 0; i < rows.length; i += 200) db.insert(workspaces).values(rows.slice(i, i + 200)).run();
  } finally {
    void close();
  }
}

async function load(s: RunningServer, connections: number): Promise<{ rps: number; p50: number; p99: number; errors: number }> {
  const r = await autocannon({ url: `${s.base}/api/workspaces`, connections, duration: seconds, headers: { authorization: `Bearer ${TOKEN}` } });
  return { rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

async function main(): Promise<void> {
  console.log(`registry at scale: GET /api/workspaces, ${seconds} s per cell, autocannon; ${machineNote()}`);
  const rows: Array<Array<string | number>> = [];
  const p99At = new Map<number, number>();
  const cells = [...SIZES.map((n) => ({ n, gone: 0 })), ...(GONE ? [{ n: 10, gone: GONE }] : [])];
  for (const { n, gone } of cells) {
    const home = mkTemp(`registry-${n}`);
    let server: RunningServer | undefined;
    const done = onCleanup(async () => {
      await server?.stop().catch(() => undefined);
      cleanup(home);
    });
    try {
      seed(home, n, gone);
      const t0 = performance.now();
      server = await startServer({ home, env: { GROVE_DEMO: 'false', LOG_LEVEL: 'info' } });
      const startMs = performance.now() - t0;
      const rec = reconcileLog(server);
      const res = await server.api<{ workspaces: unknown[] }>('GET', '/api/workspaces');
      if (res.body.workspaces.length !== n) throw new Error(`expected ${n} workspaces, got ${res.body.workspaces.length}`);
      const bytes = Buffer.byteLength(JSON.stringify(res.body));
      const one = await load(server, 1);
      const ten = await load(server, 10);
      if (!gone) p99At.set(n, one.p99);
      rows.push([gone ? `${n} (+${gone} gone)` : n, fmt(bytes / 1024, 1), one.rps, one.p50, one.p99, ten.rps, ten.p50, ten.p99, one.errors + ten.errors, fmt(startMs), rec ? rec.ms : '-']);
    } finally {
      await done();
    }
  }
  console.log('');
  table(['workspaces', 'body KiB', '1 conn req/s', 'p50 ms', 'p99 ms', '10 conn req/s', 'p50 ms', 'p99 ms', 'errors', 'start-up ms', 'reconcile ms'], rows);
  console.log(`\nsummary: GET /api/workspaces p99 at 1 connection: ${SIZES.map((n) => `${n} → ${p99At.get(n) ?? '-'} ms`).join(', ')}`);
  console.log(`after: ${machineNote()}`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
