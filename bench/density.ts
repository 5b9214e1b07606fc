// Benchmark: density - memory per running workspace (container cgroup + server RSS), idle and in a turn, N workspaces on the real server; then start-up reconciliation with them running.
// Each on every runtime of BENCH_RUNTIMES (default runc, and runsc when the engine has it) and every agent of BENCH_AGENTS
// (default scripted,claude: the real Claude Code binary against a local fake Messages API on loopback), then side by side.
// Run: npm run bench:density -w @grove/bench   (env BENCH_DENSITY=20, BENCH_RUNTIMES, BENCH_AGENTS; stops early when less than 3 GiB is available)
import fs from 'node:fs';
import os from 'node:os';
import type { SandboxRuntime } from '@grove/contracts';
import { TOKEN, cleanup, startServer, waitRunning } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { WORKSPACES_PER_CORE, WORKSPACE_MEMORY_BUDGET_BYTES, defaultMaxRunning } from '../apps/server/src/env.ts';
import { startFakeAnthropic } from '../packages/egress/src/test-support/fake-anthropic.ts';
import type { FakeAnthropic } from '../packages/egress/src/test-support/fake-anthropic.ts';
import { MiB, benchRuntimes, docker, fmt, machineNote, mkTemp, onCleanup, pct, reconcileLog, rssOf, sleep, table, until } from './lib.ts';

const N = Number(process.env.BENCH_DENSITY ?? 20);
const MIN_AVAILABLE = 3 * 2 ** 30;
type Agent = 'scripted' | 'claude';
const AGENTS: Agent[] = (process.env.BENCH_AGENTS ?? 'scripted,claude').split(',').map((a) => a.trim()).filter((a): a is Agent => a === 'scripted' || a === 'claude');

interface Mem {
  /** What the kernel charges the cgroup (anon + page cache + tmpfs + kernel). */
  usage: number;
  /** Anonymous memory (the processes' heaps and stacks). */
  anon: number;
  /** What `docker stats` shows: usage minus inactive file pages. */
  stats: number;
  /** The most the cgroup was ever charged (memory.max_usage_in_bytes, memory.peak): what a turn's spike needed. */
  peak: number;
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
    const peak = Number(fs.readFileSync(`${v1}/memory.max_usage_in_bytes`, 'utf8'));
    return { usage, anon: st.get('total_rss') ?? 0, stats: usage - (st.get('total_inactive_file') ?? 0), peak };
  }
  for (const v2 of [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`]) {
    if (!fs.existsSync(v2)) continue;
    const usage = Number(fs.readFileSync(`${v2}/memory.current`, 'utf8'));
    const st = readStat(`${v2}/memory.stat`);
    const peakFile = `${v2}/memory.peak`;
    const peak = fs.existsSync(peakFile) ? Number(fs.readFileSync(peakFile, 'utf8')) : usage;
    return { usage, anon: st.get('anon') ?? 0, stats: usage - (st.get('inactive_file') ?? 0), peak };
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

interface Summary { runtime: SandboxRuntime; agent: Agent; n: number; idlePer: number; busyPer: number; peakPer: number; byIdle: number; byPeak: number; cap: number; reconcileMs: number | null }

const FAKE_KEY = 'sk-ant-bench-density-0000';

/** A turn in every workspace at once, sampled while it runs. scripted: `sleep 3000`. claude: the real binary on
 * `slow` (the fake model streams until the client goes away), sampled once the fake has seen every workspace's
 * request (docker top fails under runsc, so the model's side is what tells the binary is up), then cancelled. */
async function turnEverywhere(o: { server: RunningServer; slugs: string[]; agent: Agent; fake: FakeAnthropic | null }): Promise<Sample> {
  const { server, slugs, agent, fake } = o;
  const before = fake?.requests.length ?? 0;
  const post = (slug: string, p: string, body?: unknown) =>
    fetch(`${server.base}/w/${slug}${p}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }).then((r) => r.status);
  const t0 = Date.now();
  const posts = await Promise.all(slugs.map((slug) => post(slug, '/messages', { text: agent === 'claude' ? 'slow' : 'sleep 3000' })));
  if (posts.some((st) => st !== 202)) throw new Error(`messages answered ${posts.join(',')}`);
  if (fake) {
    const slowSeen = () => fake.requests.slice(before).filter((r) => r.url.startsWith('/v1/messages') && !r.url.includes('count_tokens') && JSON.stringify(r.body?.messages ?? []).includes('slow')).length;
    await until('every claude turn streaming', async () => slowSeen() >= slugs.length, 250, 180_000);
    await sleep(2_000);
  } else {
    await sleep(1_500 - (Date.now() - t0));
  }
  const busy = await sample(server, true);
  if (fake) await Promise.all(slugs.map((slug) => post(slug, '/turn/cancel')));
  await until(
    'turns finished',
    async () => {
      const st = await Promise.all(slugs.map((slug) => fetch(`${server.base}/w/${slug}/status`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.json() as Promise<{ busy: boolean }>)));
      return st.every((x) => !x.busy);
    },
    250,
    60_000,
  );
  return busy;
}

async function benchRuntime(runtime: SandboxRuntime, agent: Agent): Promise<Summary> {
  console.log(`\n=== runtime ${runtime}, agent ${agent}\ndensity: up to ${N} running workspaces on the real server; ${machineNote()}`);
  const home = mkTemp(`density-${runtime}-${agent}`);
  let server: RunningServer | undefined;
  const fake = agent === 'claude' ? await startFakeAnthropic() : null;
  const env: Record<string, string> = { GROVE_MAX_RUNNING: String(N), GROVE_DEMO: 'true', LOG_LEVEL: 'info', GROVE_RUNTIME: runtime };
  if (fake) Object.assign(env, { ANTHROPIC_API_KEY: FAKE_KEY, GROVE_ANTHROPIC_UPSTREAM: fake.url });
  const done = onCleanup(async () => {
    await server?.stop().catch(() => undefined);
    await fake?.close();
    cleanup(home);
  });
  try {
    server = await startServer({ home, env });
    await waitRunning(server, 'demo');
    const slugs: string[] = [];
    if (agent === 'claude') {
      // The demo's default workspace started with the scripted agent: it is stopped, and every measured one is
      // forked after the project's agent is claude.
      const put = await server.api('PUT', '/api/projects/demo/config', { agent: { provider: 'claude' } });
      if (put.status !== 200) throw new Error(`project config: ${put.status} ${JSON.stringify(put.body)}`);
      await server.api('POST', '/api/workspaces/demo/stop');
      const r = await server.api('POST', '/api/workspaces', { project: 'demo', name: 'd0' });
      if (r.status !== 201) throw new Error(`fork d0: ${r.status} ${JSON.stringify(r.body)}`);
      await waitRunning(server, 'demo~d0');
      slugs.push('demo~d0');
    } else {
      slugs.push('demo');
    }
    await sleep(2_000);
    const one = await sample(server);
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
    const busy = await turnEverywhere({ server, slugs, agent, fake });

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
      row(`${n} peak so far, cgroup`, busy, (m) => m.peak),
    ]);
    const serverPer = (idle.serverRss - one.serverRss) / Math.max(1, n - 1);
    const idlePer = mean(idle.perContainer.map((m) => m.stats)) + serverPer;
    const busyPer = mean(busy.perContainer.map((m) => m.stats)) + (busy.serverRss - one.serverRss) / Math.max(1, n - 1);
    const peakPer = mean(busy.perContainer.map((m) => m.peak)) + (busy.serverRss - one.serverRss) / Math.max(1, n - 1);
    const byPeak = Math.floor((os.totalmem() * 0.5) / peakPer);
    const cap = defaultMaxRunning();
    const byBudget = Math.floor((os.totalmem() * 0.5) / WORKSPACE_MEMORY_BUDGET_BYTES);
    const byIdle = Math.floor((os.totalmem() * 0.5) / idlePer);
    console.log(
      `\nper workspace: idle ${fmt(idlePer / MiB, 1)} MiB, in a turn ${fmt(busyPer / MiB, 1)} MiB (container as docker stats counts it + server RSS growth ${fmt(serverPer / MiB, 1)} MiB/workspace); ` +
        `idle CPU mean ${fmt(mean(idle.cpuPct), 2)}% per container, in a turn ${fmt(mean(busy.cpuPct), 2)}%`,
    );
    console.log(
      `default cap here: ${cap} (the smaller of half of ${fmt(os.totalmem() / 2 ** 30, 1)} GiB / ${WORKSPACE_MEMORY_BUDGET_BYTES / MiB} MiB budget = ${byBudget} and ${WORKSPACES_PER_CORE} per core = ${os.availableParallelism() * WORKSPACES_PER_CORE}); ` +
        `half of memory at the measured idle footprint would hold ${byIdle}`,
    );
    console.log(`\nrestart with ${n} running containers: server spawn → listening ${fmt(restartMs)} ms, reconcile ${rec ? `${rec.ms} ms (${rec.containers} containers)` : '-'}, ${stillRunning} still running after; teardown of all ${n} one by one ${fmt(teardownAll)} ms`);
    console.log(`\nsummary (${runtime}, ${agent}): ${n} running workspaces${stoppedEarly}: ${fmt(idlePer / MiB, 1)} MiB each idle, ${fmt(busyPer / MiB, 1)} MiB in a turn (peak ${fmt(peakPer / MiB, 1)}); default cap ${cap} vs ${byIdle} by measured idle memory, ${byPeak} at the turn's peak; reconcile with ${n} running ${rec?.ms ?? '-'} ms`);
    console.log(`after: ${machineNote()}`);
    return { runtime, agent, n, idlePer, busyPer, peakPer, byIdle, byPeak, cap, reconcileMs: rec?.ms ?? null };
  } finally {
    await done();
  }
}

async function main(): Promise<void> {
  const all: Summary[] = [];
  for (const runtime of await benchRuntimes()) for (const agent of AGENTS) all.push(await benchRuntime(runtime, agent));
  console.log('\nby runtime and agent (per workspace: container as docker stats counts it + server RSS growth; peak: the cgroup high-water mark)\n');
  table(['runtime', 'agent', 'running', 'idle MiB', 'in a turn MiB', 'peak MiB', 'fit in half (idle)', 'fit in half (peak)', 'default cap', 'reconcile ms', 'goal'], all.map((x) => [
    x.runtime, x.agent, x.n, fmt(x.idlePer / MiB, 1), fmt(x.busyPer / MiB, 1), fmt(x.peakPer / MiB, 1), x.byIdle, x.byPeak, x.cap, x.reconcileMs ?? '-', 'peak ≤ 512 MiB limit, fit (peak) ≥ default cap',
  ]));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
