// Benchmark: proxy overhead for 1 KiB and 256 KiB responses, side by side in one run: straight to the Unix
// socket, nginx (one worker, upstream keep-alive), configurable-http-proxy, http-proxy and http-proxy-3 (both
// with a keep-alive agent), and Grove's front door (/w/<slug>/ with auth and routing, which uses http-proxy),
// once with a stub registry (the proxy path alone) and once over the real SQLite registry (what the server does);
// then the path users get: the real server (dashboard mounted when apps/web is built, real SQLite registry) in front
// of the demo workspace's real sandboxed backend (GET /w/demo/status) beside its backend.sock, on each runtime of
// BENCH_RUNTIMES.
// Run: npm run bench:proxy -w @grove/bench   (env BENCH_SECONDS, BENCH_CONNECTIONS, BENCH_ROUNDS, BENCH_RUNTIMES)
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import type { SandboxRuntime } from '@grove/contracts';
import { WEB_DIR } from '../e2e/browser.ts';
import { TOKEN, cleanup, startServer, waitRunning } from '../e2e/harness.ts';
import type { RunningServer } from '../e2e/harness.ts';
import { benchRuntimes, fmt, freePort, machineNote, mkTemp, onCleanup, pct, portOpen, startNginx, stopChildren, table, until } from './lib.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 20);
// The machine is shared: each target's time is split into rounds run round-robin, so a burst of someone
// else's load lands on every target rather than on whichever happened to be running.
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const dir = mkTemp('proxy');
const socketPath = path.join(dir, 'upstream.sock');
const children: ChildProcess[] = [];
const servers: RunningServer[] = [];
/** Every home a sandboxed server was started in, cleaned up even when its server never came up. */
const homes: string[] = [];

/** The real server with its demo workspace running on this runtime: the front door in front of a sandboxed backend. */
async function startSandboxed(runtime: SandboxRuntime, env: Record<string, string> = {}): Promise<RunningServer> {
  const home = mkTemp(`proxy-${runtime}`);
  homes.push(home);
  // The dashboard mounted as `npm run up` mounts it (Next's handler in the same process), when it is built.
  const web: Record<string, string> = fs.existsSync(path.join(WEB_DIR, '.next', 'BUILD_ID')) ? { GROVE_WEB_DIR: WEB_DIR } : {};
  if (!web['GROVE_WEB_DIR']) console.log('apps/web is not built (npm run build -w @grove/web): the sandboxed rows run without the dashboard');
  const s = await startServer({ home, env: { GROVE_RUNTIME: runtime, ...web, ...env } });
  servers.push(s);
  await waitRunning(s, 'demo');
  return s;
}

function child(role: string): Promise<Record<string, unknown>> {
  const c = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'proxy-targets.ts'), role, socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(c);
  return new Promise((resolve, reject) => {
    c.once('exit', (code) => reject(new Error(`${role} exited ${code}`)));
    readline.createInterface({ input: c.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>));
  });
}

/** configurable-http-proxy (npm) with its default target on the same Unix socket (CHP uses no agent for sockets). */
async function startChp(): Promise<number | null> {
  let bin: string;
  try {
    bin = path.join(path.dirname(createRequire(import.meta.url).resolve('configurable-http-proxy/package.json')), 'bin/configurable-http-proxy');
  } catch {
    console.log('configurable-http-proxy not installed (npm i -D -w @grove/bench configurable-http-proxy): skipping its rows');
    return null;
  }
  const [port, apiPort] = [await freePort(), await freePort()];
  const c = spawn(
    process.execPath,
    [bin, '--ip', '127.0.0.1', '--port', String(port), '--api-ip', '127.0.0.1', '--api-port', String(apiPort), '--default-target', `http+unix://${encodeURIComponent(socketPath)}`, '--log-level', 'error'],
    { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, CONFIGPROXY_AUTH_TOKEN: 'bench-token-0123456789' } },
  );
  children.push(c);
  await until('configurable-http-proxy listening', () => portOpen(port), 50, 15_000);
  return port;
}

interface Row { target: string; size: string; rps: number; p50: number; p99: number; errors: number }
interface Cell { target: string; size: string; opts: autocannon.Options; runs: autocannon.Result[] }

/** req/s over all rounds (total requests / total time); latency percentiles are the median of the rounds'. */
function summarise(c: Cell): Row {
  const total = c.runs.reduce((a, r) => a + r.requests.total, 0);
  const secs = c.runs.reduce((a, r) => a + r.duration, 0);
  const errors = c.runs.reduce((a, r) => a + r.errors + r.non2xx, 0);
  return { target: c.target, size: c.size, rps: Math.round(total / secs), p50: pct(c.runs.map((r) => r.latency.p50), 50), p99: pct(c.runs.map((r) => r.latency.p99), 50), errors };
}

async function main(): Promise<void> {
  console.log(`proxy overhead: ${connections} connections, ${seconds} s per target in ${rounds} round-robin rounds, autocannon; ${machineNote()}`);
  await child('upstream');
  const ports = (await child('proxies')) as { httpProxy: number; httpProxy3: number; grove: number; groveReal: number; groveNoLane: number };
  const nginx = await startNginx({ dir, children, upstream: socketPath, name: 'stub' });
  const chp = await startChp();
  const cells: Cell[] = [];
  const add = (target: string, size: string, opts: autocannon.Options) => cells.push({ target, size, opts, runs: [] });
  const auth = { authorization: 'Bearer bench-token-0123456789' };
  for (const size of ['1k', '256k']) {
    add('direct unix socket', size, { url: `http://localhost/${size}`, socketPath } as autocannon.Options);
    if (nginx) add('nginx, 1 worker, upstream keep-alive', size, { url: `http://127.0.0.1:${nginx}/${size}` });
    if (chp) add('configurable-http-proxy', size, { url: `http://127.0.0.1:${chp}/${size}` });
    add('http-proxy + keep-alive agent', size, { url: `http://127.0.0.1:${ports.httpProxy}/${size}` });
    add('http-proxy-3 + keep-alive agent', size, { url: `http://127.0.0.1:${ports.httpProxy3}/${size}` });
    add('Grove /w/<slug>/, stub registry', size, { url: `http://127.0.0.1:${ports.grove}/w/bench/${size}`, headers: auth });
    add('Grove /w/<slug>/, real registry (SQLite)', size, { url: `http://127.0.0.1:${ports.groveReal}/w/bench/${size}`, headers: auth });
    add('Grove /w/<slug>/, stub, no fast lane', size, { url: `http://127.0.0.1:${ports.groveNoLane}/w/bench/${size}`, headers: auth });
  }
  const runtimes = await benchRuntimes();
  for (const runtime of runtimes) {
    const s = await startSandboxed(runtime);
    const backendSock = path.join(s.home, 'run', 'demo', 'backend.sock');
    add(`sandbox backend.sock (${runtime})`, 'status', { url: 'http://localhost/status', socketPath: backendSock } as autocannon.Options);
    add(`Grove /w/demo/, sandboxed backend (${runtime})`, 'status', { url: `${s.base}/w/demo/status`, headers: { authorization: `Bearer ${TOKEN}` } });
    // nginx in front of the same backend.sock: what the third process on this machine costs any proxy, as a yardstick
    // for the goal against going straight to the socket.
    const n = await startNginx({ dir, children, upstream: backendSock, name: runtime });
    if (n) add(`nginx to the sandboxed backend (${runtime})`, 'status', { url: `http://127.0.0.1:${n}/status` });
    // The same path with the fast lane off (GROVE_FAST_LANE=0), a server and sandbox of its own, on runc only (on runsc
    // the sandbox's socket is the limit either way).
    if (runtime === 'runc') {
      const off = await startSandboxed(runtime, { GROVE_FAST_LANE: '0' });
      add(`Grove /w/demo/, no fast lane (${runtime})`, 'status', { url: `${off.base}/w/demo/status`, headers: { authorization: `Bearer ${TOKEN}` } });
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (const c of cells) c.runs.push(await autocannon({ connections, duration: seconds / rounds, ...c.opts }));
  }
  const rows = cells.map(summarise);
  console.log('');
  table(['target', 'size', 'req/s', 'p50 ms', 'p99 ms', 'errors'], rows.map((r) => [r.target, r.size, r.rps, r.p50, r.p99, r.errors]));
  const pick = (t: string, s: string) => rows.find((r) => r.target.startsWith(t) && r.size === s);
  const rps = (t: string, s: string) => pick(t, s)?.rps ?? Number.NaN;
  const g = pick('Grove /w/<slug>/, real', '1k');
  console.log(
    `\nsummary: 1k Grove front door ${rps('Grove /w/<slug>/, real', '1k')} req/s (p99 ${g?.p99 ?? '-'} ms) = ${fmt(rps('Grove /w/<slug>/, real', '1k') / rps('nginx', '1k'), 2)}x nginx, ` +
      `${fmt(rps('Grove /w/<slug>/, real', '1k') / rps('configurable', '1k'), 2)}x configurable-http-proxy, ${fmt(rps('Grove /w/<slug>/, real', '1k') / rps('direct', '1k'), 2)}x direct; ` +
      `http-proxy ${rps('http-proxy +', '1k')} vs http-proxy-3 ${rps('http-proxy-3', '1k')} req/s (goal: ≥ nginx, ≥ 2.5x CHP, p99 < 3 ms)`,
  );
  console.log('\nthe path users get, by runtime: the server with its dashboard and SQLite registry, the demo backend in its sandbox (GET /w/demo/status)\n');
  table(['runtime', 'Grove req/s', 'p50 ms', 'p99 ms', 'backend.sock req/s', 'ratio', 'goal', 'nginx req/s', 'nginx ratio', 'Grove / nginx', 'no lane req/s'], runtimes.map((rt) => {
    const front = pick(`Grove /w/demo/, sandboxed backend (${rt})`, 'status');
    const sock = pick(`sandbox backend.sock (${rt})`, 'status');
    const ngx = pick(`nginx to the sandboxed backend (${rt})`, 'status');
    const ratio = (a: Row | undefined, b: Row | undefined) => `${fmt((a?.rps ?? Number.NaN) / (b?.rps ?? Number.NaN), 2)}x`;
    const off = pick(`Grove /w/demo/, no fast lane (${rt})`, 'status');
    return [rt, front?.rps ?? '-', front?.p50 ?? '-', front?.p99 ?? '-', sock?.rps ?? '-', ratio(front, sock), '≥ 0.9x backend.sock, p99 < 3 ms', ngx?.rps ?? '-', ratio(ngx, sock), ratio(front, ngx), off?.rps ?? '-'];
  }));
  console.log(`after: ${machineNote()}`);
}

const done = onCleanup(async () => {
  for (const s of servers) await s.stop().catch(() => undefined);
  for (const home of homes) cleanup(home);
  await stopChildren(children);
  fs.rmSync(dir, { recursive: true, force: true });
});

main()
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => done());
