// Benchmark: density - memory per running workspace (container cgroup + server RSS), idle and in a turn, N workspaces on the real server; then start-up reconciliation with them running.
// Each on every runtime of BENCH_RUNTIMES (default runc, and runsc when the engine has it), then side by side.
// Run: npm run bench:density -w @grove/bench   (env BENCH_DENSITY=20, BENCH_RUNTIMES; stops early when less than 3 GiB is available)
import fs from 'node:fs';
import os from 'node:os';
import type { SandboxRuntime } from '@grove/contracts';
import { TOKEN, cleanup, startServer, waitRunning } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { SANDBOX_MEMORY_BYTES, defaultMaxRunning } from '../apps/server/src/env.ts';
import { MiB, benchRuntimes, docker, fmt, machineNote, mkTemp, onCleanup, pct, reconcileLog, rssOf, sleep, table, until } from './lib.ts';

const N = Number(process.env.BENCH_DENSITY ?? 20);
const MIN_AVAILABLE = 3 * 2 ** 30;

interface Mem {
  /** What the kernel charges the cgroup (anon + page cache + tmpfs + kernel). */
  usage: number;
  /** Anonymous memory (the processes' heaps and stacks). */
  anon: number;
  /** What `docker stats` shows: usage minus inactive file pages. */
  stats: number;
}

function readStat(file: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const [k, v] = line.split(' ');
    if (k && v) m.set(k, Number(v));
  }
  return m;
}

/** Container memory from its cgroup (v1 cgroupfs layout here; v2 handled for other machines). */
function containerMem(id: string): Mem {
  const v1 = `/sys/fs/cgroup/memory/docker/${id}`;
  if (fs.existsSync(v1)) {
    const usage = Number(fs.readFileSync(`${v1}/memory.usage_in_bytes`, 'utf8'));
    const st = readStat(`${v1}/memory.stat`);
    return { usage, anon: st.get('total_rss') ?? 0, stats: usage - (st.get('total_inactive_file') ?? 0) };
  }
  for (const v2 of [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`]) {
    if (!fs.existsSync(v2)) continue;
    const usage = Number(fs.readFileSync(`${v2}/memory.current`, 'utf8'));
    const st = readStat(`${v2}/memory.stat`);
    return { usage, anon: st.get('anon') ?? 0, stats: usage - (st.get('inactive_file') ?? 0) };
  }
  throw new Error(`no memory cgroup found for container ${id}`);
}

function memAvailable(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
  return m?.[1] ? Number(m[1]) * 1024 : os.freemem();
}

async function ids(instance: string): Promise<string[]> {
  return (await docker('ps', '-q', '--no-trunc', '--filter', `label=grove.instance=${instance}`)).split('\n').filter(Boolean);
}

interface Sample { n: number; perContainer: Mem[]; serverRss: number; cpuPct: number[] }

async function sample(s: RunningServer, withCpu = false): Promise<Sample> {
  const list = await ids(s.instance);
  let cpuPct: number[] = [];
  if (withCpu) {
    const out = await docker('stats', '--no-stream', '--format', '{{.CPUPerc}}', ...list);
    cpuPct = out.split('\n').filter(Boolean).map((l) => Number.parseFloat(l));
  }
  return { n: list.length, perContainer: list.map(containerMem), serverRss: rssOf(s.child.pid), cpuPct };
}

const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / Math.max(1, v.length);

interface Summary { runtime: SandboxRuntime; n: number; idlePer: number; busyPer: number; byIdle: number; cap: number; reconcileMs: number | null }

async function benchRuntime(runtime: SandboxRuntime): Promise<Summary> {
  console.log(`\n=== runtime ${runtime}\ndensity: up to ${N} running workspaces on the real server; ${machineNote()}`);
  const home = mkTemp(`density-${runtime}`);
  let server: RunningServer | undefined;
  const env = { GROVE_MAX_RUNNING: String(N), GROVE_DEMO: 'true', LOG_LEVEL: 'info', GROVE_RUNTIME: runtime };
  const done = onCleanup(async () => {
    await server?.stop().catch(() => undefined);
    cleanup(home);
  });
  try {
    server = await startServer({ home, env });
    await waitRunning(server, 'demo');
    await sleep(2_000);
    const one = await sample(server);
    const slugs = ['demo'];
    let stoppedEarly = '';
    for (let i = 1; i < N; i++) {
      if (memAvailable() < MIN_AVAILABLE) {
        stoppedEarly = ` (stopped at ${slugs.length}: less than ${MIN_AVAILABLE / 2 ** 30} GiB available)`;
        break;
      }
      const r = await server.api('POST', '/api/workspaces', { project: 'demo', name: `d${i}` });
      if (r.status !== 201) throw new Error(`fork d${i}: ${r.status} ${JSON.stringify(r.body)}`);
      slugs.push(`demo~d${i}`);
    }
    // Let start-up garbage settle so "idle" is idle.
    await sleep(5_000);
    const idle = await sample(server, true);

    // A turn in every workspace at once: the scripted agent sleeps 3 s while streaming a few chunks.
    const t0 = Date.now();
    const posts = await Promise.all(
      slugs.map((slug) =>
        fetch(`${server!.base}/w/${slug}/messages`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'sleep 3000' }) }).then((r) => r.status),
      ),
    );
    if (posts.some((st) => st !== 202)) throw new Error(`messages answered ${posts.join(',')}`);
    await sleep(1_500 - (Date.now() - t0));
    const busy = await sample(server, true);
    await until(
      'turns finished',
      async () => {
        const st = await Promise.all(slugs.map((slug) => fetch(`${server!.base}/w/${slug}/status`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<{ busy: boolean }>)));
        return st.every((x) => !x.busy);
      },
      250,
      30_000,
    );

    // Start-up reconciliation with every container running: stop the server (sandboxes keep running) and start it again.
    await server.stop();
    const r0 = performance.now();
    server = await startServer({ home, env });
    const restartMs = performance.now() - r0;
    const rec = reconcileLog(server);
    const list = await server.api<{ workspaces: Array<{ state: string }> }>('GET', '/api/workspaces');
    const stillRunning = list.body.workspaces.filter((w) => w.state === 'running').length;

    // Tear everything down through the API (the cleanup removes whatever is left).
    const td0 = performance.now();
    for (const slug of slugs) await server.api('DELETE', `/api/workspaces/${slug}`);
    const teardownAll = performance.now() - td0;

    const n = idle.n;
    const row = (label: string, s: Sample, pick: (m: Mem) => number) => {
      const v = s.perContainer.map(pick);
      return [label, s.n, fmt(mean(v) / MiB, 1), fmt(pct(v, 50) / MiB, 1), fmt(Math.max(...v) / MiB, 1), fmt(v.reduce((a, b) => a + b, 0) / MiB), fmt(s.serverRss / MiB)];
    };
    console.log('\nmemory per container, MiB (cgroup); server RSS, MiB\n');
    table(['state, measure', 'running', 'mean', 'p50', 'max', 'sum', 'server RSS'], [
      row('1 idle, docker stats', one, (m) => m.stats),
      row(`${n} idle, docker stats`, idle, (m) => m.stats),
      row(`${n} idle, cgroup usage`, idle, (m) => m.usage),
      row(`${n} idle, anon`, idle, (m) => m.anon),
      row(`${n} in a turn, docker stats`, busy, (m) => m.stats),
      row(`${n} in a turn, cgroup usage`, busy, (m) => m.usage),
      row(`${n} in a turn, anon`, busy, (m) => m.anon),
    ]);
    const serverPer = (idle.serverRss - one.serverRss) / Math.max(1, n - 1);
    const idlePer = mean(idle.perContainer.map((m) => m.stats)) + serverPer;
    const busyPer = mean(busy.perContainer.map((m) => m.stats)) + (busy.serverRss - one.serverRss) / Math.max(1, n - 1);
    const cap = defaultMaxRunning();
    const byLimit = Math.floor((os.totalmem() * 0.5) / SANDBOX_MEMORY_BYTES);
    const byIdle = Math.floor((os.totalmem() * 0.5) / idlePer);
    console.log(
      `\nper workspace: idle ${fmt(idlePer / MiB, 1)} MiB, in a turn ${fmt(busyPer / MiB, 1)} MiB (container as docker stats counts it + server RSS growth ${fmt(serverPer / MiB, 1)} MiB/workspace); ` +
        `idle CPU mean ${fmt(mean(idle.cpuPct), 2)}% per container, in a turn ${fmt(mean(busy.cpuPct), 2)}%`,
    );
    console.log(
      `default cap here: ${cap} (half of ${fmt(os.totalmem() / 2 ** 30, 1)} GiB / ${SANDBOX_MEMORY_BYTES / MiB} MiB limit = ${byLimit}, clamped to 8); ` +
        `half of memory at the measured idle footprint would hold ${byIdle}`,
    );
    console.log(`\nrestart with ${n} running containers: server spawn → listening ${fmt(restartMs)} ms, reconcile ${rec ? `${rec.ms} ms (${rec.containers} containers)` : '-'}, ${stillRunning} still running after; teardown of all ${n} one by one ${fmt(teardownAll)} ms`);
    console.log(`\nsummary (${runtime}): ${n} running workspaces${stoppedEarly}: ${fmt(idlePer / MiB, 1)} MiB each idle, ${fmt(busyPer / MiB, 1)} MiB in a turn; default cap ${cap} vs ${byIdle} by measured idle memory; reconcile with ${n} running ${rec?.ms ?? '-'} ms`);
    console.log(`after: ${machineNote()}`);
    return { runtime, n, idlePer, busyPer, byIdle, cap, reconcileMs: rec?.ms ?? null };
  } finally {
    await done();
  }
}

async function main(): Promise<void> {
  const all: Summary[] = [];
  for (const runtime of await benchRuntimes()) all.push(await benchRuntime(runtime));
  console.log('\nby runtime (per workspace: container as docker stats counts it + server RSS growth)\n');
  table(['runtime', 'running', 'idle MiB', 'in a turn MiB', 'fit in half of memory', 'default cap', 'reconcile ms', 'goal'], all.map((x) => [
    x.runtime, x.n, fmt(x.idlePer / MiB, 1), fmt(x.busyPer / MiB, 1), x.byIdle, x.cap, x.reconcileMs ?? '-', 'idle ≤ 512 MiB limit, fit ≥ default cap',
  ]));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
