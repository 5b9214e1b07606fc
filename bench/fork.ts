// Benchmark: fork-to-ready and teardown through the real server, side by side with the floor (git worktree add + docker run + /health), interleaved in one run.
// Beside them, warm forks: a second server with GROVE_WARM_POOL=1, each fork taking the warm sandbox (the pool is ready before each).
// Each on every runtime of BENCH_RUNTIMES (default runc, and runsc when the engine has it), then side by side.
// Run: npm run bench:fork -w @grove/bench (both tables) | npm run bench:teardown -w @grove/bench (teardown table only)   env BENCH_FORKS (default 20), BENCH_RUNTIMES
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { EventsResponse, GroveEvent, ListWorkspacesResponse, SandboxRuntime } from '@grove/contracts';
import { TOKEN, cleanup, containerOf, startServer, waitRunning } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { benchRuntimes, docker, fmt, getOverSocket, gitIn, machineNote, mkTemp, onCleanup, pct, pidsLimitFor, sh, table, until } from './lib.ts';

const FORKS = Number(process.env.BENCH_FORKS ?? 20);
// The servers' image (GROVE_IMAGE reaches them through the harness), so the floor runs what Grove runs.
const IMAGE = process.env.GROVE_IMAGE ?? 'grove-sandbox:latest';
const teardownOnly = process.argv.includes('--teardown');
const RUN = `${process.pid}`;
const FLOOR_LABEL = `grove.bench=fork-${RUN}`;

interface ForkSample {
  total: number;
  /** POST sent → workspace.reserved (validation, docker ping, branch name under the repo lock, reservation). */
  pre: number;
  /** reserved → prepared: git worktree add + chown. */
  worktree: number;
  /** prepared → sandbox.started: dirs, image check, container create + start. */
  container: number;
  /** sandbox.started → registered: waiting for the backend's /health over the socket. */
  health: number;
  /** registered → /w/<slug>/health answered through the proxy (HTTP response + one proxied request). */
  tail: number;
}

/** Untimed: the warm server's pool has its warm sandbox ready again (the refill after the previous fork). */
async function warmReady(s: RunningServer): Promise<void> {
  await until('a ready warm sandbox', async () => ((await s.api<ListWorkspacesResponse>('GET', '/api/workspaces')).body.capacity.warm ?? 0) >= 1, 20, 60_000);
}

/** A fork on the warm server that must have claimed the warm sandbox (else it measured a cold start). */
async function warmFork(s: RunningServer, name: string): Promise<ForkSample> {
  await warmReady(s);
  const sample = await groveFork(s, name);
  const ev = (await s.api<EventsResponse>('GET', `/api/events?slug=${encodeURIComponent(`demo~${name}`)}`)).body.events;
  if (!ev.some((e) => e.type === 'sandbox.started' && e.data.warm === true)) throw new Error(`warm fork ${name} did not claim the warm sandbox`);
  return sample;
}

interface FloorSample {
  total: number;
  worktree: number;
  container: number;
  health: number;
}

const now = (): number => performance.now();

async function groveFork(s: RunningServer, name: string): Promise<ForkSample> {
  const slug = `demo~${name}`;
  const wall0 = Date.now();
  const t0 = now();
  const r = await s.api('POST', '/api/workspaces', { project: 'demo', name });
  if (r.status !== 201) throw new Error(`fork ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  await until(
    `${slug} through the proxy`,
    async () => (await fetch(`${s.base}/w/${slug}/health`, { headers: { authorization: `Bearer ${TOKEN}` } })).status === 200,
    10,
  );
  const total = now() - t0;
  const wallEnd = wall0 + total;
  const ev = (await s.api<EventsResponse>('GET', `/api/events?slug=${encodeURIComponent(slug)}`)).body.events;
  const at = (type: string): number => {
    const e = ev.filter((x: GroveEvent) => x.type === type).at(-1);
    if (!e) throw new Error(`${slug}: no ${type} event`);
    return Date.parse(e.at);
  };
  const [res, pre, sb, reg] = [at('workspace.reserved'), at('workspace.prepared'), at('sandbox.started'), at('workspace.registered')];
  return { total, pre: res - wall0, worktree: pre - res, container: sb - pre, health: reg - sb, tail: wallEnd - reg };
}

interface Floor {
  name: string;
  worktree: string;
  dirs: string[];
}

/** The same steps Grove takes, by hand: worktree + chown to uid 1000, the dirs, `docker run` with the same flags and mounts, poll /health. */
async function floorFork(home: string, name: string, base: string, runtime: SandboxRuntime): Promise<{ sample: FloorSample; floor: Floor }> {
  const repo = path.join(home, 'repos/demo');
  const wt = path.join(home, 'floor/worktrees', name);
  const slug = `demo~${name}`;
  const [run, thread, state] = ['run', 'thread', 'state'].map((d) => path.join(home, 'floor', d, name)) as [string, string, string];
  const cname = `grove-bench-${RUN}-${runtime}-${name}`;
  const t0 = now();
  await gitIn(repo, 'worktree', 'add', '-q', '-b', `bench/${name}`, wt, base);
  const admin = readFileSync(path.join(wt, '.git'), 'utf8').replace(/^gitdir:\s*/, '').trim();
  for (const d of [run, thread, state]) mkdirSync(d, { recursive: true });
  await sh('chown', ['-R', '-h', '1000:1000', wt, admin, run, thread, state]);
  const t1 = now();
  const mount = (src: string, dst: string, ro = false) => ['--mount', `type=bind,source=${src},target=${dst},bind-propagation=rprivate${ro ? ',readonly' : ''}`];
  await docker(
    'run', '-d', '--name', cname, '--label', FLOOR_LABEL,
    '--user', '1000:1000', '--workdir', '/workspace', '--network', 'none', '--read-only',
    '--tmpfs', '/tmp:rw,exec,nosuid,nodev,size=256m,mode=1777',
    '--tmpfs', '/home/grove:rw,exec,nosuid,nodev,size=64m,mode=0755,uid=1000,gid=1000',
    '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--init',
    '--runtime', runtime, '--pids-limit', String(pidsLimitFor(runtime, 256)), '--memory', '512m', '--memory-swap', '512m', '--cpus', '1',
    '--log-driver', 'json-file', '--log-opt', 'max-size=5m', '--log-opt', 'max-file=2',
    ...mount(wt, '/workspace'), ...mount(repo, repo, true), ...mount(admin, admin),
    ...mount(run, '/run/grove'), ...mount(thread, '/var/lib/grove/thread'), ...mount(state, '/home/grove/.claude'),
    '-e', 'HOME=/home/grove', '-e', 'GIT_CONFIG_COUNT=1', '-e', 'GIT_CONFIG_KEY_0=safe.directory', '-e', 'GIT_CONFIG_VALUE_0=*',
    '-e', 'GROVE_PROVIDER=scripted', '-e', `GROVE_SLUG=${slug}`, '-e', 'GROVE_PROJECT=demo',
    IMAGE,
  );
  const t2 = now();
  // Polled every 10 ms: the floor is what the steps cost, not what a polling interval adds.
  await until(`${slug} floor /health`, async () => (await getOverSocket(path.join(run, 'backend.sock'), '/health')).status === 200, 10, 30_000);
  const t3 = now();
  return { sample: { total: t3 - t0, worktree: t1 - t0, container: t2 - t1, health: t3 - t2 }, floor: { name: cname, worktree: wt, dirs: [run, thread, state] } };
}

async function groveTeardown(s: RunningServer, name: string): Promise<{ del: number; gone: number }> {
  const slug = `demo~${name}`;
  const wt = path.join(s.home, 'worktrees/demo', name);
  const t0 = now();
  const r = await s.api('DELETE', `/api/workspaces/${slug}`);
  const del = now() - t0;
  if (r.status !== 200) throw new Error(`teardown ${slug}: ${r.status} ${JSON.stringify(r.body)}`);
  // The check itself costs a docker CLI call; when it passes at once, "gone" is the DELETE's own time.
  let gone = del;
  let first = true;
  await until(
    `${slug} gone`,
    async () => {
      const t = now();
      const ok = !containerOf(s.instance, slug) && !existsSync(wt);
      if (ok && !first) gone = t - t0;
      first = false;
      return ok;
    },
    10,
  );
  return { del, gone };
}

async function floorTeardown(home: string, f: Floor): Promise<number> {
  const t0 = now();
  await docker('rm', '-f', f.name);
  await gitIn(path.join(home, 'repos/demo'), 'worktree', 'remove', '--force', f.worktree);
  for (const d of f.dirs) rmSync(d, { recursive: true, force: true });
  return now() - t0;
}

function row(label: string, v: number[]): Array<string | number> {
  return [label, fmt(pct(v, 50)), fmt(pct(v, 95)), fmt(Math.min(...v)), fmt(Math.max(...v))];
}

interface Summary { runtime: SandboxRuntime; g50: number; g95: number; w50: number; w95: number; f50: number; f95: number; t50: number; t95: number; tf50: number }

async function benchRuntime(runtime: SandboxRuntime): Promise<Summary> {
  const home = mkTemp(`fork-${runtime}`);
  const warmHome = mkTemp(`fork-warm-${runtime}`);
  let server: RunningServer | undefined;
  let warmServer: RunningServer | undefined;
  const floors: Floor[] = [];
  const cleanupAll = onCleanup(async () => {
    await server?.stop().catch(() => undefined);
    await warmServer?.stop().catch(() => undefined);
    cleanup(warmHome);
    const ids = (await docker('ps', '-aq', '--filter', `label=${FLOOR_LABEL}`)).split('\n').filter(Boolean);
    if (ids.length) await docker('rm', '-f', ...ids);
    cleanup(home);
  });
  try {
    console.log(`\n=== runtime ${runtime}\nfork-to-ready: ${FORKS} forks, interleaved with the floor; ${machineNote()}`);
    server = await startServer({ home, env: { GROVE_MAX_RUNNING: String(FORKS + 2), GROVE_DEMO: 'true', LOG_LEVEL: 'info', GROVE_RUNTIME: runtime } });
    await waitRunning(server, 'demo');
    warmServer = await startServer({ home: warmHome, env: { GROVE_MAX_RUNNING: String(FORKS + 3), GROVE_DEMO: 'true', LOG_LEVEL: 'info', GROVE_RUNTIME: runtime, GROVE_WARM_POOL: '1' } });
    await waitRunning(warmServer, 'demo');
    const base = (await gitIn(path.join(home, 'repos/demo'), 'rev-parse', 'main')).trim();
    // One untimed round each, so the first timed fork does not pay for cold caches (image layers, git pack).
    await groveFork(server, 'warm');
    await warmFork(warmServer, 'warm');
    floors.push((await floorFork(home, 'floor-warm', base, runtime)).floor);

    const grove: ForkSample[] = [];
    const warm: ForkSample[] = [];
    const floor: FloorSample[] = [];
    for (let i = 0; i < FORKS; i++) {
      // Rotate which goes first so none always runs on the others' leftovers.
      const g = async () => grove.push(await groveFork(server!, `f${i}`));
      const w = async () => warm.push(await warmFork(warmServer!, `f${i}`));
      const f = async () => {
        const r = await floorFork(home, `floor-f${i}`, base, runtime);
        floor.push(r.sample);
        floors.push(r.floor);
      };
      const order = [[g, w, f], [f, g, w], [w, f, g]][i % 3] ?? [g, w, f];
      for (const step of order) await step();
    }

    const tdGrove: Array<{ del: number; gone: number }> = [];
    const tdFloor: number[] = [];
    for (let i = 0; i < FORKS; i++) {
      const g = async () => tdGrove.push(await groveTeardown(server!, `f${i}`));
      const fl = floors.find((x) => x.name.endsWith(`-floor-f${i}`));
      const f = async () => {
        if (fl) tdFloor.push(await floorTeardown(home, fl));
      };
      if (i % 2 === 0) await g().then(f);
      else await f().then(g);
    }

    const g50 = pct(grove.map((x) => x.total), 50);
    const f50 = pct(floor.map((x) => x.total), 50);
    const g95 = pct(grove.map((x) => x.total), 95);
    const f95 = pct(floor.map((x) => x.total), 95);
    const w50 = pct(warm.map((x) => x.total), 50);
    const w95 = pct(warm.map((x) => x.total), 95);
    if (!teardownOnly) {
      console.log(`\nfork-to-ready, ms (${FORKS} forks each; Grove: POST /api/workspaces → GET /w/<slug>/health = 200 through the proxy)\n`);
      table(['phase', 'p50', 'p95', 'min', 'max'], [
        row('Grove total', grove.map((x) => x.total)),
        row('  POST → reserved', grove.map((x) => x.pre)),
        row('  reserved → prepared (worktree)', grove.map((x) => x.worktree)),
        row('  prepared → sandbox.started', grove.map((x) => x.container)),
        row('  sandbox.started → registered (health)', grove.map((x) => x.health)),
        row('  registered → proxied /health', grove.map((x) => x.tail)),
        row('Grove warm total (GROVE_WARM_POOL=1)', warm.map((x) => x.total)),
        row('  POST → reserved', warm.map((x) => x.pre)),
        row('  reserved → prepared (worktree into the warm dirs)', warm.map((x) => x.worktree)),
        row('  prepared → sandbox.started (claim: rename)', warm.map((x) => x.container)),
        row('  sandbox.started → registered (claim + health)', warm.map((x) => x.health)),
        row('  registered → proxied /health', warm.map((x) => x.tail)),
        row('floor total', floor.map((x) => x.total)),
        row('  git worktree add + chown + dirs', floor.map((x) => x.worktree)),
        row('  docker run -d (CLI)', floor.map((x) => x.container)),
        row('  → /health on the socket (10 ms poll)', floor.map((x) => x.health)),
      ]);
      console.log(`\nsummary (${runtime}): warm fork-to-ready p50 ${fmt(w50)} ms / p95 ${fmt(w95)} ms (goal p50 < 300 ms), ${fmt(w50 / f50, 2)}x the floor`);
      console.log(`\nsummary (${runtime}): Grove fork-to-ready p50 ${fmt(g50)} ms / p95 ${fmt(g95)} ms vs floor p50 ${fmt(f50)} ms / p95 ${fmt(f95)} ms: ratio ${fmt(g50 / f50, 2)}x at p50, ${fmt(g95 / f95, 2)}x at p95 (goal ≤ 1.3x, p50 < 1500 ms)`);
    }

    console.log(`\nteardown, ms (${FORKS} each; Grove: DELETE /api/workspaces/<slug> → container and worktree gone; floor: docker rm -f + git worktree remove --force + rm dirs)\n`);
    table(['what', 'p50', 'p95', 'min', 'max'], [
      row('Grove DELETE → gone', tdGrove.map((x) => x.gone)),
      row('  DELETE answered', tdGrove.map((x) => x.del)),
      row('floor', tdFloor),
    ]);
    const t50 = pct(tdGrove.map((x) => x.gone), 50);
    console.log(`\nsummary (${runtime}): teardown p50 ${fmt(t50)} ms / p95 ${fmt(pct(tdGrove.map((x) => x.gone), 95))} ms vs floor p50 ${fmt(pct(tdFloor, 50))} ms (${fmt(t50 / pct(tdFloor, 50), 2)}x)`);
    console.log(`after: ${machineNote()}`);
    return { runtime, g50, g95, w50, w95, f50, f95, t50, t95: pct(tdGrove.map((x) => x.gone), 95), tf50: pct(tdFloor, 50) };
  } finally {
    await cleanupAll();
  }
}

async function main(): Promise<void> {
  const runtimes = await benchRuntimes();
  const all: Summary[] = [];
  // One runtime after the other, each with its own server and floor: the figures land side by side from one run.
  for (const runtime of runtimes) all.push(await benchRuntime(runtime));
  console.log(`\nby runtime, ms (${FORKS} forks each)\n`);
  if (!teardownOnly) {
    table(['runtime', 'fork p50', 'fork p95', 'warm p50', 'warm p95', 'floor p50', 'floor p95', 'ratio p50', 'goal'], all.map((x) => [x.runtime, fmt(x.g50), fmt(x.g95), fmt(x.w50), fmt(x.w95), fmt(x.f50), fmt(x.f95), `${fmt(x.g50 / x.f50, 2)}x`, '≤ 1.3x floor, p50 < 1500 ms; warm p50 < 300 ms']));
    console.log('');
  }
  table(['runtime', 'teardown p50', 'teardown p95', 'floor p50', 'ratio p50'], all.map((x) => [x.runtime, fmt(x.t50), fmt(x.t95), fmt(x.tf50), `${fmt(x.t50 / x.tf50, 2)}x`]));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
